package plan

import "testing"

// The pull request adopting .kplan.yaml on kubeflow/manifests (two
// targets, as the README recommends) prunes nothing, flags nothing and
// renders only its targets' overlays in the full plan; it read "907 to
// prune, 142 dangerous" before.
func TestCorpusAdoptingKplanYAMLPrunesNothing(t *testing.T) {
	repo, base := corpusRepo(t)
	write(t, repo, map[string]string{".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets:\n" +
		"  - {name: kubeflow, overlay: example, environment: prod}\n" +
		"  - {name: istio, overlay: common/istio/istio-install/overlays/oauth2-proxy, environment: prod}\n"})
	head := commit(t, repo, "adopt kplan")
	full, changed, st := plans(t, repo, base, head)
	for name, tot := range map[string]struct{ pruned, dangerous, changed, overlays, unplanned int }{
		"full":         {full.Totals.Pruned, full.Totals.Dangerous, full.Totals.ChangedOverlays, len(full.Overlays), len(full.NoLongerPlanned)},
		"changed-only": {changed.Totals.Pruned, changed.Totals.Dangerous, changed.Totals.ChangedOverlays, len(changed.Overlays), len(changed.NoLongerPlanned)},
	} {
		if tot.pruned+tot.dangerous+tot.changed != 0 || tot.overlays != 2 || tot.unplanned == 0 {
			t.Errorf("%s plan of the adoption: %+v; want the two targets unchanged and the rest no longer planned", name, tot)
		}
	}
	if st.Rendered != 0 {
		t.Errorf("the changed-only adoption rendered %d builds, want none", st.Rendered)
	}
}
