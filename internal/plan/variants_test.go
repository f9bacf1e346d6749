package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/danger"
)

// TestVariantsAreNotDangerousInDiscoveryMode pins duplicate-object where
// objects really meet: without .kplan.yaml, kustomize variants (kubeflow's
// model-registry demo and odh overlays) of which a release bump makes one
// render an object the other renders already are noted, naming the other
// — not a dangerous change a fail-on-dangerous would block — and the
// overlay the change cannot affect is not rendered for it (its objects
// come from the render cache a push to the base branch filled); with
// targets of one environment the same change is dangerous.
func TestVariantsAreNotDangerousInDiscoveryMode(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"model-registry/base/kustomization.yaml":          "namespace: kubeflow\nresources: [server.yaml]\n",
		"model-registry/base/server.yaml":                 cm("server", "v: '0.2.9'"),
		"model-registry/overlays/demo/kustomization.yaml": "resources: [../../base, ui.yaml]\n",
		"model-registry/overlays/demo/ui.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui, namespace: kubeflow}\ndata: {v: '0.2.9'}\n",
		"model-registry/overlays/odh/kustomization.yaml":  "resources: [../../base]\n",
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{
		"model-registry/overlays/odh/kustomization.yaml": "resources: [../../base, ui.yaml]\n",
		"model-registry/overlays/odh/ui.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui, namespace: kubeflow}\ndata: {v: '0.2.10'}\n",
	})
	head := commit(t, dir, "odh gets the UI too")

	ctx := context.Background()
	cache := t.TempDir()
	// The push to the base branch that warmed the cache.
	if _, _, err := Execute(ctx, Options{RepoDir: dir, Base: base, Head: base, Resolver: notFound{}, Warm: true, CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	p, st, err := Execute(ctx, Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{}, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if p.Totals.Dangerous != 0 || len(findings(t, p, "model-registry/overlays/odh")[danger.DuplicateObject]) != 0 {
		t.Errorf("variants: %d dangerous; want none without targets", p.Totals.Dangerous)
	}
	notes := variantNotes(p, "model-registry/overlays/odh")
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "ConfigMap kubeflow/ui is also rendered by model-registry/overlays/demo:") {
		t.Errorf("odh's notes %q; want the UI ConfigMap, also demo's", notes)
	}
	if st.Rendered != 1 || st.CacheHits != 2 {
		t.Errorf("%d builds, %d from the cache; want odh's head built, its base and demo from the cache", st.Rendered, st.CacheHits)
	}
	// Without a cache nothing is rendered for the note either.
	_, changed, st := plans(t, dir, base, head)
	if st.Rendered != 2 || changed.Totals.Dangerous != 0 {
		t.Errorf("without a cache: %d builds, %d dangerous; want 2, none", st.Rendered, changed.Totals.Dangerous)
	}

	// Targets of one environment meet in one cluster: dangerous.
	kplanYAML := "targets:\n  - {name: demo, overlay: model-registry/overlays/demo, environment: prod}\n  - {name: odh, overlay: model-registry/overlays/odh, environment: prod}\n"
	write(t, dir, map[string]string{".kplan.yaml": kplanYAML, "model-registry/overlays/odh/kustomization.yaml": "resources: [../../base]\n"})
	git(t, dir, "rm", "-q", "model-registry/overlays/odh/ui.yaml")
	tBase := commit(t, dir, "targets in prod")
	write(t, dir, map[string]string{
		"model-registry/overlays/odh/kustomization.yaml": "resources: [../../base, ui.yaml]\n",
		"model-registry/overlays/odh/ui.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui, namespace: kubeflow}\ndata: {v: '0.2.10'}\n",
	})
	tHead := commit(t, dir, "odh gets the UI too, in prod")
	_, p, _ = plans(t, dir, tBase, tHead)
	if got := findings(t, p, "model-registry/overlays/odh")[danger.DuplicateObject]; len(got) != 1 {
		t.Errorf("targets of one environment: %+v; want the UI ConfigMap flagged", got)
	}
}
