package snapshot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

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
