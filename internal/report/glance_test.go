package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

func TestKindPlural(t *testing.T) {
	for kind, want := range map[string]string{
		"Deployment": "Deployments", "Ingress": "Ingresses", "NetworkPolicy": "NetworkPolicies",
		"Gateway": "Gateways", "ConfigMap": "ConfigMaps", "": "",
	} {
		if got := kindPlural(kind, 2); got != want {
			t.Errorf("kindPlural(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestImages(t *testing.T) {
	dep := func(name, image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: n}\nspec: {template: {spec: {initContainers: [{name: init, image: 'busybox:1'}], containers: [{name: app, image: '" + image + "'}]}}}"
	}
	p := inventorydiff.Compare("a", "b",
		map[string]inventorydiff.Side{"o1": side(t, dep("web", "web:1"), dep("worker", "web:1")), "o2": side(t, dep("web", "web:1")), "o3": side(t, dep("web", "web:1"))},
		map[string]inventorydiff.Side{"o1": side(t, dep("web", "web:2"), dep("worker", "web:2"), dep("api", "api:7")), "o2": side(t, dep("web", "web:2")), "o3": side(t, dep("web", "web:2"))})
	var got []string
	for _, ic := range images(p) {
		got = append(got, ic.Old+" → "+ic.New+": "+objectsText(ic.Objects, 5, func(s string) string { return s }))
	}
	want := []string{
		" → api:7: Deployment api (n)",
		" → busybox:1: Deployment api (n)",
		// Each object once, with the overlays that render it.
		"web:1 → web:2: Deployment web (n) in o1, o2, o3; Deployment worker (n) in o1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("images:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFooter(t *testing.T) {
	for _, tc := range []struct {
		w    *inventorydiff.Work
		want string
	}{
		{nil, ""},
		{&inventorydiff.Work{Overlays: 1, Rendered: 2, Took: 1234567 * time.Microsecond}, "kplan planned 1 overlay: 2 kustomize builds; 1.2s."},
		{&inventorydiff.Work{Overlays: 65, Skipped: 60, Rendered: 9, CacheHits: 1, Took: 800 * time.Millisecond},
			"kplan planned 65 overlays: 9 kustomize builds, 1 from the cache; 60 overlays the change cannot affect, not rendered; 800ms."},
	} {
		if got := footer(&inventorydiff.Plan{Work: tc.w}); got != tc.want {
			t.Errorf("footer = %q, want %q", got, tc.want)
		}
	}
}

// A change shared by many objects says so in short, wrapped lines that
// count the others only: the headline ran to 900 characters on one line
// and counted the object it is shown on ("same change in 12" of 12).
func TestSameChangeLinesAreWrappedAndCountTheOthers(t *testing.T) {
	dep := func(image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: n}\nspec: {template: {spec: {containers: [{name: web, image: '" + image + "'}]}}}"
	}
	base, head := map[string]inventorydiff.Side{}, map[string]inventorydiff.Side{}
	for i := range 12 {
		o := fmt.Sprintf("clusters/region-%02d/environments/production/applications/web", i)
		base[o], head[o] = side(t, dep("web:1")), side(t, dep("web:2"))
	}
	p := inventorydiff.Compare("a", "b", base, head)
	var text strings.Builder
	if err := Text(&text, p); err != nil {
		t.Fatal(err)
	}
	md := Markdown(p, "", github.MaxCommentChars)
	for form, out := range map[string]string{"text": text.String(), "markdown": md} {
		if !strings.Contains(out, "same change in 11 other Deployments:\n") || !strings.Contains(out, "  web (n) in clusters/region-01/") || !strings.Contains(out, "and 6 more\n") {
			t.Errorf("%s does not count the 11 others:\n%s", form, out)
		}
		if strings.Contains(out, "same change in 12") {
			t.Errorf("%s counts the object itself:\n%s", form, out)
		}
		for _, l := range strings.Split(out, "\n") {
			// Each object that has the change says so on a line of its own.
			if strings.Contains(l, "region-") && len(l) > headlineWidth+8 && !strings.Contains(l, "same change as") &&
				!strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "- `") && !strings.HasPrefix(l, "<details") {
				t.Errorf("%s: a line of %d characters:\n%s", form, len(l), l)
			}
		}
	}
}
