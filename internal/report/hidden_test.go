package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/overlap"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// noisePlan is a chart bump as kubeflow's Istio bumps are: two objects
// whose only change is their chart and version labels (one with a
// checksum annotation rewritten too), one with a real image change beside
// its label, a webhook whose injected caBundle changed, and an object the
// bump adds with the new labels.
func noisePlan(t *testing.T) *inventorydiff.Plan {
	dep := func(name, version, image, checksum string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: istio\n  labels: {app.kubernetes.io/version: '" + version +
			"', helm.sh/chart: 'istiod-" + version + "'}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata:\n      labels: {app: " + name +
			", app.kubernetes.io/version: '" + version + "'}\n      annotations: {checksum/config: '" + checksum + "'}\n    spec: {containers: [{name: c, image: '" + image + "'}]}"
	}
	hook := func(ca string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: istio-validator}\n" +
			"webhooks: [{name: v.istio.io, clientConfig: {caBundle: '" + ca + "', service: {name: istiod, namespace: istio}}}]"
	}
	base := map[string]inventorydiff.Side{"istio/install": side(t,
		dep("istiod", "1.22.1", "istio/pilot:1.22.1", "aaa"), dep("gateway", "1.22.1", "istio/proxyv2:1.22.1", "bbb"),
		dep("cni", "1.22.1", "istio/install-cni:1.22.1", "ccc"), hook("Y2Ex"))}
	head := map[string]inventorydiff.Side{"istio/install": side(t,
		dep("istiod", "1.22.2", "istio/pilot:1.22.1", "aab"), dep("gateway", "1.22.2", "istio/proxyv2:1.22.1", "bbb"),
		dep("cni", "1.22.2", "istio/install-cni:1.22.2", "ccc"), hook("Y2Iy"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: istio, labels: {helm.sh/chart: istiod-1.22.2}}")}
	p := inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, head)
	p.Ignore(inventorydiff.DefaultIgnore(), inventorydiff.IgnoreRules{Fields: []string{"metadata.annotations.example.com/*"}, Source: "command line"})
	return p
}

// TestHiddenByDefaultGolden pins how a report says what the default
// noise set hid: one line, "Hidden by default: N fields in M objects"
// with the rules that hid them, in every format; the rules that hid
// nothing are not listed; the real change (an image) and the added
// object's labels stay.
func TestHiddenByDefaultGolden(t *testing.T) {
	p := noisePlan(t)
	if p.Totals.Changed != 1 || p.Totals.Added != 1 {
		t.Errorf("totals %+v: want the image change and the added ConfigMap only", p.Totals)
	}
	goldenFormats(t, p, Options{}, "hidden-by-default")
}

// TestNoLongerPlannedGolden pins how a report says which overlays the
// pull request adopting .kplan.yaml stops planning: one line naming
// them (ten at most), left as they are, never a prune.
func TestNoLongerPlannedGolden(t *testing.T) {
	base := map[string]inventorydiff.Side{"example": side(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubeflow}")}
	p := inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, base)
	for i := range 12 {
		p.NoLongerPlanned = append(p.NoLongerPlanned, "apps/app-"+string(rune('a'+i))+"/overlays/demo")
	}
	goldenFormats(t, p, Options{}, "no-longer-planned")
}

// TestVariantNoteGolden pins how a report shows an object the change
// makes an overlay render that a variant renders already, without
// targets: a note naming the variant, no dangerous change.
func TestVariantNoteGolden(t *testing.T) {
	ui := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui, namespace: kubeflow}\ndata: {v: '" + v + "'}"
	}
	base := map[string]inventorydiff.Side{"model-registry/overlays/odh": side(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubeflow}")}
	head := map[string]inventorydiff.Side{"model-registry/overlays/odh": side(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubeflow}", ui("0.2.10"))}
	p := inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, head)
	keys := map[string][]string{"model-registry/overlays/demo": head["model-registry/overlays/odh"].Inventory.Keys}
	overlap.Duplicates(p.Overlays, keys, overlap.Clusters{})
	p.Totals = inventorydiff.Sum(p.Overlays)
	if p.Totals.Dangerous != 0 {
		t.Fatalf("a variant: %d dangerous", p.Totals.Dangerous)
	}
	var text bytes.Buffer
	if err := TextWith(&text, p, Options{}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, filepath.Join("testdata", "variant-note.txt.golden"), text.String())
	testkit.Golden(t, filepath.Join("testdata", "variant-note.md.golden"), MarkdownWith(p, "<!-- kplan:plan -->\n", github.MaxCommentChars, Options{}))
}
