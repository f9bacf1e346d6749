package test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// commits of one overlay, each a full set of files under app/.
var agreeCommits = []map[string]string{
	{ // c0
		"kustomization.yaml": "namespace: agree\nresources: [ns.yaml, rg.yaml, a.yaml, b.yaml, svc.yaml, kept.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [x=1]\n",
		"kept.yaml":          "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kept\n  annotations: {client.lifecycle.config.k8s.io/deletion: detach}\nstringData: {k: v}\n",
	},
	{ // c1: b goes, c comes, the generator's input changes
		"kustomization.yaml": "namespace: agree\nresources: [ns.yaml, rg.yaml, a.yaml, c.yaml, svc.yaml, kept.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [x=2]\n",
		"kept.yaml":          "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kept\n  annotations: {client.lifecycle.config.k8s.io/deletion: detach}\nstringData: {k: v}\n",
	},
	{ // c2: the detach-annotated Secret leaves; the Service changes
		"kustomization.yaml": "namespace: agree\nresources: [ns.yaml, rg.yaml, a.yaml, c.yaml, svc2.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [x=2]\n",
	},
	{ // c3: only the namespace and the inventory remain
		"kustomization.yaml": "namespace: agree\nresources: [ns.yaml, rg.yaml]\n",
	},
}

var agreeCommon = map[string]string{
	"ns.yaml":   "apiVersion: v1\nkind: Namespace\nmetadata: {name: agree}\n",
	"rg.yaml":   "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-12345678}\n",
	"a.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: a}\n",
	"b.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: b}\n",
	"c.yaml":    "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: c}\nrules: []\n",
	"svc.yaml":  "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n",
	"svc2.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 8080}]}\n",
}

// The keys kplan diff predicts are exactly what kplan apply creates,
// deletes and leaves in the cluster, when the cluster holds the base.
func TestPlanAgreesWithApply(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	var shas []string
	for i, files := range agreeCommits {
		os.RemoveAll(filepath.Join(dir, "app"))
		os.MkdirAll(filepath.Join(dir, "app"), 0o755)
		for name, content := range agreeCommon {
			os.WriteFile(filepath.Join(dir, "app", name), []byte(content), 0o644)
		}
		for name, content := range files {
			os.WriteFile(filepath.Join(dir, "app", name), []byte(content), 0o644)
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-qm", "c"+string(rune('0'+i)))
		shas = append(shas, git(t, dir, "rev-parse", "HEAD"))
	}

	c := testcluster.Start(t)
	eng := deploy.New(deploy.NewGetter(c.Kubeconfig, ""))
	applyCommit := func(sha string) *deploy.Result {
		t.Helper()
		s, err := snapshot.FromCommit(ctx, dir, sha)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := render.Discover(s.FS, render.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := render.Render(ctx, s.FS, tree, []string{"app"}, render.Options{})
		if err != nil || rs[0].Err != nil {
			t.Fatalf("render %s: %v %v", sha, err, rs[0].Err)
		}
		tg, err := deploy.NewTarget(rs[0], nil, deploy.TargetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		res, err := eng.Apply(actx, tg.Inventory, tg.Objects, deploy.Options{})
		if err != nil || res.Failed() {
			t.Fatalf("apply %s: %v %+v", sha, err, res)
		}
		return res
	}

	applyCommit(shas[0])
	for _, pair := range [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {0, 2}} {
		base, head := shas[pair[0]], shas[pair[1]]
		p, err := plan.Run(ctx, plan.Options{RepoDir: dir, Base: base, Head: head})
		if err != nil {
			t.Fatal(err)
		}
		var o *inventorydiff.Overlay
		for i := range p.Overlays {
			if p.Overlays[i].Path == "app" {
				o = &p.Overlays[i]
			}
		}
		wantCreated, wantPruned := slices.Clone(o.Added), slices.Clone(o.Pruned)
		for _, ch := range o.Changed {
			if ch.Replaced() {
				wantCreated = append(wantCreated, ch.Key)
				wantPruned = append(wantPruned, ch.BaseKey)
			}
		}
		slices.Sort(wantCreated)
		slices.Sort(wantPruned)
		res := applyCommit(head)
		name := "c" + string(rune('0'+pair[0])) + "→c" + string(rune('0'+pair[1]))
		if got := res.Keys(deploy.Created); !slices.Equal(got, wantCreated) {
			t.Errorf("%s: apply created %q, plan said %q", name, got, wantCreated)
		}
		if got := res.Keys(deploy.Pruned); !slices.Equal(got, wantPruned) {
			t.Errorf("%s: apply pruned %q, plan said %q", name, got, wantPruned)
		}
		if got := res.Keys(deploy.Kept); !slices.Equal(got, o.Detached) {
			t.Errorf("%s: apply left %q in the cluster, plan said %q", name, got, o.Detached)
		}
		if len(wantCreated)+len(wantPruned)+len(o.Detached) == 0 {
			t.Errorf("%s: the pair changes nothing; the test needs pairs that add and prune", name)
		}
		if len(o.Detached) > 0 {
			// The detached Secret stays; an operator removes it so that the
			// cluster holds exactly the next base's objects again.
			secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
			dc, err := dynamic.NewForConfig(c.Config)
			if err != nil {
				t.Fatal(err)
			}
			if err := dc.Resource(secrets).Namespace("agree").Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("%s: the detached Secret is not in the cluster: %v", name, err)
			}
		}
	}
}
