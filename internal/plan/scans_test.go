package plan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kplan-dev/kplan/internal/rendercache"
)

// TestDetectionKeepsItsSearches pins that detection's searches of the
// base's YAML, kept in the render cache by commit and by content, never
// hide what a commit adds: a plan on a base that gained a Flux
// Kustomization since the searches were kept (a diff away from the
// commits kept) plans Flux, as a plan without the cache does; kept files
// that are corrupt are searched again. The repository has enough YAML
// for detection to search with git grep (grepAtLeast).
func TestDetectionKeepsItsSearches(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	files := map[string]string{"apps/web/kustomization.yaml": "resources: [cm.yaml]\n", "apps/web/cm.yaml": cm("web", "k: v")}
	for i := range grepAtLeast + 10 {
		files[fmt.Sprintf("apps/more/cm-%d.yaml", i)] = cm(fmt.Sprintf("more-%d", i), "k: v")
	}
	files["apps/more/kustomization.yaml"] = "resources:\n" + func() string {
		s := ""
		for i := range grepAtLeast + 10 {
			s += fmt.Sprintf("  - cm-%d.yaml\n", i)
		}
		return s
	}()
	write(t, dir, files)
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"apps/web/cm.yaml": cm("web", "k: w")})
	head := commit(t, dir, "web changes")
	git(t, dir, "checkout", "-q", "-b", "flux", base)
	write(t, dir, map[string]string{"clusters/web.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: web\n  namespace: flux-system\n" +
		"spec:\n  interval: 1h\n  path: ./apps/web\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"})
	fluxBase := commit(t, dir, "Flux applies web")
	write(t, dir, map[string]string{"apps/web/cm.yaml": cm("web", "k: w")})
	fluxHead := commit(t, dir, "web changes, under Flux")

	cache := t.TempDir()
	ctx := context.Background()
	paths := func(base, head, cacheDir string) []string {
		t.Helper()
		p, err := Run(ctx, Options{RepoDir: dir, Base: base, Head: head, CacheDir: cacheDir, Resolver: notFound{}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range p.Overlays {
			out = append(out, o.Path)
		}
		return out
	}
	for _, step := range []struct {
		name       string
		base, head string
		corrupt    bool
	}{
		{"before Flux", base, head, false},
		{"the same commits, searches kept", base, head, false},
		{"a base that gained a Flux Kustomization", fluxBase, fluxHead, false},
		{"back to the base without Flux", base, head, false},
		{"a corrupt file of searches", fluxBase, fluxHead, true},
	} {
		if step.corrupt {
			if err := os.WriteFile(filepath.Join(cache, "scans.idx"), []byte("kplan-scans/1\nneedle \"argoproj.io\"\n\nnot a line\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The searches of commits, a path of the last one cut off.
			p := filepath.Join(cache, "index-scans.idx")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data[:len(data)-3], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := paths(step.base, step.head, "")
		if got := paths(step.base, step.head, cache); !slices.Equal(got, want) {
			t.Errorf("%s: with the cache the plan has %v; without, %v", step.name, got, want)
		}
	}
	if got := paths(fluxBase, fluxHead, ""); !slices.Contains(got, "flux-system/web") || slices.Contains(paths(base, head, ""), "flux-system/web") {
		t.Errorf("the Flux base plans %v, the other %v: want Flux's target on the Flux base only, or the test proves nothing", got, paths(base, head, ""))
	}
	c, err := rendercache.Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Scans()["kustomize.toolkit.fluxcd.io"]); n < grepAtLeast {
		t.Errorf("the cache keeps %d searches for Flux's group; want the base's YAML files", n)
	}
}

// smallCalls counts Options.GC's Small calls.
type smallCalls int

func (c *smallCalls) Small() { *c++ }

// TestSmallPlanTightensTheCollector pins that a plan whose builds read
// little tells Options.GC, and one that builds nothing (every build in
// the render cache) does not.
func TestSmallPlanTightensTheCollector(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{"apps/web/kustomization.yaml": "resources: [cm.yaml]\n", "apps/web/cm.yaml": cm("web", "k: v")})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"apps/web/cm.yaml": cm("web", "k: w")})
	head := commit(t, dir, "web changes")
	var calls smallCalls
	opts := Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{}, CacheDir: t.TempDir(), GC: &calls}
	for i, want := range []smallCalls{1, 1} {
		if _, err := Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		if calls != want {
			t.Errorf("plan %d: Small called %d times in all; want %d (the second plan builds nothing)", i+1, calls, want)
		}
	}
}
