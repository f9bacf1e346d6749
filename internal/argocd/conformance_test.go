package argocd

// Conformance cases: each pins one rule of Argo CD that a plan depends
// on, citing the file and lines of github.com/argoproj/argo-cd (at commit
// 37ee0097cf, fetched read-only) that make it. Argo CD's own packages do
// not build from the module proxy here (docs/argocd.md, "Conformance"),
// so these cases are the oracle: each fails on a kplan that does
// otherwise.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// writeTree writes files (path → content; "" removes) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if content == "" {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// planChange plans base → base+change changed-only, checks it says what
// the full plan says of every target, and returns the changed-only plan.
func planChange(t *testing.T, base, change map[string]string) [2]*Result {
	t.Helper()
	bdir, hdir := t.TempDir(), t.TempDir()
	writeTree(t, bdir, base)
	writeTree(t, hdir, base)
	writeTree(t, hdir, change)
	bs, err := snapshot.FromFS(os.DirFS(bdir), "base")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := snapshot.FromFS(os.DirFS(hdir), "head")
	if err != nil {
		t.Fatal(err)
	}
	got, err := testEngine().Plan(context.Background(), bs, hs, snapshot.Changed(bs.Index, hs.Index))
	if err != nil {
		t.Fatal(err)
	}
	full, err := testEngine().Plan(context.Background(), bs, hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		for _, ft := range full[i].Targets {
			gt := got[i].Target(ft.Name())
			if gt == nil {
				t.Fatalf("side %d: changed-only plans no %s", i, ft.Name())
			}
			if gt.Deferred || ft.Err != nil {
				continue
			}
			sameObjects(t, ft.Name(), gt.Objects, ft.Objects)
		}
	}
	return [2]*Result{got[0], got[1]}
}

// image is the image of the first container of the Deployment named in
// objs, or "".
func image(t *testing.T, tg *Target, name string) string {
	t.Helper()
	if tg == nil {
		t.Fatal("no such target")
	}
	if tg.Err != nil {
		t.Fatalf("%s: %v", tg.Name(), tg.Err)
	}
	for k, o := range objects(t, tg.Objects) {
		if !strings.HasPrefix(k, "Deployment ") || !strings.HasSuffix(k, "/"+name) {
			continue
		}
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		return c["image"].(string)
	}
	return ""
}

const kustomizeApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: shop}
  destination: {server: https://kubernetes.default.svc, namespace: shop}
`

const shopDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers: [{name: shop, image: registry.example.com/shop:1.0}]
`

// The repo server merges .argocd-source.yaml, then
// .argocd-source-<instance name>.yaml, at the source's path into the
// source before rendering it (reposerver/repository/repository.go:81-82,
// 1890-1947, called from GetAppSourceType at 1951-1952); the instance
// name is the Application's name in the control plane's namespace, else
// namespace_name (pkg/apis/application/v1alpha1/types.go:4137-4144).
// Argo CD Image Updater's git write-back writes the second file: its
// commit changes what Argo CD renders, and the plan shows it.
func TestConformanceSourceOverrideFiles(t *testing.T) {
	base := map[string]string{
		"apps/shop.yaml":          kustomizeApp,
		"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
		"shop/deployment.yaml":    shopDeployment,
	}
	t.Run("image updater write-back", func(t *testing.T) {
		p := planChange(t, base, map[string]string{
			"shop/.argocd-source-shop.yaml": "kustomize:\n  images:\n  - registry.example.com/shop:1.1\n",
		})
		if got := image(t, p[0].Target("argocd/shop"), "shop"); got != "registry.example.com/shop:1.0" {
			t.Errorf("base image %q", got)
		}
		if got := image(t, p[1].Target("argocd/shop"), "shop"); got != "registry.example.com/shop:1.1" {
			t.Errorf("head renders image %q, want the override's registry.example.com/shop:1.1", got)
		}
	})
	t.Run("both files, the Application's last; source fields kept", func(t *testing.T) {
		p := planChange(t, base, map[string]string{
			"shop/.argocd-source.yaml":      "kustomize:\n  namePrefix: a-\n  images: [registry.example.com/shop:2.0]\npath: elsewhere\n",
			"shop/.argocd-source-shop.yaml": "kustomize:\n  images: [registry.example.com/shop:3.0]\n",
		})
		tg := p[1].Target("argocd/shop")
		if got := image(t, tg, "a-shop"); got != "registry.example.com/shop:3.0" {
			t.Errorf("head renders a-shop with image %q, want the prefix of the first file and the image of the second", got)
		}
	})
	t.Run("another namespace's Application reads namespace_name", func(t *testing.T) {
		p := planChange(t, map[string]string{
			"apps/shop.yaml":          strings.Replace(kustomizeApp, "namespace: argocd", "namespace: team", 1),
			"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
			"shop/deployment.yaml":    shopDeployment,
		}, map[string]string{
			"shop/.argocd-source-shop.yaml":      "kustomize:\n  images: [registry.example.com/shop:9.9]\n",
			"shop/.argocd-source-team_shop.yaml": "kustomize:\n  images: [registry.example.com/shop:1.2]\n",
		})
		if got := image(t, p[1].Target("team/shop"), "shop"); got != "registry.example.com/shop:1.2" {
			t.Errorf("head renders image %q, want team_shop's registry.example.com/shop:1.2", got)
		}
	})
	t.Run("a broken override fails the Application, naming it", func(t *testing.T) {
		p := planChange(t, base, map[string]string{"shop/.argocd-source.yaml": "kustomize: [\n"})
		tg := p[1].Target("argocd/shop")
		if tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "shop/.argocd-source.yaml") {
			t.Errorf("head: %+v, want the Application failed naming shop/.argocd-source.yaml", tg)
		}
	})
}
