package closure

import (
	"errors"
	"slices"
	"testing"
)

// A union of builds reads what each reads, the directories above every
// path and the root; the first reason and error met stand.
func TestUnion(t *testing.T) {
	bug := errors.New("bug")
	u := NewUnion("flux-system/apps")
	u.Add(&Closure{Paths: []string{"apps/base/kustomization.yaml"}, Remote: []Remote{{Ref: "https://x/y.yaml"}}, Unbounded: "a remote resource"})
	u.Add(&Closure{Paths: []string{"components/a/kustomization.yaml"}, OpenAPI: true, Unbounded: "other", Err: bug})
	u.Path("clusters/prod/apps.yaml")
	u.Unbound("ignored: a reason is known")
	if got := u.Paths(); !slices.Equal(got, []string{"apps/base/kustomization.yaml", "clusters/prod/apps.yaml", "components/a/kustomization.yaml"}) {
		t.Errorf("Paths() = %q", got)
	}
	c := u.Closure()
	want := []string{".", "apps", "apps/base", "apps/base/kustomization.yaml", "clusters", "clusters/prod", "clusters/prod/apps.yaml", "components", "components/a", "components/a/kustomization.yaml"}
	if !slices.Equal(c.Paths, want) {
		t.Errorf("Closure().Paths = %q, want %q", c.Paths, want)
	}
	if c.Overlay != "flux-system/apps" || len(c.Remote) != 1 || !c.OpenAPI || c.Unbounded != "a remote resource" || c.Err != bug {
		t.Errorf("Closure() = %+v", c)
	}
	if NewUnion("x").Closure().Bounded() != true {
		t.Error("an empty union is unbounded")
	}
}
