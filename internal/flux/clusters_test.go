package flux

import (
	"slices"
	"testing"
)

func TestMapArtifact(t *testing.T) {
	ours := map[string]bool{"repo": true}
	cp := func(pairs ...string) []any {
		var out []any
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, map[string]any{"from": pairs[i], "to": pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		copies []any
		root   string
		within []string
		why    bool
	}{
		{"a directory at the top", cp("@repo/infrastructure/**", "@artifact/"), "infrastructure", []string{"infrastructure"}, false},
		{"directories keeping their place", cp("@repo/apps/base/**", "@artifact/base/", "@repo/apps/staging/**", "@artifact/staging/"), "apps", []string{"apps/base", "apps/staging"}, false},
		{"the whole repository", cp("@repo/**", "@artifact/"), ".", []string{"."}, false},
		{"a directory moved", cp("@repo/apps/base/**", "@artifact/common/"), "", nil, true},
		{"two tops", cp("@repo/a/x/**", "@artifact/x/", "@repo/b/y/**", "@artifact/y/"), "", nil, true},
		{"a glob", cp("@repo/apps/*.yaml", "@artifact/"), "", nil, true},
		{"another source", cp("@other/apps/**", "@artifact/"), "", nil, true},
		{"nothing", nil, "", nil, true},
		{"exclude", []any{map[string]any{"from": "@repo/a/**", "to": "@artifact/", "exclude": []any{"*.md"}}}, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mapArtifact(tc.copies, ours)
			if (a.why != "") != tc.why {
				t.Fatalf("why %q, want a reason: %v", a.why, tc.why)
			}
			if !tc.why && (a.root != tc.root || !slices.Equal(a.within, tc.within)) {
				t.Errorf("root %q within %q, want %q %q", a.root, a.within, tc.root, tc.within)
			}
		})
	}
}

func TestOutsideTheArtifact(t *testing.T) {
	within := []string{"apps/base", "apps/staging"}
	if p := outside([]string{".", "apps", "apps/base", "apps/base/x.yaml", "apps/staging/kustomization.yaml"}, within); p != "" {
		t.Errorf("outside %q: every path is the artifact's or above it", p)
	}
	if p := outside([]string{"apps/staging/kustomization.yaml", "apps/production/values.yaml"}, within); p != "apps/production/values.yaml" {
		t.Errorf("outside %q, want apps/production/values.yaml", p)
	}
}

// Targets are named by cluster only when the plan's sides hold several
// clusters (or two would share a name), so one cluster's plan reads as
// it always did, and a second cluster on one side names both alike.
func TestTargetNames(t *testing.T) {
	target := func(cluster, name string) *Target {
		return &Target{Kustomization: &Kustomization{Namespace: "flux-system", Name: name}, Cluster: cluster}
	}
	names := func(r *Result) []string {
		var out []string
		for _, t := range r.Targets {
			out = append(out, t.Name())
		}
		return out
	}
	one := &Result{Targets: []*Target{target("home", "apps"), target("home", "flux-system")}}
	name(one)
	if got := names(one); !slices.Equal(got, []string{"flux-system/apps", "flux-system/flux-system"}) {
		t.Errorf("one cluster: %q", got)
	}
	base := &Result{Targets: []*Target{target("production", "apps")}}
	head := &Result{Targets: []*Target{target("production", "apps"), target("staging", "apps")}}
	name(base, head)
	if got := names(base); !slices.Equal(got, []string{"production: flux-system/apps"}) {
		t.Errorf("base: %q", got)
	}
	if got := names(head); !slices.Equal(got, []string{"production: flux-system/apps", "staging: flux-system/apps"}) {
		t.Errorf("head: %q", got)
	}
	if head.Target("staging: flux-system/apps") == nil {
		t.Error("Target does not find a target by its name")
	}
	clash := &Result{Targets: []*Target{target("home", "apps"), target("", "apps")}}
	name(clash)
	if got := names(clash); !slices.Equal(got, []string{"flux-system/apps", "home: flux-system/apps"}) {
		t.Errorf("a named and an unnamed cluster sharing a name: %q", got)
	}
}
