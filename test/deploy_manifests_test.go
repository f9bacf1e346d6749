package test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// kplan renders and applies its own deploy/ overlay: the webhook runs
// non-root on a read-only root filesystem, with its config and Secret
// mounted, and the config it ships parses.
func TestDeployManifests(t *testing.T) {
	ctx := context.Background()
	s, err := snapshot.FromFS(os.DirFS("../deploy"), "deploy")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := render.Render(ctx, s.FS, tree, []string{"."}, render.Options{})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("render deploy/: %v %v", err, rs[0].Err)
	}
	tg, err := deploy.TargetOf(rs[0], deploy.Source{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range tg.Objects {
		kinds[o.GetKind()] = true
		if o.GetKind() != "Deployment" {
			continue
		}
		spec := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		if psc := spec["securityContext"].(map[string]any); psc["runAsNonRoot"] != true {
			t.Error("the pod may run as root")
		}
		c := spec["containers"].([]any)[0].(map[string]any)
		sc := c["securityContext"].(map[string]any)
		if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
			t.Errorf("container securityContext %v", sc)
		}
		if !strings.Contains(c["image"].(string), "kplan") {
			t.Errorf("image %v", c["image"])
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ConfigMap"} {
		if !kinds[k] {
			t.Errorf("deploy/ renders no %s", k)
		}
	}
	if _, err := config.Load("../deploy/webhook.yaml"); err != nil {
		t.Errorf("the shipped config: %v", err)
	}

	c := testcluster.Start(t)
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// No controller-manager runs: the Deployment never becomes ready.
	res, err := deploy.New(deploy.NewGetter(c.Kubeconfig, "")).Apply(actx, tg.Inventory, tg.Objects, deploy.Options{ReconcileTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("apply deploy/: %v", err)
	}
	for _, o := range res.Objects {
		if o.Action != deploy.Created {
			t.Errorf("%s: %s %s %s", o.Key, o.Action, o.Reason, o.Error)
		}
	}
}
