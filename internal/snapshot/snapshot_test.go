package snapshot

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// git runs the git command line (shared with other packages' tests).
var git = gittest.Git

func TestCommitAndWorkingTree(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n",
		"base/cm.yaml":            "kind: ConfigMap\n",
		".gitignore":              "build/\n",
		"build/out.yaml":          "ignored\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"linked/cm.yaml": "../base/cm.yaml",                    // inside: followed
		"linkdir":        "base",                               // directory inside: followed
		"escape.txt":     filepath.Join(outside, "secret.txt"), // absolute: dropped
		"escape2.txt":    "../../" + filepath.Base(outside) + "/secret.txt",
		"dangling.yaml":  "nothere.yaml",
		"loop1":          "loop2",
		"loop2":          "loop1",
	}
	os.MkdirAll(filepath.Join(dir, "linked"), 0o755)
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "one")
	// Change the work tree after the commit.
	os.WriteFile(filepath.Join(dir, "base/cm.yaml"), []byte("kind: ConfigMap # edited\n"), 0o644)

	ctx := context.Background()
	commit, err := FromCommit(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := FromWorkingTree(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    *Snapshot
		path string
		want string // "" means absent
	}{
		{commit, "base/cm.yaml", "kind: ConfigMap\n"},
		{wt, "base/cm.yaml", "kind: ConfigMap # edited\n"},
		{commit, "linked/cm.yaml", "kind: ConfigMap\n"},
		{wt, "linked/cm.yaml", "kind: ConfigMap # edited\n"},
		{commit, "linkdir/kustomization.yaml", "resources: [cm.yaml]\n"},
		{wt, "linkdir/kustomization.yaml", "resources: [cm.yaml]\n"},
		{commit, "build/out.yaml", ""},
		{wt, "build/out.yaml", ""},
		{commit, "escape.txt", ""},
		{wt, "escape.txt", ""},
		{wt, "escape2.txt", ""},
		{wt, "dangling.yaml", ""},
		{wt, "loop1", ""},
		{wt, ".git/HEAD", ""},
	} {
		got, err := tc.s.FS.ReadFile(Abs(tc.path))
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s at %s: present (%q), want absent", tc.path, tc.s.Rev, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s at %s = %q, %v; want %q", tc.path, tc.s.Rev, got, err, tc.want)
		}
	}
	if len(commit.Rev) != 40 || wt.Rev != WorkingTree {
		t.Errorf("revs %q %q", commit.Rev, wt.Rev)
	}
	if _, err := FromCommit(ctx, dir, "no-such-branch"); err == nil || !strings.Contains(err.Error(), "no-such-branch") {
		t.Errorf("unknown revision: %v", err)
	}
}

// Outside git, the working tree is every file below the directory.
func TestWorkingTreeWithoutGit(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a/kustomization.yaml"), []byte("resources: []\n"), 0o644)
	s, err := FromWorkingTree(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.FS.Exists(Abs("a/kustomization.yaml")) || s.Files != 1 {
		t.Errorf("files = %d", s.Files)
	}
}

func TestChanged(t *testing.T) {
	a := newIndex(nil, map[string]string{"k/kustomization.yaml": "1", "k/cm.yaml": "2", "gone/x.yaml": "3", "same/y": "4"})
	b := newIndex(nil, map[string]string{"k/kustomization.yaml": "1", "k/cm.yaml": "5", "new/dir/z.yaml": "6", "same/y": "4", "gone": "7"})
	got := Changed(a, b)
	want := map[string]bool{
		"k/cm.yaml":      true,                               // modified
		"gone/x.yaml":    true,                               // deleted
		"gone":           true,                               // a directory that is now a file
		"new/dir/z.yaml": true, "new/dir": true, "new": true, // added, with the directories that appear
	}
	if len(got) != len(want) {
		t.Errorf("changed = %v, want %v", got, want)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("%s not changed", p)
		}
	}
	for _, tc := range []struct{ path, state string }{{"k/cm.yaml", "f:2"}, {"k", "d"}, {".", "d"}, {"nope", "-"}} {
		if s := a.State(tc.path); s != tc.state {
			t.Errorf("State(%s) = %s, want %s", tc.path, s, tc.state)
		}
	}
}

// Open reads the file list and kustomizations; Load adds what is asked,
// and nothing a tree lacks.
func TestOpenLoadsLazily(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\n",
		"app/cm.yaml":            "kind: ConfigMap\n",
		"big/data.yaml":          "kind: ConfigMap\n",
		"empty/sub/f.txt":        "x\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	os.Symlink("app", filepath.Join(dir, "linked"))
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "one")
	ctx := context.Background()
	s, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"app/kustomization.yaml", "linked/kustomization.yaml"} {
		if !s.FS.Exists(Abs(p)) {
			t.Errorf("%s not loaded by Open", p)
		}
	}
	if s.FS.Exists(Abs("app/cm.yaml")) || s.FS.Exists(Abs("big")) {
		t.Error("Open loaded more than kustomizations")
	}
	if err := s.Load(ctx, []string{"app/cm.yaml", "empty", "nothere.yaml"}); err != nil {
		t.Fatal(err)
	}
	if data, err := s.FS.ReadFile(Abs("app/cm.yaml")); err != nil || string(data) != "kind: ConfigMap\n" {
		t.Errorf("app/cm.yaml = %q, %v", data, err)
	}
	if !s.FS.IsDir(Abs("empty")) || s.FS.Exists(Abs("empty/sub/f.txt")) || s.FS.Exists(Abs("nothere.yaml")) {
		t.Error("Load of a directory must make the directory only; of a missing path nothing")
	}
	if data, err := s.ReadFile(ctx, "big/data.yaml"); err != nil || string(data) != "kind: ConfigMap\n" {
		t.Errorf("ReadFile of an unloaded file = %q, %v", data, err)
	}
	if s.Files != 6 {
		t.Errorf("files = %d, want 6 (the symlinked directory's two count)", s.Files)
	}
}

// Containing finds the files holding a string on both sides of a plan
// and loads none of them: a search of the whole tree keeps nothing.
func TestContainingLoadsNothing(t *testing.T) {
	dir := t.TempDir()
	write := func(files map[string]string) {
		for name, content := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(map[string]string{
		"flux/ks.yaml":   "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n",
		"apps/cm.yaml":   "kind: ConfigMap\n",
		"apps/copy.yaml": "kind: ConfigMap\n",
	})
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	write(map[string]string{"apps/cm.yaml": "# kustomize.toolkit.fluxcd.io\nkind: ConfigMap\n"})
	git(t, dir, "commit", "-qam", "head")

	ctx := context.Background()
	blobs := NewBlobs(dir)
	paths := []string{"apps/cm.yaml", "apps/copy.yaml", "flux/ks.yaml", "missing.yaml"}
	for _, c := range []struct {
		rev  string
		want string
	}{
		{"HEAD~1", "flux/ks.yaml"},
		{"HEAD", "apps/cm.yaml flux/ks.yaml"},
	} {
		s, err := Open(ctx, dir, c.rev, blobs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Containing(ctx, paths, "kustomize.toolkit.fluxcd.io")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: %q hold the group, want %q", c.rev, got, c.want)
		}
		for _, p := range paths {
			if _, err := s.FS.ReadFile(Abs(p)); err == nil {
				t.Errorf("%s: %s is loaded after the search", c.rev, p)
			}
		}
	}
}

// ReadFiles gives what ReadFile gives for each path present, in one git
// process, without loading the files into the FS krusty reads.
func TestReadFilesIsReadFileInOneGo(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a/cm.yaml": "kind: ConfigMap\n", "b/env": "K=V\n", "c/same.yaml": "kind: ConfigMap\n"} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	ctx := context.Background()
	s, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"a/cm.yaml", "b/env", "c/same.yaml", "missing.yaml", "a"}
	got, err := s.ReadFiles(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("%d files read, want the 3 present: %v", len(got), got)
	}
	for _, p := range paths[:3] {
		want, err := s.ReadFile(ctx, p)
		if err != nil || string(got[p]) != string(want) {
			t.Errorf("%s: %q, ReadFile %q (%v)", p, got[p], want, err)
		}
		if _, err := s.FS.ReadFile(Abs(p)); err == nil {
			t.Errorf("%s is loaded into the FS", p)
		}
	}
}

// Derived computes once per content for the snapshots sharing blobs (the
// two sides of a plan), again for a content that changed, and fails for
// a path the commit does not hold.
func TestDerivedOncePerContent(t *testing.T) {
	dir := t.TempDir()
	write := func(files map[string]string) {
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(map[string]string{"same.yaml": "kind: A\n", "edited.yaml": "kind: B\n"})
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	write(map[string]string{"edited.yaml": "kind: C\n"})
	git(t, dir, "commit", "-qam", "head")

	ctx := context.Background()
	blobs := NewBlobs(dir)
	defer blobs.Close()
	computed := map[string]int{}
	for _, rev := range []string{"HEAD~1", "HEAD"} {
		s, err := Open(ctx, dir, rev, blobs)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"same.yaml", "edited.yaml"} {
			v, err := s.Derived(ctx, p, "upper", func(data []byte) any {
				computed[string(data)]++
				return strings.ToUpper(string(data))
			})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := s.ReadFile(ctx, p)
			if v != strings.ToUpper(string(want)) {
				t.Errorf("%s %s: derived %q, want %q", rev, p, v, strings.ToUpper(string(want)))
			}
		}
		if _, err := s.Derived(ctx, "missing.yaml", "upper", func([]byte) any { return nil }); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: Derived of a missing path: %v, want fs.ErrNotExist", rev, err)
		}
	}
	if want := map[string]int{"kind: A\n": 1, "kind: B\n": 1, "kind: C\n": 1}; !maps.Equal(computed, want) {
		t.Errorf("computed %v, want each content once: %v", computed, want)
	}
}

// TestListingsSorted: a directory of a commit lists its names sorted,
// however its paths sort ("a/b.yaml" before "a/b/c.yaml", whose name "b"
// comes first), and the index lists every file sorted.
func TestListingsSorted(t *testing.T) {
	dir := t.TempDir()
	gittest.Write(t, dir, map[string]string{"a/b.yaml": "x", "a/b/c.yaml": "x", "a/b-c/d.yaml": "x", "a/a.yaml": "x", "z.yaml": "x"})
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "one")
	blobs := NewBlobs(dir)
	defer blobs.Close()
	s, err := Open(context.Background(), dir, "HEAD", blobs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.tree.children("a"), []string{"a.yaml", "b", "b-c", "b.yaml"}; !slices.Equal(got, want) {
		t.Errorf("a lists %q, want %q", got, want)
	}
	if got := s.Index.Paths(); !slices.IsSorted(got) || len(got) != 5 {
		t.Errorf("the index lists %q", got)
	}
}
