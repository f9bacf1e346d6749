package plan

import (
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// findings are an overlay's dangerous findings by rule.
func findings(t *testing.T, p *inventorydiff.Plan, overlay string) map[string][]danger.Finding {
	t.Helper()
	for _, o := range p.Overlays {
		if o.Path == overlay {
			out := map[string][]danger.Finding{}
			for _, f := range o.Dangerous {
				out[f.Rule] = append(out[f.Rule], f)
			}
			return out
		}
	}
	t.Fatalf("no overlay %s in the plan", overlay)
	return nil
}

// An object the change makes a second overlay render for the same
// cluster is a finding on the overlay that adds it; overlays whose
// targets deploy to other environments may render it too.
func TestDuplicateObjects(t *testing.T) {
	for _, tc := range []struct {
		name, kplanYAML string
		want            bool
		// rendered is how many builds the changed-only plan does: b on
		// both sides, and a on head when it may deploy where b does.
		rendered int
	}{
		{"no targets: a note, nothing rendered for it", "", false, 2},
		{"targets in one environment", "targets:\n  - {name: a, overlay: overlays/a, environment: prod}\n  - {name: b, overlay: overlays/b, environment: prod}\n", true, 3},
		{"targets in two environments", "targets:\n  - {name: a, overlay: overlays/a, environment: prod}\n  - {name: b, overlay: overlays/b, environment: staging}\n", false, 2},
		{"the rule off on base and head: nothing rendered for it", "dangerous:\n  disable: [duplicate-object]\n", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			files := map[string]string{
				"overlays/a/kustomization.yaml": "namespace: apps\nresources: [shared.yaml]\n",
				"overlays/a/shared.yaml":        cm("shared", "k: v"),
				"overlays/b/kustomization.yaml": "namespace: apps\nresources: [own.yaml]\n",
				"overlays/b/own.yaml":           cm("own", "k: v"),
			}
			if tc.kplanYAML != "" {
				files[".kplan.yaml"] = tc.kplanYAML
			}
			write(t, dir, files)
			base := commit(t, dir, "base")
			write(t, dir, map[string]string{
				"overlays/b/kustomization.yaml": "namespace: apps\nresources: [own.yaml, shared.yaml]\n",
				"overlays/b/shared.yaml":        cm("shared", "k: other"),
			})
			head := commit(t, dir, "b renders a's ConfigMap too")
			_, p, st := plans(t, dir, base, head)
			if st.Rendered != tc.rendered {
				t.Errorf("the changed-only plan rendered %d times, want %d", st.Rendered, tc.rendered)
			}
			got := findings(t, p, "overlays/b")[danger.DuplicateObject]
			if !tc.want {
				if len(got) > 0 {
					t.Fatalf("findings %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Object != "~G_v1_ConfigMap|apps|shared" ||
				!strings.HasPrefix(got[0].Reason, "ConfigMap apps/shared is also rendered by overlays/a, deployed to the same cluster") {
				t.Fatalf("findings %+v, want overlays/b's ConfigMap apps/shared, also overlays/a's", got)
			}
			if other := findings(t, p, "overlays/a")[danger.DuplicateObject]; len(other) > 0 {
				t.Errorf("overlays/a did not change but has %+v", other)
			}
		})
	}
}

// A rule is off only when base and head both turn it off: a pull request
// that turns it off still sees its findings; one that turns it back on
// sees them at once.
func TestDisabledRulesNeedBothSides(t *testing.T) {
	scaled := func(n string) string {
		return strings.Replace(strings.ReplaceAll(deployYAML, "IMAGE", "1"), "spec:\n  template:", "spec:\n  replicas: "+n+"\n  template:", 1)
	}
	off := "dangerous:\n  disable: [scale-to-zero]\n"
	for _, tc := range []struct {
		name, base, head string
		want             int
	}{
		{"on both sides", "", "", 1},
		{"off on head only", "", off, 1},
		{"off on base only", off, "", 1},
		{"off on both", off, off, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			write(t, dir, map[string]string{"app/kustomization.yaml": "resources: [d.yaml]\n", "app/d.yaml": scaled("3"), ".kplan.yaml": tc.base})
			base := commit(t, dir, "base")
			write(t, dir, map[string]string{"app/d.yaml": scaled("0"), ".kplan.yaml": tc.head})
			head := commit(t, dir, "scale to zero")
			_, p, _ := plans(t, dir, base, head)
			if got := findings(t, p, "app")[danger.ScaleToZero]; len(got) != tc.want || p.Totals.Dangerous != tc.want {
				t.Fatalf("findings %+v, totals %d; want %d", got, p.Totals.Dangerous, tc.want)
			}
		})
	}
}

// Overlays sharing a base that gains an object add it together: not a
// collision the change makes (alternative installs of one application
// render their base alike); a copy of an overlay is.
func TestDuplicateObjectsSharedBase(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"base/kustomization.yaml":       "namespace: apps\nresources: [cm.yaml]\n",
		"base/cm.yaml":                  cm("app", "k: v"),
		"installs/a/kustomization.yaml": "resources: [../../base]\n",
		"installs/b/kustomization.yaml": "resources: [../../base]\nlabels: [{pairs: {variant: b}}]\n",
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{
		"base/kustomization.yaml": "namespace: apps\nresources: [cm.yaml, extra.yaml]\n",
		"base/extra.yaml":         cm("extra", "k: v"),
	})
	shared := commit(t, dir, "the base gains an object")
	_, p, _ := plans(t, dir, base, shared)
	for _, o := range []string{"installs/a", "installs/b"} {
		if got := findings(t, p, o)[danger.DuplicateObject]; len(got) > 0 {
			t.Errorf("%s: %+v, want none: both add the base's object", o, got)
		}
	}
	write(t, dir, map[string]string{"installs/c/kustomization.yaml": "resources: [../../base]\n"})
	copied := commit(t, dir, "a copy of installs/a")
	full, _, _ := plans(t, dir, shared, copied)
	// Without targets, a copy is a variant: noted, not dangerous.
	if got := findings(t, full, "installs/c")[danger.DuplicateObject]; len(got) > 0 {
		t.Errorf("installs/c: %+v, want no finding without targets", got)
	}
	if notes := variantNotes(full, "installs/c"); len(notes) != 2 || !strings.Contains(notes[0], "also rendered by installs/a, installs/b:") {
		t.Errorf("installs/c notes %q, want its two objects, also installs/a's and installs/b's", notes)
	}
	write(t, dir, map[string]string{".kplan.yaml": "targets:\n  - {name: a, overlay: installs/a, environment: prod}\n  - {name: b, overlay: installs/b, environment: prod}\n  - {name: c, overlay: installs/c, environment: prod}\n"})
	targets := commit(t, dir, "all three deploy to prod")
	write(t, dir, map[string]string{"installs/d/kustomization.yaml": "resources: [../../base]\n", ".kplan.yaml": "targets:\n  - {name: a, overlay: installs/a, environment: prod}\n  - {name: b, overlay: installs/b, environment: prod}\n  - {name: c, overlay: installs/c, environment: prod}\n  - {name: d, overlay: installs/d, environment: prod}\n"})
	fourth := commit(t, dir, "a fourth copy, deployed to prod too")
	_, p, _ = plans(t, dir, targets, fourth)
	got := findings(t, p, "installs/d")[danger.DuplicateObject]
	if len(got) != 2 || !strings.Contains(got[0].Reason, "also rendered by installs/a, installs/b, installs/c, deployed") {
		t.Errorf("installs/d: %+v, want its two objects, also installs/a's, b's and c's", got)
	}
}

// variantNotes are an overlay's notes naming the other overlays that
// render an object it adds.
func variantNotes(p *inventorydiff.Plan, overlay string) []string {
	var out []string
	for _, o := range p.Overlays {
		if o.Path != overlay {
			continue
		}
		for _, n := range o.Notes {
			if rest, ok := strings.CutPrefix(n, danger.VariantNote); ok {
				out = append(out, rest)
			}
		}
	}
	return out
}
