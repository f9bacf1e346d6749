package report

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
)

// Every form of the report says which Kubernetes the charts were rendered
// for: the plan once (each distinct one, how many overlays), a shown
// overlay on its own (a failed one too: a chart's kubeVersion range
// names it), the JSON each overlay's; nothing when no chart was rendered.
func TestReportSaysChartsKubernetes(t *testing.T) {
	declared := &kubeversion.Capabilities{Version: "v1.29.8", APIVersions: []string{"monitoring.coreos.com/v1/ServiceMonitor"}, From: ".kplan.yaml kubernetes.clusters[0] (legacy)"}
	p := &inventorydiff.Plan{Base: "b", Head: "h", Overlays: []inventorydiff.Overlay{
		{Path: "legacy", Status: inventorydiff.Changed, Added: []string{"_v1_ConfigMap|a|x"}, AddedYAML: map[string]string{"_v1_ConfigMap|a|x": "kind: ConfigMap\n"}, Kubernetes: declared},
		{Path: "modern", Status: inventorydiff.Failed, HeadErr: "chart requires kubeVersion: >=1.38.0-0 which is incompatible with Kubernetes v1.37.0", Kubernetes: &kubeversion.Capabilities{Version: kubeversion.Default}},
		{Path: "plain", Status: inventorydiff.Unchanged},
	}}
	p.Totals = inventorydiff.Sum(p.Overlays)
	const (
		legacy = "Charts rendered for Kubernetes v1.29.8 and API versions monitoring.coreos.com/v1/ServiceMonitor (.kplan.yaml kubernetes.clusters[0] (legacy))"
		modern = "Charts rendered for Kubernetes v1.37.0 (kplan's default)"
		plan   = "Charts rendered for Kubernetes v1.29.8 and API versions monitoring.coreos.com/v1/ServiceMonitor (.kplan.yaml kubernetes.clusters[0] (legacy)) for 1; Kubernetes v1.37.0 (kplan's default) for 1; declare what a cluster runs under "
	)
	var text bytes.Buffer
	if err := Text(&text, p); err != nil {
		t.Fatal(err)
	}
	for form, out := range map[string]string{"markdown": html.UnescapeString(Markdown(p, "", 1<<20)), "text": text.String()} {
		for _, want := range []string{legacy, modern, plan} {
			if !strings.Contains(out, want) {
				t.Errorf("%s does not say %q:\n%s", form, want, out)
			}
		}
	}
	data, err := JSON(p)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Overlays []struct {
			Path       string
			Kubernetes *kubeversion.Capabilities
		}
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	for _, o := range j.Overlays {
		switch {
		case o.Path == "legacy" && (o.Kubernetes == nil || o.Kubernetes.String() != strings.TrimPrefix(legacy, "Charts rendered for ")):
			t.Errorf("legacy's kubernetes %+v", o.Kubernetes)
		case o.Path == "plain" && o.Kubernetes != nil:
			t.Errorf("plain rendered no chart: %+v", o.Kubernetes)
		}
	}
	p.Overlays = p.Overlays[2:]
	if out := Markdown(p, "", 1<<20); strings.Contains(out, "Charts rendered") {
		t.Errorf("a plan without charts says:\n%s", out)
	}
}
