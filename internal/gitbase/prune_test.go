package gitbase

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// age makes the named entries of dir/sub (all but the dot ones when none
// is named) look last used d ago.
func age(t *testing.T, dir, sub string, d time.Duration, names ...string) {
	t.Helper()
	if len(names) == 0 {
		names = entries(t, dir, sub)
	}
	old := time.Now().Add(-d)
	for _, n := range names {
		if n[0] == '.' {
			continue
		}
		// The entry may be removed meanwhile (TestPruneWhileGetting).
		_ = os.Chtimes(filepath.Join(dir, sub, n), old, old)
	}
}

func entries(t *testing.T, dir, sub string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func prune(t *testing.T, dir string, olderThan time.Duration) int {
	t.Helper()
	n, err := New(dir, nil).Prune(context.Background(), olderThan)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPruneRemovesWhatWasUnusedForLonger: a tree unused for longer than
// the age is removed, a recently used one kept, with the repository
// (so the removed tag's tree comes back from disk, without the network);
// once the repository too is unused, it goes, and the next Get fetches
// again. Leftovers of a crash go once as old.
func TestPruneRemovesWhatWasUnusedForLonger(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	dir := t.TempDir()
	base := srv.URL + "/org/base.git//app?ref="
	c := New(dir, policy(t, "127.0.0.1"))
	v1, err := get(t, c, base+"v1")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := get(t, c, base+"v2")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	repos := entries(t, dir, "repos")
	if len(repos) != 1 {
		t.Fatalf("repos/ = %v, want one repository", repos)
	}
	// Leftovers of a crash: a removal under way two minutes ago (gone,
	// though younger than the age), a checkout under way long ago, one as
	// recent as a checkout under way now.
	for _, d := range []string{".prune-1/" + v1.Commit + "/app", ".tmp-old-2", ".tmp-new-3"} {
		if err := os.MkdirAll(filepath.Join(dir, "trees", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d, ago := range map[string]time.Duration{".prune-1": 2 * time.Minute, ".tmp-old-2": 48 * time.Hour} {
		old := time.Now().Add(-ago)
		if err := os.Chtimes(filepath.Join(dir, "trees", d), old, old); err != nil {
			t.Fatal(err)
		}
	}

	age(t, dir, "trees", 48*time.Hour, v1.Commit)
	if n := prune(t, dir, 24*time.Hour); n != 1 {
		t.Errorf("removed %d, want 1 (the tree of v1)", n)
	}
	if got, want := entries(t, dir, "trees"), []string{".tmp-new-3", v2.Commit}; !equal(got, want) {
		t.Errorf("trees/ = %v, want %v", got, want)
	}
	if got := entries(t, dir, "repos"); !equal(got, repos) {
		t.Errorf("repos/ = %v, want %v kept", got, repos)
	}

	c2 := New(dir, policy(t, "127.0.0.1"))
	before := srv.Fetches.Load()
	tr, err := get(t, c2, base+"v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := content(t, tr); got != "v: 1\n" || tr.Root != v1.Root {
		t.Errorf("v1 after its tree was removed: %s holds %q, want %s holding v: 1", tr.Root, got, v1.Root)
	}
	if n := srv.Fetches.Load() - before; n != 0 {
		t.Errorf("v1 again made %d requests, want none: its repository was kept", n)
	}
	c2.Close()

	age(t, dir, "trees", 48*time.Hour)
	age(t, dir, "repos", 48*time.Hour)
	if n := prune(t, dir, 24*time.Hour); n != 3 {
		t.Errorf("removed %d, want 3 (two trees, one repository)", n)
	}
	if got := entries(t, dir, "trees"); !equal(got, []string{".tmp-new-3"}) {
		t.Errorf("trees/ = %v, want only the recent .tmp-new-3", got)
	}
	if got := entries(t, dir, "repos"); len(got) != 0 {
		t.Errorf("repos/ = %v, want none", got)
	}
	c3 := New(dir, policy(t, "127.0.0.1"))
	defer c3.Close()
	before = srv.Fetches.Load()
	tr, err = get(t, c3, base+"v2")
	if err != nil {
		t.Fatal(err)
	}
	if got := content(t, tr); got != "v: 2\n" {
		t.Errorf("v2 after everything was removed: cm.yaml = %q", got)
	}
	if srv.Fetches.Load() == before {
		t.Error("v2 after its repository was removed made no request")
	}
}

// TestPruneLeavesWhatACacheHolds: what an open Cache served is never
// removed, however old; nor is a repository that holds a tree left.
func TestPruneLeavesWhatACacheHolds(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	dir := t.TempDir()
	base := srv.URL + "/org/base.git//app?ref="
	c := New(dir, policy(t, "127.0.0.1"))
	v1, err := get(t, c, base+"v1")
	if err != nil {
		t.Fatal(err)
	}
	age(t, dir, "trees", 48*time.Hour)
	age(t, dir, "repos", 48*time.Hour)
	if n := prune(t, dir, time.Hour); n != 0 {
		t.Errorf("removed %d while a Cache holds them, want 0", n)
	}
	if got := content(t, v1); got != "v: 1\n" {
		t.Errorf("held tree: cm.yaml = %q", got)
	}
	c.Close()

	// The repository is unused for long, but the tree of v1, used
	// recently, is in it: both stay.
	age(t, dir, "repos", 48*time.Hour)
	touch(v1.Root)
	if n := prune(t, dir, time.Hour); n != 0 {
		t.Errorf("removed %d, want 0: the repository holds a recent tree", n)
	}
	if n := len(entries(t, dir, "repos")); n != 1 {
		t.Errorf("%d repositories left, want 1", n)
	}
	if _, err := New(dir, nil).Prune(context.Background(), 0); err == nil {
		t.Error("Prune(0) ran; want it refused (0 is the caller's 'never')")
	}
}

// TestPruneWhileGetting: Prune running again and again over trees and
// repositories made to look old never takes one from under a Cache
// that serves it, and a Get never serves a half-removed tree: each is
// read whole before its Cache closes.
func TestPruneWhileGetting(t *testing.T) {
	t.Parallel()
	// A server each: two Caches fetching into one repository at once is
	// another matter (git's own locks).
	var bases [2]string
	for i := range bases {
		srv, _ := upstream(t)
		bases[i] = srv.URL + "/org/base.git//app?ref="
	}
	dir := t.TempDir()
	want := map[string]string{"v1": "v: 1\n", "v2": "v: 2\n"}
	ctx, cancel := context.WithCancel(context.Background())
	var removed int
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		for ctx.Err() == nil {
			age(t, dir, "trees", 48*time.Hour)
			age(t, dir, "repos", 48*time.Hour)
			n, err := New(dir, nil).Prune(ctx, time.Hour)
			if err != nil && ctx.Err() == nil {
				t.Errorf("Prune: %v", err)
			}
			removed += n
		}
	}()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				ref := []string{"v1", "v2"}[(g+i)%2]
				c := New(dir, policy(t, "127.0.0.1"))
				s, err := Parse(bases[g] + ref)
				if err != nil {
					t.Error(err)
					return
				}
				tr, err := c.Get(ctx, s)
				if err != nil {
					t.Errorf("%s: %v", ref, err)
					c.Close()
					return
				}
				for _, f := range []string{"app/cm.yaml", "app/kustomization.yaml"} {
					b, err := os.ReadFile(filepath.Join(tr.Root, f))
					if err != nil {
						t.Errorf("%s: %v", ref, err)
					} else if f == "app/cm.yaml" && string(b) != want[ref] {
						t.Errorf("%s: cm.yaml = %q", ref, b)
					}
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	cancel()
	<-pruned
	if removed == 0 {
		t.Error("Prune removed nothing while the Gets ran: the test did not race them")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
