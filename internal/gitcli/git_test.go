package gitcli

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// upstream makes a repository whose main has 70 commits after the fork
// point of branch pr (3 commits), so that a shallow clone must deepen more
// than once to find the merge base. It returns main's and pr's tips and
// the fork point.
func upstream(t *testing.T) (dir, main, pr, fork string) {
	t.Helper()
	dir = t.TempDir()
	git := func(args ...string) string { return gittest.Git(t, dir, args...) }
	git("init", "-q", "-b", "main")
	commit := func(file, msg string) {
		gittest.Write(t, dir, map[string]string{file: msg + "\n"})
		git("add", "-A")
		git("commit", "-qm", msg)
	}
	commit("f", "root")
	fork = git("rev-parse", "HEAD")
	git("checkout", "-qb", "pr")
	for i := range 3 {
		commit("g", fmt.Sprint("pr ", i))
	}
	pr = git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	for i := range 70 { // empty: the history's depth is what matters
		git("commit", "-q", "--allow-empty", "-m", fmt.Sprint("main ", i))
	}
	main = git("rev-parse", "HEAD")
	return dir, main, pr, fork
}

// A one-commit-deep clone finds the merge base by fetching history, reads
// parents git hides at the shallow boundary, and leaves the work tree,
// index and refs as they were.
func TestShallowFetchAndMergeBase(t *testing.T) {
	ctx := context.Background()
	up, main, pr, fork := upstream(t)
	gittest.Git(t, up, "merge", "-q", "--no-ff", "-m", "merge pr", "pr")
	merge := gittest.Git(t, up, "rev-parse", "HEAD")

	ws := filepath.Join(t.TempDir(), "ws")
	gittest.Git(t, t.TempDir(), "clone", "-q", "--depth=1", "--branch", "main", "file://"+up, ws)
	r := Repo{Dir: ws}
	refsBefore := gittest.Git(t, ws, "for-each-ref")

	parents, err := r.Parents(ctx, "HEAD")
	if err != nil || !slices.Equal(parents, []string{main, pr}) {
		t.Fatalf("Parents(HEAD) = %v, %v; want [main pr]", parents, err)
	}
	tip, err := r.RemoteRef(ctx, "origin", "refs/heads/pr")
	if err != nil || tip != pr {
		t.Fatalf("RemoteRef = %q, %v; want %s", tip, err, pr)
	}
	if _, err := r.RemoteRef(ctx, "origin", "refs/heads/gone"); err == nil {
		t.Error("RemoteRef of a missing branch: no error")
	}
	if err := r.EnsureCommit(ctx, "origin", pr); err != nil {
		t.Fatal(err)
	}
	if err := r.EnsureCommit(ctx, "origin", main); err != nil {
		t.Fatal(err)
	}
	base, err := r.MergeBase(ctx, "origin", main, pr)
	if err != nil || base != fork {
		t.Fatalf("MergeBase = %q, %v; want the fork point %s", base, err, fork)
	}
	if st := gittest.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("work tree or index changed: %q", st)
	}
	if head := gittest.Git(t, ws, "rev-parse", "HEAD"); head != merge {
		t.Errorf("HEAD moved to %s", head)
	}
	if refs := gittest.Git(t, ws, "for-each-ref"); refs != refsBefore {
		t.Errorf("refs changed:\n%s\nwas:\n%s", refs, refsBefore)
	}
}

func TestMergeBaseUnrelated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	gittest.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "a")
	gittest.Git(t, dir, "checkout", "-q", "--orphan", "other")
	gittest.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "b")
	r := Repo{Dir: dir}
	if base, err := r.MergeBase(ctx, "origin", "main", "other"); err == nil {
		t.Errorf("MergeBase of unrelated histories = %q, want an error", base)
	}
}
