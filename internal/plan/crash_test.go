package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
)

// panicking is a resolver with a bug: it panics looking up host, as any
// of kplan's code might on one overlay's input.
type panicking struct{ host string }

func (r panicking) LookupHost(_ context.Context, host string) ([]string, error) {
	if host == r.host {
		panic("injected: lookup of " + host)
	}
	return []string{"192.0.2.1"}, nil
}

// CrashRepo is a repository in which building the overlay crashy panics
// (its remote resource's host, looked up before the build, panics the
// resolver given to the plan) and the change edits the overlay web.
func crashRepo(t *testing.T) (dir, base, head string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"crashy/kustomization.yaml": "resources:\n- https://panic.invalid/manifests.yaml\n- local.yaml\n",
		"crashy/local.yaml":         cm("local", "k: v"),
		"web/kustomization.yaml":    "resources: [cm.yaml]\n",
		"web/cm.yaml":               cm("web", "k: v"),
	})
	base = commit(t, dir, "base")
	write(t, dir, map[string]string{"web/cm.yaml": cm("web", "k: w")})
	return dir, base, commit(t, dir, "head")
}

// A panic while planning one overlay fails that overlay, with its
// kustomization file, the panic and where to report it; the others are
// planned, changed-only and full; the plan lists it as crashed.
func TestPanicFailsItsOverlayOnly(t *testing.T) {
	dir, base, head := crashRepo(t)
	policy, err := netpolicy.New([]string{"panic.invalid"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		p, err := Run(context.Background(), Options{RepoDir: dir, Base: base, Head: head, Full: full,
			Resolver: panicking{"panic.invalid"}, Render: render.Options{Remote: policy}})
		if err != nil {
			t.Fatalf("full=%v: %v", full, err)
		}
		byPath := map[string]inventorydiff.Overlay{}
		for _, o := range p.Overlays {
			byPath[o.Path] = o
		}
		web, crashy := byPath["web"], byPath["crashy"]
		if web.Status != inventorydiff.Changed || len(web.Changed) != 1 || web.Changed[0].Key != "~G_v1_ConfigMap|default|web" {
			t.Errorf("full=%v: web %s %q, want its ConfigMap changed", full, web.Status, web.Changed)
		}
		for _, want := range []string{"crashy/kustomization.yaml: ", crash.Marker + "injected: lookup of panic.invalid", crash.ReportURL} {
			if !strings.Contains(crashy.HeadErr, want) {
				t.Errorf("full=%v: crashy's error %q lacks %q", full, crashy.HeadErr, want)
			}
		}
		if got := p.Crashed(); !slices.Equal(got, []string{"crashy"}) {
			t.Errorf("full=%v: crashed %q, want crashy", full, got)
		}
	}
}
