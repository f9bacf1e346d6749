// Package gittest builds repositories for tests: it writes files and runs
// the git command line with an identity and settings that make commits
// work on any machine.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git runs git with args in dir and returns its trimmed output; a failure
// fails the test with git's own message.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	base := []string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "protocol.file.allow=always"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Write applies changes to the files under dir: a content writes the
// file, "" deletes it, "->target" makes it a symlink to target.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if content == "" {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Upstream is a bare repository, root/name, that tests serve as a remote
// base (over test/githttp), fed from a work tree of its own.
type Upstream struct {
	t          testing.TB
	bare, work string
}

// NewUpstream makes the bare repository root/name, with no commits.
func NewUpstream(t testing.TB, root, name string) *Upstream {
	t.Helper()
	u := &Upstream{t: t, bare: filepath.Join(root, name), work: t.TempDir()}
	Git(t, root, "init", "-q", "--bare", name)
	Git(t, u.work, "init", "-q", "-b", "main")
	return u
}

// Release commits files (as Write takes them) on main, tags the commit
// unless tag is "", pushes both and returns the commit.
func (u *Upstream) Release(files map[string]string, tag string) string {
	u.t.Helper()
	Write(u.t, u.work, files)
	Git(u.t, u.work, "add", "-A")
	Git(u.t, u.work, "commit", "-qm", "release "+tag)
	if tag != "" {
		Git(u.t, u.work, "tag", tag)
	}
	Git(u.t, u.work, "push", "-q", "--tags", u.bare, "main")
	return Git(u.t, u.work, "rev-parse", "HEAD")
}

// Fixture is a copy of a testdata directory that tests make a git
// repository of and edit commit by commit.
type Fixture struct {
	t   testing.TB
	Dir string
}

// Copy copies the directory src into a temporary directory, not yet a
// repository: Replace the placeholders a test fills in, then Init.
func Copy(t testing.TB, src string) *Fixture {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return &Fixture{t: t, Dir: dir}
}

// NewFixture is Copy and Init: src committed on main.
func NewFixture(t testing.TB, src string) *Fixture {
	t.Helper()
	f := Copy(t, src)
	f.Init(filepath.Base(src))
	return f
}

// Init makes the copy a repository whose main is one commit of every
// file.
func (f *Fixture) Init(msg string) {
	f.t.Helper()
	Git(f.t, f.Dir, "init", "-q", "-b", "main")
	Git(f.t, f.Dir, "add", "-A")
	Git(f.t, f.Dir, "commit", "-qm", msg)
}

// Replace replaces the first old in file with new, failing the test when
// file does not hold old; it commits nothing.
func (f *Fixture) Replace(file, old, new string) {
	f.t.Helper()
	p := filepath.Join(f.Dir, file)
	data, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(data), old) {
		f.t.Fatalf("%s: %v, or no %q in it", file, err, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// Commit commits the changes to tracked files.
func (f *Fixture) Commit(msg string) {
	f.t.Helper()
	Git(f.t, f.Dir, "commit", "-qam", msg)
}

// Edit is Replace and Commit.
func (f *Fixture) Edit(file, old, new string) {
	f.t.Helper()
	f.Replace(file, old, new)
	f.Commit("edit " + file)
}
