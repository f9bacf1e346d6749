package plan

import (
	"slices"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// TestAdoptingKplanYAMLPrunesNothing pins that adopting .kplan.yaml is a
// no-op: on a repository shaped like kubeflow/manifests, the pull
// request adding a file that declares two targets plans them against
// what those overlays render on base (the target's namespace on both
// sides), renders nothing (the file changes no render), and the overlays
// it stops planning are "no longer planned, left as they are" — never
// pruned nor dangerous, where it planned pruning Namespace kubeflow.
func TestAdoptingKplanYAMLPrunesNothing(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, testkit.Files(t, "testdata/kubeflow-shaped"))
	base := commit(t, dir, "kubeflow-shaped")
	write(t, dir, map[string]string{".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets:\n" +
		"  - {name: kubeflow, overlay: example, environment: prod, namespace: kubeflow}\n" +
		"  - {name: istio, overlay: common/istio/istio-install/overlays/oauth2-proxy, environment: prod, namespace: istio-system}\n"})
	adopt := commit(t, dir, "adopt kplan")

	full, changed, st := plans(t, dir, base, adopt)
	for _, p := range []*inventorydiff.Plan{full, changed} {
		if p.Totals.Pruned != 0 || p.Totals.Dangerous != 0 || p.Totals.Added != 0 || p.Totals.Changed != 0 || p.Totals.ChangedOverlays != 0 {
			t.Errorf("adoption plans %+v; want nothing", p.Totals)
		}
		if want := []string{"apps/model-registry/upstream/overlays/postgres", "common/istio/istio-install/overlays/gke"}; !slices.Equal(p.NoLongerPlanned, want) {
			t.Errorf("no longer planned %q, want %q", p.NoLongerPlanned, want)
		}
		if got := status(p); len(got) != 2 || got["example"] != inventorydiff.Unchanged || got["common/istio/istio-install/overlays/oauth2-proxy"] != inventorydiff.Unchanged {
			t.Errorf("overlays %v; want the two targets, unchanged", got)
		}
	}
	if st.Rendered != 0 {
		t.Errorf("the adoption rendered %d builds; a file no render reads renders nothing", st.Rendered)
	}

	// Once the file is on both sides, a target taken out of it is left
	// in the cluster, as before.
	write(t, dir, map[string]string{".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets:\n" +
		"  - {name: kubeflow, overlay: example, environment: prod, namespace: kubeflow}\n"})
	drop := commit(t, dir, "istio is deployed elsewhere")
	_, p, _ := plans(t, dir, adopt, drop)
	if p.Totals.Pruned != 0 || p.Totals.Dangerous != 0 || p.Totals.Detached != 1 || len(p.NoLongerPlanned) != 0 {
		t.Errorf("a target taken out: %+v, no longer planned %q; want its Deployment left in the cluster", p.Totals, p.NoLongerPlanned)
	}
}
