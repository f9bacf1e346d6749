package snapshot

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/test/gittest"
)

// commitFiles makes a repository holding files (gittest.Write's format)
// in one commit and returns its directory.
func commitFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	gittest.Write(t, dir, files)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "files")
	return dir
}

// Names kyaml's in-memory FS refused are names like any other.
func TestFSServesAnyNameGitStores(t *testing.T) {
	names := []string{
		"apps/cert-manager@v1.14/kustomization.yaml",
		"apps/cert-manager@v1.14/tls+ca.pem",
		"docs/Run book (prod).md",
		"café/ünïcode é.yaml",
		"a b/c+d/(e)@f.txt",
	}
	files := map[string]string{}
	for _, n := range names {
		files[n] = "content of " + n + "\n"
	}
	dir := commitFiles(t, files)
	ctx := context.Background()
	lazy, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := lazy.Load(ctx, names); err != nil {
		t.Fatal(err)
	}
	full, err := FromCommit(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	disk, err := OpenDisk(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fsys := range []struct {
		name string
		fs   filesys.FileSystem
	}{{"lazy", lazy.FS}, {"full", full.FS}, {"disk", disk}} {
		for _, n := range names {
			got, err := fsys.fs.ReadFile(Abs(n))
			if err != nil || string(got) != files[n] {
				t.Errorf("%s: ReadFile(%s) = %q, %v", fsys.name, n, got, err)
			}
			if d := path.Dir(n); !fsys.fs.IsDir(Abs(d)) {
				t.Errorf("%s: %s is not a directory", fsys.name, d)
			}
			entries, err := fsys.fs.ReadDir(Abs(path.Dir(n)))
			if err != nil || !slices.Contains(entries, path.Base(n)) {
				t.Errorf("%s: ReadDir(%s) = %q, %v", fsys.name, path.Dir(n), entries, err)
			}
		}
		var walked []string
		err := fsys.fs.Walk(Root, func(p string, info fs.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				walked = append(walked, Rel(p))
			}
			return err
		})
		want := slices.Sorted(slices.Values(names))
		if err != nil || !slices.Equal(walked, want) {
			t.Errorf("%s: Walk found %q, %v; want %q", fsys.name, walked, err, want)
		}
	}
}

// The FS answers as the OS answers on a checkout of the same commit, for
// every kind of symlink that stays in the repository, and with the disk
// FS over that checkout. Links that leave the repository lead nowhere.
func TestFSResolvesSymlinksAsTheOS(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside\n"), 0o644)
	files := map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n",
		"base/cm.yaml":            "kind: ConfigMap\n",
		"base/sub/deep.yaml":      "deep\n",
		"base/alias.yaml":         "->cm.yaml",
		"base/up":                 "->..",
		"file.yaml":               "->base/cm.yaml",
		"chain1":                  "->chain2",
		"chain2":                  "->base",
		"dirlink":                 "->base/sub",
		"dotlink":                 "->./base/./sub/",
		"parent/back":             "->../base/sub",
		"parent/via.yaml":         "->../dirlink/../cm.yaml", // ".." after a link leaves its target
		"parent/self":             "->.",
		"loop1":                   "->loop2",
		"loop2":                   "->loop1",
		"dangling":                "->nothere",
		"filedir":                 "->base/cm.yaml/x",
		"abs.txt":                 "->" + filepath.Join(outside, "secret.txt"),
		"escape.txt":              "->../" + filepath.Base(outside) + "/secret.txt",
	}
	dir := commitFiles(t, files)
	ctx := context.Background()
	snap, err := FromCommit(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	disk, err := OpenDisk(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	leaves := map[string]bool{"abs.txt": true, "escape.txt": true}
	for _, p := range []string{
		"base", "base/cm.yaml", "base/alias.yaml", "base/up", "base/up/file.yaml", "base/up/base/up/base/cm.yaml",
		"file.yaml", "chain1", "chain1/cm.yaml", "chain1/sub/deep.yaml", "dirlink/deep.yaml", "dirlink/../cm.yaml",
		"dotlink/deep.yaml", "parent/back/deep.yaml", "parent/via.yaml", "parent/self/self/back/deep.yaml",
		"loop1", "loop1/x", "dangling", "filedir", "base/cm.yaml/x", "nothere/..", "abs.txt", "escape.txt",
	} {
		want := osAnswer(dir, p)
		if leaves[p] {
			want = answer{}
		}
		for name, fsys := range map[string]filesys.FileSystem{"commit": snap.FS, "disk": disk} {
			if got := fsAnswer(fsys, p); got != want {
				t.Errorf("%s: %s = %+v, the OS says %+v", name, p, got, want)
			}
		}
	}
}

// answer is what a file system says about a path.
type answer struct {
	exists, dir bool
	content     string
	real        string // the path with every link resolved, repository-relative
}

func osAnswer(dir, p string) answer {
	full := filepath.Join(dir, p)
	fi, err := os.Stat(full)
	if err != nil {
		return answer{}
	}
	a := answer{exists: true, dir: fi.IsDir()}
	if !a.dir {
		data, _ := os.ReadFile(full)
		a.content = string(data)
	}
	top, _ := filepath.EvalSymlinks(dir)
	real, _ := filepath.EvalSymlinks(full)
	r, _ := filepath.Rel(top, real)
	a.real = filepath.ToSlash(r)
	return a
}

func fsAnswer(fsys filesys.FileSystem, p string) answer {
	abs := Abs(p)
	if !fsys.Exists(abs) {
		return answer{}
	}
	a := answer{exists: true, dir: fsys.IsDir(abs)}
	if !a.dir {
		data, _ := fsys.ReadFile(abs)
		a.content = string(data)
	}
	d, f, err := fsys.CleanedAbs(abs)
	if err != nil {
		a.real = err.Error()
	} else {
		a.real = Rel(d.Join(f))
	}
	return a
}

// Paths above the repository's top do not exist: kustomize finds nothing
// there in a checkout, and kplan must not clamp them to the top.
func TestFSHasNothingAboveTheTop(t *testing.T) {
	dir := commitFiles(t, map[string]string{"a/kustomization.yaml": "resources: []\n", "x.yaml": "x\n"})
	s, err := FromCommit(context.Background(), dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/x.yaml", "/a", "/", Root + "/../x.yaml", Root + "/a/../../x.yaml", "/repo2/x.yaml"} {
		if s.FS.Exists(p) {
			t.Errorf("%s exists", p)
		}
		_, err := s.FS.ReadFile(p)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "doesn't exist") {
			t.Errorf("ReadFile(%s): %v, want a not-exist error", p, err)
		}
		if _, _, err := s.FS.CleanedAbs(p); err == nil {
			t.Errorf("CleanedAbs(%s) succeeds", p)
		}
	}
	if !s.FS.IsDir(Root) || !s.FS.Exists(Root+"/a/../x.yaml") {
		t.Error("the top and the paths below it must exist")
	}
}

// kplan's rewrites override what FS serves; the commit, its Index and
// what ReadFile says was committed stay as they were. Writes fail.
func TestOverrideKeepsTheCommit(t *testing.T) {
	const committed = "resources: []\ninventory: {type: ConfigMap}\n"
	dir := commitFiles(t, map[string]string{"a/kustomization.yaml": committed, "link.yaml": "->a/kustomization.yaml"})
	ctx := context.Background()
	s, err := FromCommit(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.Index.ID("a/kustomization.yaml")
	if err := s.FS.Override(Abs("link.yaml"), []byte("resources: []\n")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/kustomization.yaml", "link.yaml"} {
		if got, _ := s.FS.ReadFile(Abs(p)); string(got) != "resources: []\n" {
			t.Errorf("FS %s = %q, want the override", p, got)
		}
		if got, _ := s.ReadFile(ctx, p); string(got) != committed {
			t.Errorf("ReadFile(%s) = %q, want what was committed", p, got)
		}
	}
	if now, _ := s.Index.ID("a/kustomization.yaml"); now != id || id != blobID([]byte(committed)) {
		t.Errorf("index id %s, was %s", now, id)
	}
	if err := s.FS.Override(Abs("a"), nil); err == nil {
		t.Error("a directory was overridden")
	}
	if err := s.FS.Override(Abs("nothere"), nil); err == nil {
		t.Error("a missing file was overridden")
	}
	for name, err := range map[string]error{
		"WriteFile": s.FS.WriteFile(Abs("a/kustomization.yaml"), nil),
		"MkdirAll":  s.FS.MkdirAll(Abs("b")),
		"RemoveAll": s.FS.RemoveAll(Abs("a")),
	} {
		if !errors.Is(err, errReadOnly) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// A directory link whose target holds a link: resolving in map order
// found the nested file on some runs only. The index and FS find it on
// every run.
func TestNestedLinksAreFoundEveryTime(t *testing.T) {
	dir := commitFiles(t, map[string]string{
		"base/real.yaml":   "real\n",
		"base/linked.yaml": "->real.yaml",
		"overlay/base":     "->../base",
		"overlay/b2":       "->base",
	})
	ctx := context.Background()
	for range 20 {
		s, err := FromCommit(ctx, dir, "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"overlay/base/linked.yaml", "overlay/b2/linked.yaml", "overlay/b2/real.yaml"} {
			if id, ok := s.Index.ID(p); !ok || id != blobID([]byte("real\n")) {
				t.Fatalf("index %s = %s, %v", p, id, ok)
			}
			if got, err := s.FS.ReadFile(Abs(p)); string(got) != "real\n" {
				t.Fatalf("FS %s = %q, %v", p, got, err)
			}
		}
		if s.Files != 6 {
			t.Fatalf("files = %d, want 6: two files under three directory names", s.Files)
		}
	}
}

// A symlink loop in the tree does not hang the listing, and paths round
// the loop are still known.
func TestLinkLoopsAreBounded(t *testing.T) {
	dir := commitFiles(t, map[string]string{"a/f.yaml": "f\n", "a/up": "->..", "a/self": "->."})
	s, err := FromCommit(context.Background(), dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/up/a/f.yaml", "a/self/self/up/a/self/f.yaml"} {
		if _, ok := s.Index.ID(p); !ok || !s.FS.Exists(Abs(p)) {
			t.Errorf("%s: not found", p)
		}
	}
}

// TestResolveDeepPathIsLinear pins that resolving a clean path without
// links allocates about nothing: a 10,000-deep directory a pull request
// adds made the walk build every prefix anew, 200 MB of garbage per
// lookup (a hostile input's peak RSS went over its bound).
func TestResolveDeepPathIsLinear(t *testing.T) {
	deep := strings.Repeat("d/", 10000) + "cm.yaml"
	lstat := func(p string) (kind, string) {
		if p == deep {
			return regular, ""
		}
		if len(p) < len(deep) && deep[len(p)] == '/' && deep[:len(p)] == p {
			return directory, ""
		}
		return absent, ""
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	real, k, err := resolve(lstat, deep)
	runtime.ReadMemStats(&after)
	if err != nil || real != deep || k != regular {
		t.Fatalf("resolve: %q %v %v", real[:min(len(real), 20)], k, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("resolving a 10,000-deep path allocated %d bytes", n)
	}
	if _, _, err := resolve(lstat, strings.Repeat("d/", 5000)+"missing"); !errors.Is(err, errMissing) {
		t.Errorf("a missing deep path: %v", err)
	}
}
