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
