package plan

import (
	"context"
	"testing"
)

// TestLocalFileNamedLikeAHostIsSkipped pins that a resources entry that
// exists in the repository is local, whatever its name looks like: a
// quick-start's github.com-sa.yaml (or a github.com-x directory) beside
// the kustomization is read from the snapshot, as kustomize reads it, so
// a docs-only commit renders nothing and the overlay is skipped and
// cached as any other.
func TestLocalFileNamedLikeAHostIsSkipped(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"quickstart/kustomization.yaml":                  "resources: [github.com-sa.yaml, github.com-extra]\n",
		"quickstart/github.com-sa.yaml":                  "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\n",
		"quickstart/github.com-extra/kustomization.yaml": "resources: [cm.yaml]\n",
		"quickstart/github.com-extra/cm.yaml":            cm("extra", "k: v"),
		"README.md":                                      "# quick start\n",
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"README.md": "# quick start\n\nRun it.\n"})
	docs := commit(t, dir, "docs only")
	p, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: docs, Resolver: notFound{}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rendered != 0 || st.Skipped != 1 || p.Totals.ChangedOverlays != 0 {
		t.Fatalf("a docs-only commit: %+v, totals %+v; want the overlay skipped, nothing rendered", st, p.Totals)
	}
	// The file is read as the overlay's: changing it is planned.
	write(t, dir, map[string]string{"quickstart/github.com-sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner, labels: {a: b}}\n"})
	sa := commit(t, dir, "label the service account")
	_, changed, st := plans(t, dir, docs, sa)
	if st.Rendered != 2 || changed.Totals.Changed != 1 {
		t.Fatalf("changing the file: %+v, totals %+v; want the overlay rendered on both sides, one object changed", st, changed.Totals)
	}
}
