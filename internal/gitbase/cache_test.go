package gitbase

import (
	"context"
	"encoding/pem"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// upstream is a repository served over smart HTTP on loopback, with tags
// v1 and v2 and a branch main that moves.
func upstream(t *testing.T) (srv *githttp.Server, work string) {
	t.Helper()
	root := t.TempDir()
	work = t.TempDir()
	gittest.Git(t, root, "init", "-q", "--bare", "org/base.git")
	gittest.Git(t, work, "init", "-q", "-b", "main")
	gittest.Git(t, work, "remote", "add", "origin", filepath.Join(root, "org/base.git"))
	gittest.Write(t, work, map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": "v: 1\n", "link": "->/etc/passwd"})
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-q", "-m", "v1")
	gittest.Git(t, work, "tag", "v1")
	gittest.Write(t, work, map[string]string{"app/cm.yaml": "v: 2\n"})
	gittest.Git(t, work, "commit", "-q", "-am", "v2")
	gittest.Git(t, work, "tag", "-a", "-m", "two", "v2")
	gittest.Git(t, work, "push", "-q", "origin", "main", "v1", "v2")
	return githttp.Serve(t, root, ""), work
}

func policy(t *testing.T, hosts ...string) *netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.New(hosts, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, c *Cache, ref string) (*Tree, error) {
	t.Helper()
	s, err := Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	return c.Get(context.Background(), s)
}

func content(t *testing.T, tr *Tree) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.Root, "app", "cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCacheKeepsTagsAndResolvesBranches: a tag (lightweight or annotated)
// and a SHA are fetched once and served from disk in the next run; a
// branch is asked for in every run and follows its pushes.
func TestCacheKeepsTagsAndResolvesBranches(t *testing.T) {
	t.Parallel()
	srv, work := upstream(t)
	dir := t.TempDir()
	base := srv.URL + "/org/base.git//app?ref="
	c := New(dir, policy(t, "127.0.0.1"))
	defer c.Close()
	for _, tc := range []struct{ ref, want string }{{"v1", "v: 1\n"}, {"v2", "v: 2\n"}, {"main", "v: 2\n"}} {
		tr, err := get(t, c, base+tc.ref)
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		if got := content(t, tr); got != tc.want {
			t.Errorf("%s: cm.yaml = %q, want %q", tc.ref, got, tc.want)
		}
		if _, err := os.Lstat(filepath.Join(tr.Root, "link")); err == nil {
			t.Errorf("%s: the symlink of the repository was checked out", tc.ref)
		}
	}
	sha1 := gittest.Git(t, work, "rev-parse", "v1")
	gittest.Write(t, work, map[string]string{"app/cm.yaml": "v: 3\n"})
	gittest.Git(t, work, "commit", "-q", "-am", "v3")
	gittest.Git(t, work, "push", "-q", "origin", "main")

	// The next run: tags and SHAs from disk, the branch from the server.
	c2 := New(dir, policy(t, "127.0.0.1"))
	defer c2.Close()
	before := srv.Fetches.Load()
	for _, ref := range []string{"v1", "v2", sha1} {
		if _, err := get(t, c2, base+ref); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
	if n := srv.Fetches.Load() - before; n != 0 {
		t.Errorf("tags and a SHA fetched before made %d requests, want none", n)
	}
	tr, err := get(t, c2, base+"main")
	if err != nil {
		t.Fatal(err)
	}
	if got := content(t, tr); got != "v: 3\n" {
		t.Errorf("main after a push: cm.yaml = %q, want v: 3", got)
	}
	if tr.Commit != gittest.Git(t, work, "rev-parse", "main") {
		t.Errorf("main resolved to %s", tr.Commit)
	}
}

// TestCacheRefusesOutsidePolicy: a host the policy does not name is not
// contacted, git's insteadOf is applied before the check, and ssh and
// file repositories are not fetched.
func TestCacheRefusesOutsidePolicy(t *testing.T) {
	// Not parallel: git's configuration comes from the environment.
	srv, _ := upstream(t)
	for _, tc := range []struct {
		name  string
		hosts []string
		ref   string
		env   []string
		want  string
	}{
		{name: "no hosts", ref: srv.URL + "/org/base.git//app?ref=v1", want: "renders fetch from no host unless hosts are listed (allow it with --remote-hosts 127.0.0.1)"},
		{name: "wildcard does not reach loopback", hosts: []string{"*"}, ref: srv.URL + "/org/base.git//app?ref=v1", want: "only a host named exactly may reach such an address"},
		{name: "insteadOf to loopback", hosts: []string{"github.com"}, ref: "github.com/org/base//app?ref=v1",
			env:  []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url." + srv.URL + "/.insteadOf", "GIT_CONFIG_VALUE_0=https://github.com/"},
			want: "host 127.0.0.1 is not among the hosts renders may fetch from (allow it with --remote-hosts 127.0.0.1)"},
		{name: "ssh", hosts: []string{"*"}, ref: "git@github.com:org/base//app?ref=v1", want: "write the base as https://github.com/org/base"},
		{name: "file", hosts: []string{"*"}, ref: "file:///etc//x", want: "file:// repository would read the disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range tc.env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			c := New(t.TempDir(), policy(t, tc.hosts...))
			defer c.Close()
			before := srv.Fetches.Load()
			_, err := get(t, c, tc.ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
			if n := srv.Fetches.Load() - before; n != 0 {
				t.Errorf("%d fetches reached the server", n)
			}
		})
	}
}

// TestCacheFetchesOverHTTPS: https, the form of real remote bases, goes
// through the proxy's CONNECT tunnel, dialed under the policy.
func TestCacheFetchesOverHTTPS(t *testing.T) {
	// Not parallel: git's trust of the test's certificate comes from the
	// environment.
	plain, _ := upstream(t)
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	h := &cgi.Handler{Path: strings.TrimSpace(string(backend)) + "/git-http-backend",
		Env: []string{"GIT_PROJECT_ROOT=" + plain.Root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_SSL_CAINFO", ca)
	c := New(t.TempDir(), policy(t, "127.0.0.1"))
	defer c.Close()
	tr, err := get(t, c, srv.URL+"/org/base.git//app?ref=v2")
	if err != nil {
		t.Fatal(err)
	}
	if got := content(t, tr); got != "v: 2\n" {
		t.Errorf("cm.yaml = %q, want v: 2", got)
	}
	c2 := New(t.TempDir(), policy(t, "*"))
	defer c2.Close()
	if _, err := get(t, c2, srv.URL+"/org/base.git//app?ref=v2"); err == nil || !strings.Contains(err.Error(), "only a host named exactly may reach such an address") {
		t.Errorf("through a wildcard: err = %v, want the tunnel refused", err)
	}
}
