package plan

import (
	"context"
	"testing"
)

// TestOneRenderPerDistinctInput pins that a side whose closure reads
// what the other side's reads is not rendered again: a full plan renders
// an overlay the change cannot affect once (it rendered both sides), and
// a changed-only plan renders once an overlay only its target's
// namespace changes — and the plans are what rendering both sides gives.
func TestOneRenderPerDistinctInput(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"apps/a/kustomization.yaml": "resources: [cm.yaml]\n", "apps/a/cm.yaml": cm("a", "k: v"),
		"apps/b/kustomization.yaml": "resources: [cm.yaml]\n", "apps/b/cm.yaml": cm("b", "k: v"),
		"apps/c/kustomization.yaml": "resources: [cm.yaml]\n", "apps/c/cm.yaml": cm("c", "k: v"),
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"apps/a/cm.yaml": cm("a", "k: changed")})
	head := commit(t, dir, "a changes")
	ctx := context.Background()
	opts := Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{}, Full: true}
	full, st, err := Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoReuse = true
	twice, st2, err := Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rendered != 4 || st2.Rendered != 6 {
		t.Errorf("full plan: %d builds (%d without reuse); want 4: a on both sides, b and c once (6 without)", st.Rendered, st2.Rendered)
	}
	sameChanges(t, "full plan reusing renders", twice, full)
	if full.Totals.Changed != 1 {
		t.Errorf("full plan totals %+v, want a's change", full.Totals)
	}
	plans(t, dir, base, head) // changed-only and cached plans agree with it

	// Only the target's namespace changes: one build serves both sides,
	// each side's objects in its own namespace.
	write(t, dir, map[string]string{".kplan.yaml": "targets:\n  - {name: b, overlay: apps/b, namespace: one}\n"})
	nsBase := commit(t, dir, "b deploys to one")
	write(t, dir, map[string]string{".kplan.yaml": "targets:\n  - {name: b, overlay: apps/b, namespace: two}\n"})
	nsHead := commit(t, dir, "b deploys to two")
	_, p, st := plans(t, dir, nsBase, nsHead)
	if st.Rendered != 1 || p.Totals.Added != 1 || p.Totals.Pruned != 1 {
		t.Errorf("a namespace change: %d builds, totals %+v; want 1 build, ConfigMap b pruned from one and added to two", st.Rendered, p.Totals)
	}
}
