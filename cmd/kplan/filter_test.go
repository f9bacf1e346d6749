package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/plan"
)

// filterRepo has two overlays and a Flux Kustomization applying a third
// directory; its head changes all three.
func filterRepo(t *testing.T) (dir, base string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	cmYAML := func(name, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {k: " + v + "}\n"
	}
	write(t, dir, map[string]string{
		"apps/a/kustomization.yaml": "resources: [cm.yaml]\n", "apps/a/cm.yaml": cmYAML("a", "one"),
		"apps/b/kustomization.yaml": "resources: [cm.yaml]\n", "apps/b/cm.yaml": cmYAML("b", "one"),
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	base = git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{"apps/a/cm.yaml": cmYAML("a", "two"), "apps/b/cm.yaml": cmYAML("b", "two")})
	git(t, dir, "commit", "-qam", "both change")
	return dir, base
}

// TestFilterMatchingNothingFails pins "no silent green": a glob, an
// OVERLAY argument or an --exclude that matches no overlay exits 1
// naming it, where it planned "0 of 0 overlays" and passed; a flag's
// value that came apart from its flag (`--fail-on-error false`) is named
// as such; and what an --exclude leaves out is not listed as "unread".
func TestFilterMatchingNothingFails(t *testing.T) {
	dir, base := filterRepo(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--overlays", "nothere/*"}, `--overlays "nothere/*" matches no overlay of base or head (there are apps/a, apps/b)`},
		{[]string{"--exclude", "apps/c"}, `--exclude "apps/c" matches no overlay`},
		{[]string{"apps/z"}, `argument "apps/z" (not a directory of`},
		{[]string{"--fail-on-error", "false"}, `argument "false" (a boolean flag takes its value after '=': did you mean --fail-on-error=false?) matches no overlay`},
		{[]string{"unified"}, `argument "unified" (did you mean --diff-style unified?)`},
	} {
		_, _, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", base, "--head", "HEAD"}, tc.args...)...)
		if err == nil || !errors.Is(err, plan.ErrNoMatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kplan diff %q: %v; want an error with %q", tc.args, err, tc.want)
		}
		if code := exitCode(err, &strings.Builder{}); code != 1 {
			t.Errorf("kplan diff %q exits %d, want 1", tc.args, code)
		}
	}
	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "--exclude", "apps/b", "--fail-on-error=false")
	if err != nil {
		t.Fatalf("--exclude apps/b: %v\n%s", err, stderr)
	}
	if strings.Contains(out, "no overlay reads") || !strings.Contains(out, "in 1 of 1 overlays") {
		t.Errorf("an excluded overlay's change is listed as unread, or the plan is not apps/a's:\n%s", out)
	}
}

// TestFluxModeHonoursOverlayFilters pins that in Flux mode --overlays
// and --exclude select Flux Kustomizations (by the directory they build
// or by namespace/name), where they were ignored.
func TestFluxModeHonoursOverlayFilters(t *testing.T) {
	dir, _ := filterRepo(t)
	flux := func(name string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec: {path: ./apps/" + name + ", sourceRef: {kind: GitRepository, name: flux-system}}\n"
	}
	write(t, dir, map[string]string{"clusters/prod/a.yaml": flux("a"), "clusters/prod/b.yaml": flux("b")})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "Flux applies both")
	fluxBase := git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{"apps/a/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: three}\n",
		"apps/b/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {k: three}\n"})
	git(t, dir, "commit", "-qam", "both change again")
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"--overlays", "apps/a"}, "flux-system/a", "flux-system/b"},
		{[]string{"--exclude", "flux-system/a"}, "flux-system/b", "flux-system/a"},
	} {
		out, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", fluxBase, "--head", "HEAD", "--flux"}, tc.args...)...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, stderr)
		}
		if !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) || !strings.Contains(out, "in 1 of 1 overlays") {
			t.Errorf("%q: want %s planned and %s left out:\n%s", tc.args, tc.want, tc.not, out)
		}
	}
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", fluxBase, "--head", "HEAD", "--flux", "--overlays", "flux-system/c"); !errors.Is(err, plan.ErrNoMatch) {
		t.Errorf("a Flux filter matching nothing: %v", err)
	}
}
