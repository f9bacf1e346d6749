package liveplan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/deploy"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// The live plan of a merge that copies an overlay with its inventory (cp
// -r staging prod, prod's objects renamed) says the deploy will refuse
// it, with the deploy's own words, instead of "would prune 2, add 2";
// the deploy of it is refused as said. A target that allows replacing
// its inventory is told what the apply does.
func TestLivePlanShowsTheDeployRefusal(t *testing.T) {
	cluster := testcluster.Start(t)
	getter := deploy.NewGetter(cluster.Kubeconfig, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cm := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name}, "data": map[string]any{"v": "1"}}}
	}
	// staging's inventory, a ResourceGroup (the default backend).
	inv, err := declared.InventoryObject(kinv.Identity{Name: "staging", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.New(getter).Apply(ctx, inv.DeepCopy(), []*unstructured.Unstructured{cm("staging-a"), cm("staging-b")}, deploy.Options{ReconcileTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	prod := func() []*unstructured.Unstructured { return []*unstructured.Unstructured{cm("prod-a"), cm("prod-b")} }

	res, err := New(getter).Plan(ctx, Input{Inventory: inv.DeepCopy(), Objects: prod()})
	if err != nil {
		t.Fatal(err)
	}
	body := Markdown(&PullPlan{Repo: "org/repo", PR: 7, Base: "main", Head: "abc1234", Targets: []TargetPlan{{Target: "prod", Overlay: "prod", Result: res}}})
	for _, want := range []string{"The deploy will refuse: refusing to apply: it would prune all 2 objects ResourceGroup default/staging", "ConfigMap default/staging-a", "allowReplaceInventory: true"} {
		if !strings.Contains(body, want) {
			t.Errorf("the live plan does not say %q:\n%s", want, body)
		}
	}
	_, err = deploy.New(getter).Apply(ctx, inv.DeepCopy(), prod(), deploy.Options{DryRun: true})
	if !errors.Is(err, deploy.ErrRefused) || !strings.Contains(res.Refused, err.Error()) {
		t.Errorf("the deploy: %v; the live plan said: %s", err, res.Refused)
	}

	res, err = New(getter).Plan(ctx, Input{Inventory: inv.DeepCopy(), Objects: prod(), Options: deploy.Options{AllowReplaceInventory: true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused != "" || res.Count(Prune) != 2 || res.Count(Create) != 2 {
		t.Errorf("with allowReplaceInventory: refused %q, %d to prune, %d to create", res.Refused, res.Count(Prune), res.Count(Create))
	}
}
