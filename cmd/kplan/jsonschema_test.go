package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/report"
)

// The JSON report is a versioned schema (docs/plan.md): formatVersion,
// commits as SHAs (head "worktree" for files on disk, base the commit it
// was compared with), and field values typed as in the object, not JSON
// text inside JSON strings.
func TestJSONReportIsVersionedWithCommitsAndTypedValues(t *testing.T) {
	dep := func(replicas, image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + replicas +
			"\n  template:\n    spec:\n      containers:\n      - name: web\n        image: " + image + "\n"
	}
	dir := commitRepo(t, map[string]string{"app/kustomization.yaml": "resources: [dep.yaml]\n", "app/dep.yaml": dep("1", "web:1")},
		map[string]string{"app/dep.yaml": dep("3", "web:2")})
	sha := regexp.MustCompile(`^[0-9a-f]{40}$`)
	type plan struct {
		FormatVersion *int
		Base, Head    string
		Overlays      []struct {
			Fields map[string][]struct {
				Path     string
				Old, New any
			}
		}
	}
	decode := func(out string) plan {
		var p plan
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Overlays) != 1 {
			t.Fatalf("-o json: %v\n%s", err, out)
		}
		return p
	}
	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main", "-o", "json")
	if err != nil {
		t.Fatalf("kplan diff: %v %s", err, stderr)
	}
	p := decode(out)
	if p.FormatVersion == nil || *p.FormatVersion != report.FormatVersion || report.FormatVersion < 2 {
		t.Errorf("formatVersion %v, want %d", p.FormatVersion, report.FormatVersion)
	}
	if !sha.MatchString(p.Base) || !sha.MatchString(p.Head) || p.Base == p.Head {
		t.Errorf("base %q, head %q: want two commit SHAs", p.Base, p.Head)
	}
	want := map[string]any{"spec.replicas": []any{1.0, 3.0}, "spec.template.spec.containers[name=web].image": []any{"web:1", "web:2"}}
	for _, f := range p.Overlays[0].Fields["apps_v1_Deployment|default|web"] {
		w, ok := want[f.Path].([]any)
		if !ok || f.Old != w[0] || f.New != w[1] {
			t.Errorf("%s: %#v → %#v, want %#v → %#v (typed)", f.Path, f.Old, f.New, w[0], w[1])
		}
		delete(want, f.Path)
	}
	if len(want) > 0 {
		t.Errorf("no field change of %v", want)
	}

	// The working tree: head is "worktree", base the commit it was
	// compared with.
	write(t, dir, map[string]string{"app/dep.yaml": dep("4", "web:2")})
	out, stderr, err = kplan(t, nil, "diff", "-C", dir, "--base", "main", "-o", "json")
	if err != nil {
		t.Fatalf("kplan diff of the working tree: %v %s", err, stderr)
	}
	if p := decode(out); p.Head != report.Worktree || !sha.MatchString(p.Base) || strings.Contains(out, "working tree") {
		t.Errorf("working tree plan: base %q, head %q", p.Base, p.Head)
	}
}
