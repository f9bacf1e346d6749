package snapshot

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// TestOpenFromEqualsOpen: a head opened from its base's listing and a
// diff is the head git lists: the same files, directories, changed paths
// and kustomization files, whatever the change (a file replacing a
// directory, a directory emptied, a submodule, a mode, a symlink).
func TestOpenFromEqualsOpen(t *testing.T) {
	base := map[string]string{
		"apps/a/kustomization.yaml":         "resources: [cm.yaml]\n",
		"apps/a/cm.yaml":                    "kind: ConfigMap\n",
		"apps/b/deep/er/kustomization.yaml": "resources: []\n",
		"apps/c":                            "a file\n",
		"tools/run.sh":                      "#!/bin/sh\n",
		"README.md":                         "hi\n",
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"modify", func(t *testing.T, dir string) { write(t, dir, "apps/a/cm.yaml", "kind: Secret\n") }},
		{"add in a new directory", func(t *testing.T, dir string) { write(t, dir, "apps/new/x/kustomization.yaml", "resources: []\n") }},
		{"delete the last file of a deep directory", func(t *testing.T, dir string) { remove(t, dir, "apps/b/deep/er/kustomization.yaml") }},
		{"a directory replaces a file", func(t *testing.T, dir string) {
			remove(t, dir, "apps/c")
			write(t, dir, "apps/c/kustomization.yaml", "resources: []\n")
		}},
		{"a file replaces a directory", func(t *testing.T, dir string) {
			remove(t, dir, "apps/a/kustomization.yaml")
			remove(t, dir, "apps/a/cm.yaml")
			remove(t, dir, "apps/a")
			write(t, dir, "apps/a", "now a file\n")
		}},
		{"mode only", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "tools/run.sh"), 0o755) }},
		{"a submodule replaces a file", func(t *testing.T, dir string) {
			remove(t, dir, "README.md")
			gittest.Git(t, dir, "add", "-A")
			gittest.Git(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",README.md")
		}},
		{"a symlink", func(t *testing.T, dir string) {
			if err := os.Symlink("a", filepath.Join(dir, "apps/link")); err != nil {
				t.Fatal(err)
			}
		}},
		{"nothing", func(t *testing.T, dir string) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range base {
				write(t, dir, name, content)
			}
			gittest.Git(t, dir, "init", "-q")
			gittest.Git(t, dir, "add", "-A")
			gittest.Git(t, dir, "commit", "-qm", "base")
			tc.change(t, dir)
			gittest.Git(t, dir, "add", "-A")
			gittest.Git(t, dir, "commit", "-qm", "head", "--allow-empty")
			ctx := context.Background()
			blobs := NewBlobs(dir)
			b, err := Open(ctx, dir, "HEAD~1", blobs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := OpenFrom(ctx, b, "HEAD")
			if err != nil {
				t.Fatal(err)
			}
			want, err := Open(ctx, dir, "HEAD", blobs)
			if err != nil {
				t.Fatal(err)
			}
			if fromDiff := got.Index.from == b.Index; fromDiff != (tc.name != "a symlink") {
				t.Errorf("opened from the diff: %v", fromDiff)
			}
			if got.Rev != want.Rev || got.Files != want.Files {
				t.Errorf("rev, files = %s, %d; want %s, %d", got.Rev, got.Files, want.Rev, want.Files)
			}
			if !maps.Equal(got.tree.files, want.tree.files) {
				t.Errorf("files:\n got %v\nwant %v", got.tree.files, want.tree.files)
			}
			if !maps.EqualFunc(got.tree.dirs, want.tree.dirs, slices.Equal) {
				t.Errorf("directories:\n got %v\nwant %v", got.tree.dirs, want.tree.dirs)
			}
			if g, w := Changed(b.Index, got.Index), Changed(b.Index, want.Index); !maps.Equal(g, w) {
				t.Errorf("changed:\n got %v\nwant %v", g, w)
			}
			if g, w := got.Index.Paths(), want.Index.Paths(); !slices.Equal(g, w) {
				t.Errorf("paths:\n got %v\nwant %v", g, w)
			}
			gk, _ := got.KustomizationFiles()
			wk, _ := want.KustomizationFiles()
			if !slices.Equal(gk, wk) {
				t.Errorf("kustomization files:\n got %v\nwant %v", gk, wk)
			}
			if g, w := walked(t, got), walked(t, want); !slices.Equal(g, w) {
				t.Errorf("the FS shows\n %v\nwant %v", g, w)
			}
		})
	}
}

// walked lists what FS.Walk finds.
func walked(t *testing.T, s *Snapshot) []string {
	var out []string
	err := s.FS.Walk(Root, func(p string, info fs.FileInfo, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t *testing.T, dir, name, content string) {
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, dir, name string) {
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
