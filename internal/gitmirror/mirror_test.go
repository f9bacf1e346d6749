package gitmirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	dir, tip, err := m.Fetch(ctx, url, "main")
	if err != nil || tip != first {
		t.Fatalf("first fetch: %v, tip %s want %s", err, tip, first)
	}
	second := commit(t, repo, "b.yaml", "b: 1\n")
	dir2, tip, err := m.Fetch(ctx, url, "main")
	if err != nil || tip != second || dir2 != dir {
		t.Fatalf("second fetch: %v tip %s dir %s", err, tip, dir2)
	}
	if got := git(t, dir, "show", second+":b.yaml"); got != "b: 1" {
		t.Errorf("mirror content %q", got)
	}
	// Nothing new: the server is still asked, since the branch may have
	// been force-pushed.
	fetches := srv.Fetches.Load()
	if _, tip, err := m.Fetch(ctx, url, "main"); err != nil || tip != second || srv.Fetches.Load() == fetches {
		t.Errorf("fetch with nothing new: %v, tip %s, the server was asked: %v", err, tip, srv.Fetches.Load() != fetches)
	}
	// A wrong token fails with an error that does not show the token.
	bad := &Mirrors{Dir: t.TempDir(), Token: []byte("wrong-token")}
	_, _, err = bad.Fetch(ctx, url, "main")
	if err == nil || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("bad token: %v", err)
	}
}

// After a force-push the tip is the server's, and a commit pushed away is
// no longer reachable from it, though the mirror still holds it.
func TestReachableAfterForcePush(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "config.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	a := commit(t, repo, "a.yaml", "a: 1\n")
	b := commit(t, repo, "b.yaml", "b: 1\n")
	srv := githttp.Serve(t, root, "tok")
	url := srv.URL + "/octo/config.git"
	ctx := context.Background()
	m := &Mirrors{Dir: t.TempDir(), Token: []byte("tok")}
	if _, tip, err := m.Fetch(ctx, url, "main"); err != nil || tip != b {
		t.Fatalf("fetch: %v tip %s", err, tip)
	}
	git(t, repo, "reset", "-q", "--hard", a)
	c := commit(t, repo, "c.yaml", "c: 1\n")
	dir, tip, err := m.Fetch(ctx, url, "main")
	if err != nil || tip != c {
		t.Fatalf("fetch after the force-push: %v tip %s, want %s", err, tip, c)
	}
	for _, tc := range []struct {
		commit string
		want   bool
	}{
		{a, true},  // an ancestor of the tip
		{c, true},  // the tip itself
		{b, false}, // pushed away, still in the mirror
		{"0123456789abcdef0123456789abcdef01234567", false}, // unknown
	} {
		if got := m.IsAncestor(ctx, dir, tc.commit, tip); got != tc.want {
			t.Errorf("IsAncestor(%s, tip) = %v, want %v", tc.commit[:7], got, tc.want)
		}
	}
}

// tokens hands out tokens in turn and records what it was asked.
type tokens struct {
	mu    sync.Mutex
	next  []string
	asked []string
	err   error
}

func (s *tokens) Token(_ context.Context, repo string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, repo)
	if s.err != nil {
		return "", s.err
	}
	t := s.next[0]
	if len(s.next) > 1 {
		s.next = s.next[1:]
	}
	return t, nil
}

// With a TokenSource every fetch asks for a token (an App's expires), and
// every fetch goes to the network.
func TestTokenPerFetch(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "config.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	first := commit(t, repo, "a.yaml", "a: 1\n")
	srv := githttp.Serve(t, root, "current-token")
	url := srv.URL + "/octo/config.git"
	ctx := context.Background()

	// The first token has expired: that fetch fails without showing it;
	// the next asks again and gets the current one.
	src := &tokens{next: []string{"expired-token", "current-token"}}
	m := &Mirrors{Dir: t.TempDir(), Tokens: src}
	if _, _, err := m.Fetch(ctx, url, "main"); err == nil || strings.Contains(err.Error(), "expired-token") {
		t.Fatalf("fetch with an expired token: %v", err)
	}
	if _, tip, err := m.Fetch(ctx, url, "main"); err != nil || tip != first {
		t.Fatalf("fetch with a fresh token: %v", err)
	}
	if _, _, err := m.Fetch(ctx, url, "main"); err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 3 || src.asked[0] != "octo/config" {
		t.Errorf("asked %q, want octo/config for each of the three fetches", src.asked)
	}
	// Repos names the repository of a URL; a failing source fails the
	// fetch with its error.
	src = &tokens{err: errors.New("App not installed")}
	m = &Mirrors{Dir: t.TempDir(), Tokens: src, Repos: map[string]string{url: "Octo-Org/Config"}}
	if _, _, err := m.Fetch(ctx, url, "main"); err == nil || !strings.Contains(err.Error(), "App not installed") {
		t.Errorf("failing source: %v", err)
	}
	if len(src.asked) != 1 || src.asked[0] != "Octo-Org/Config" {
		t.Errorf("asked %q", src.asked)
	}
}

func TestFetchPull(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "config.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	base := commit(t, repo, "a.yaml", "a: 1\n")
	git(t, repo, "checkout", "-qb", "feature")
	head := commit(t, repo, "b.yaml", "b: 1\n")
	git(t, repo, "update-ref", "refs/pull/7/head", head)
	git(t, repo, "checkout", "-q", "main")
	srv := githttp.Serve(t, root, "tok")
	url := srv.URL + "/octo/config.git"
	ctx := context.Background()
	m := &Mirrors{Dir: t.TempDir(), Token: []byte("tok")}
	dir, got, err := m.FetchPull(ctx, url, 7)
	if err != nil || got != head {
		t.Fatalf("FetchPull: %v, head %s want %s", err, got, head)
	}
	// The branch fetch next to it neither loses the PR head nor is
	// changed by it.
	if _, tip, err := m.Fetch(ctx, url, "main"); err != nil || tip != base {
		t.Fatalf("Fetch main: %v, tip %s want %s", err, tip, base)
	}
	if g := git(t, dir, "rev-parse", "refs/pull/7/head"); g != head {
		t.Errorf("refs/pull/7/head after a branch fetch: %s", g)
	}
	if _, _, err := m.FetchPull(ctx, url, 8); err == nil || !strings.Contains(err.Error(), "refs/pull/8/head") {
		t.Errorf("a PR the server lacks: %v", err)
	}
}

// FetchCommit brings in the commit a plan reviewed: from the mirror when
// it is there, by SHA when the server serves SHAs, else from the pull
// request's refs; a commit nothing serves is an error naming each way.
func TestFetchCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// v0 makes the client speak protocol v0, where the server serves
		// only what its refs' tips are (uploadpack.allowAnySHA1InWant
		// false); over v2 git serves any commit it has, as GitHub does.
		v0      bool
		pr      int    // the PR number FetchCommit is given
		on      string // the ref whose tip's parent is the commit; "" none
		fetched bool   // the mirror already fetched main, which reaches it
		absent  bool   // the server does not have the commit at all
		wantErr string // "" succeeds
	}{
		{name: "in the mirror already", on: "refs/heads/main", fetched: true},
		{name: "by SHA", on: "refs/pull/7/merge"},
		{name: "SHAs refused: by the PR's merge ref", v0: true, on: "refs/pull/7/merge", pr: 7},
		{name: "SHAs refused: by the PR's head ref", v0: true, on: "refs/pull/7/head", pr: 7},
		{name: "SHAs refused, no PR", v0: true, on: "refs/pull/7/merge", wantErr: "by SHA"},
		{name: "the server lacks it", pr: 7, absent: true, wantErr: "refs/pull/7/head does not reach it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v0 {
				global := filepath.Join(t.TempDir(), "gitconfig")
				os.WriteFile(global, []byte("[protocol]\n\tversion = 0\n"), 0o644)
				t.Setenv("GIT_CONFIG_GLOBAL", global)
			}
			root := t.TempDir()
			repo := filepath.Join(root, "octo", "config.git")
			os.MkdirAll(repo, 0o755)
			git(t, repo, "init", "-q", "-b", "main")
			base := commit(t, repo, "a.yaml", "a: 1\n")
			git(t, repo, "checkout", "-q", "--detach")
			want := commit(t, repo, "b.yaml", "b: 1\n")
			child := commit(t, repo, "c.yaml", "c: 1\n")
			git(t, repo, "checkout", "-q", "main")
			// Every pull ref exists; only tc.on reaches the commit, and
			// not as its tip (a tip is served by SHA even over v0).
			git(t, repo, "update-ref", "refs/pull/7/merge", base)
			git(t, repo, "update-ref", "refs/pull/7/head", base)
			if tc.on != "" {
				git(t, repo, "update-ref", tc.on, child)
			}
			if tc.absent {
				git(t, repo, "update-ref", "refs/heads/main", base)
				git(t, repo, "checkout", "-qf", "main")
				git(t, repo, "reflog", "expire", "--expire=now", "--all")
				git(t, repo, "gc", "-q", "--prune=now")
			}
			srv := githttp.Serve(t, root, "tok")
			url := srv.URL + "/octo/config.git"
			ctx := context.Background()
			m := &Mirrors{Dir: t.TempDir(), Token: []byte("tok")}
			if tc.fetched {
				if _, _, err := m.Fetch(ctx, url, "main"); err != nil {
					t.Fatal(err)
				}
			}
			before := srv.Fetches.Load()
			dir, err := m.FetchCommit(ctx, url, want, tc.pr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), want) {
					t.Fatalf("FetchCommit: %v, want an error naming %s and saying %q", err, want, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FetchCommit: %v", err)
			}
			if got := git(t, dir, "show", want+":b.yaml"); got != "b: 1" {
				t.Errorf("the commit's content in the mirror: %q", got)
			}
			if asked := srv.Fetches.Load() - before; tc.fetched != (asked == 0) {
				t.Errorf("the server was asked %d times; in the mirror already: %v", asked, tc.fetched)
			}
		})
	}
	m := &Mirrors{Dir: t.TempDir()}
	if _, err := m.FetchCommit(context.Background(), "https://git.example/octo/config.git", "--upload-pack=touch /tmp/x", 7); err == nil || !strings.Contains(err.Error(), "not a full commit SHA") {
		t.Errorf("an option as a SHA: %v", err)
	}
}

// A GitLab project keeps a merge request's head under
// refs/merge-requests/N/head: with ChangeRefs naming GitLab's refs, the
// live plan's FetchPull and FetchCommit (over protocol v0, where SHAs
// are refused) find it there.
func TestGitLabMergeRequestRefs(t *testing.T) {
	global := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(global, []byte("[protocol]\n\tversion = 0\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	root := t.TempDir()
	repo := filepath.Join(root, "group", "sub", "config.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	commit(t, repo, "a.yaml", "a: 1\n")
	git(t, repo, "checkout", "-qb", "feature")
	approved := commit(t, repo, "b.yaml", "b: 1\n")
	head := commit(t, repo, "c.yaml", "c: 1\n")
	git(t, repo, "update-ref", "refs/merge-requests/3/head", head)
	git(t, repo, "checkout", "-q", "main")
	git(t, repo, "branch", "-qD", "feature")
	srv := githttp.Serve(t, root, "tok")
	url := srv.URL + "/group/sub/config.git"
	ctx := context.Background()
	m := &Mirrors{Dir: t.TempDir(), Token: []byte("tok"), ChangeRefs: func(string) (string, string) {
		return "refs/merge-requests/%d/head", "refs/merge-requests/%d/merge"
	}}
	if _, got, err := m.FetchPull(ctx, url, 3); err != nil || got != head {
		t.Fatalf("FetchPull: %v, head %s want %s", err, got, head)
	}
	m2 := &Mirrors{Dir: t.TempDir(), Token: []byte("tok"), ChangeRefs: m.ChangeRefs}
	if _, err := m2.FetchCommit(ctx, url, approved, 3); err != nil {
		t.Errorf("FetchCommit through the merge request's head: %v", err)
	}
}
