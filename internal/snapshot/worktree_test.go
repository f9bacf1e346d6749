package snapshot

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/test/gittest"
)

// A clean work tree is its commit, even when .gitattributes checks files
// out with CRLF and their stat information is stale.
func TestCleanCRLFWorkTreeIsItsCommit(t *testing.T) {
	dir := commitFiles(t, map[string]string{
		".gitattributes":          "* text eol=crlf\n",
		"app/kustomization.yaml":  "resources: [cm.yaml]\n",
		"app/cm.yaml":             "kind: ConfigMap\ndata:\n  k: v\n",
		"app/linked.yaml":         "->cm.yaml",
		"app/files/settings.conf": "a=1\nb=2\n",
	})
	// Check the files out again, now with CRLF, and make them look touched.
	for _, p := range []string{"app/kustomization.yaml", "app/cm.yaml", "app/files/settings.conf"} {
		os.Remove(filepath.Join(dir, p))
	}
	git(t, dir, "checkout", "--", ".")
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "app/cm.yaml"), later, later)
	if data, _ := os.ReadFile(filepath.Join(dir, "app/cm.yaml")); !strings.Contains(string(data), "\r\n") {
		t.Fatalf("the checkout has no CRLF: %q", data)
	}
	ctx := context.Background()
	commit, err := FromCommit(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := FromWorkingTree(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ch := Changed(commit.Index, wt.Index); len(ch) != 0 {
		t.Errorf("a clean work tree differs from its commit in %v", ch)
	}
	if data, _ := wt.FS.ReadFile(Abs("app/linked.yaml")); string(data) != "kind: ConfigMap\ndata:\n  k: v\n" {
		t.Errorf("app/linked.yaml = %q, want it as committed", data)
	}

	// Edits, new files and deletions are read from the disk as they are;
	// ignored files stay out of the plan.
	gittest.Write(t, dir, map[string]string{
		"app/cm.yaml":             "kind: ConfigMap\r\ndata:\r\n  k: w\r\n",
		"app/new.yaml":            "new\n",
		"app/files/settings.conf": "",
		".gitignore":              "*.env\n",
		"app/secret.env":          "S=1\n",
	})
	wt, err = FromWorkingTree(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"app/cm.yaml":             "kind: ConfigMap\r\ndata:\r\n  k: w\r\n",
		"app/linked.yaml":         "kind: ConfigMap\r\ndata:\r\n  k: w\r\n",
		"app/new.yaml":            "new\n",
		"app/files/settings.conf": "",
		"app/secret.env":          "",
	} {
		got, err := wt.FS.ReadFile(Abs(p))
		if want == "" {
			if err == nil {
				t.Errorf("%s is in the work tree snapshot", p)
			}
			continue
		}
		if string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	want := map[string]bool{"app/cm.yaml": true, "app/linked.yaml": true, "app/new.yaml": true,
		"app/files/settings.conf": true, "app/files": true, ".gitignore": true}
	ch := Changed(commit.Index, wt.Index)
	for p := range want {
		if !ch[p] {
			t.Errorf("%s not changed: %v", p, ch)
		}
	}
	if len(ch) != len(want) {
		t.Errorf("changed %v, want %v", ch, want)
	}
}

// The disk FS that kplan render and apply use reads ignored files (a
// local secret.env a generator reads), while discovery lists what git
// would commit.
func TestDiskReadsIgnoredFiles(t *testing.T) {
	dir := commitFiles(t, map[string]string{
		".gitignore":             "secret.env\nignored/\n",
		"app/kustomization.yaml": "secretGenerator: [{name: s, envs: [secret.env]}]\n",
	})
	gittest.Write(t, dir, map[string]string{
		"app/secret.env":                   "S=1\n",
		"ignored/kustomization.yaml":       "resources: []\n",
		"app/untracked/kustomization.yaml": "resources: []\n",
	})
	fsys, err := OpenDisk(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := fsys.ReadFile(Abs("app/secret.env")); string(data) != "S=1\n" {
		t.Errorf("secret.env = %q, %v", data, err)
	}
	var walked []string
	fsys.Walk(Root, func(p string, info fs.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			walked = append(walked, Rel(p))
		}
		return err
	})
	if strings.Join(walked, " ") != ".gitignore app/kustomization.yaml app/untracked/kustomization.yaml" {
		t.Errorf("walked %q", walked)
	}
	if fsys.Exists(Abs(".git/HEAD")) {
		t.Error(".git is part of the work tree")
	}
}
