package gitmirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// git runs the git command line (shared with other packages' tests).
var git = gittest.Git

func commit(t *testing.T, dir, file, content string) string {
	os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", file)
	return git(t, dir, "rev-parse", "HEAD")
}

func TestFetchOnlyWhatIsNew(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "config.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	first := commit(t, repo, "a.yaml", "a: 1\n")
	srv := githttp.Serve(t, root, "s3cret-token")
	url := srv.URL + "/octo/config.git"
	ctx := context.Background()

	m := &Mirrors{Dir: t.TempDir(), Token: []byte("s3cret-token")}
	dir, tip, err := m.Fetch(ctx, url, "main", first)
	if err != nil || tip != first {
		t.Fatalf("first fetch: %v, tip %s want %s", err, tip, first)
	}
	fetches := srv.Fetches.Load()
	// The commit is already there: no network.
	if _, _, err := m.Fetch(ctx, url, "main", first); err != nil || srv.Fetches.Load() != fetches {
		t.Errorf("a known commit was fetched again (%v)", err)
	}
	second := commit(t, repo, "b.yaml", "b: 1\n")
	dir2, tip, err := m.Fetch(ctx, url, "main", second)
	if err != nil || tip != second || dir2 != dir {
		t.Fatalf("second fetch: %v tip %s dir %s", err, tip, dir2)
	}
	if got := git(t, dir, "show", second+":b.yaml"); got != "b: 1" {
		t.Errorf("mirror content %q", got)
	}
	// A wrong token fails with an error that does not show the token.
	bad := &Mirrors{Dir: t.TempDir(), Token: []byte("wrong-token")}
	_, _, err = bad.Fetch(ctx, url, "main", "")
	if err == nil || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("bad token: %v", err)
	}
}
