package test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// countingServer is a loopback HTTP server that counts what it is asked.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// policyPR is a repository whose pull request makes overlays/a include a
// resource from url: main at base, the PR's head at head (checked out).
func policyPR(t *testing.T, url string) (ws, base, head string) {
	t.Helper()
	up := t.TempDir()
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, up, files)
		git(t, up, "add", "-A")
		git(t, up, "commit", "-qm", msg)
		return git(t, up, "rev-parse", "HEAD")
	}
	git(t, up, "init", "-q", "-b", "main")
	base = commit(map[string]string{
		"overlays/a/kustomization.yaml": "resources: [app.yaml]\n",
		"overlays/a/app.yaml":           configMap("app-a"),
		"overlays/b/kustomization.yaml": "resources: [app.yaml]\n",
		"overlays/b/app.yaml":           configMap("app-b"),
	}, "two overlays")
	git(t, up, "checkout", "-qb", "feature")
	head = commit(map[string]string{
		"overlays/a/kustomization.yaml": "resources:\n- app.yaml\n- " + url + "\n",
		"overlays/b/app.yaml":           strings.ReplaceAll(configMap("app-b"), "k: v", "k: w"),
	}, "a remote resource")
	git(t, up, "config", "uploadpack.allowReachableSHA1InWant", "true")
	// The checkout is the PR's head, as with actions/checkout's ref.
	ws = filepath.Join(t.TempDir(), "ws")
	git(t, t.TempDir(), "clone", "-q", "--branch", "feature", "file://"+up, ws)
	return ws, base, head
}

// fromFork rewrites the event at path so that the pull request's head is
// in another repository, as a fork's is.
func fromFork(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	repo := ev["pull_request"].(map[string]any)["head"].(map[string]any)["repo"].(map[string]any)
	repo["full_name"] = "attacker/Hello-World"
	repo["owner"].(map[string]any)["login"] = "attacker"
	out, _ := json.Marshal(ev)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A pull request's http(s) resources are fetched only from the hosts the
// workflow lists: remote-hosts for its own branches, fork-remote-hosts
// (by default none) for forks and pull_request_target runs. A refused
// overlay fails alone, saying which input allows the host, and the host
// gets no request; a redirect to a host not listed is refused too.
func TestActionRemoteHostsAndForks(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(configMap("fetched-remote")))
	})
	redirect := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
		http.Redirect(w, r, "http://localhost:"+port+"/cm.yaml", http.StatusFound)
	})
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})

	run := func(t *testing.T, url, event string, fork bool, inputs map[string]string) (comment string) {
		t.Helper()
		ws, base, head := policyPR(t, url)
		ev := pullRequestEvent(t, "opened.payload.json", base, head)
		if fork {
			ev = fromFork(t, ev)
		}
		r := newRunner(t, ws, ev, gh.URL(), "ghs_test")
		r.env["GITHUB_EVENT_NAME"] = event
		r.env["INPUT_FAIL-ON-ERROR"] = "false"
		for k, v := range inputs {
			r.env[k] = v
		}
		if err := r.run(t); err != nil {
			t.Fatalf("run: %v", err)
		}
		comments := gh.Comments("Codertocat", "Hello-World", 2)
		if len(comments) == 0 {
			t.Fatal("no plan comment")
		}
		return comments[len(comments)-1].Body
	}
	refused := func(t *testing.T, body, input string) {
		t.Helper()
		if !strings.Contains(body, "overlays/a") || !strings.Contains(body, input) {
			t.Errorf("the comment does not report overlays/a refused, naming %s:\n%s", input, body)
		}
		if strings.Contains(body, "fetched-remote") {
			t.Errorf("the comment shows the remote resource:\n%s", body)
		}
		if !strings.Contains(body, "app-b") {
			t.Errorf("overlays/b is not planned:\n%s", body)
		}
	}

	t.Run("fork", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, srv.URL+"/cm.yaml", "pull_request", true, map[string]string{"INPUT_REMOTE-HOSTS": "127.0.0.1"})
		refused(t, body, "fork-remote-hosts")
		if n := srv.hits.Load(); n != 0 {
			t.Errorf("the listener got %d requests from a fork's plan", n)
		}
	})
	t.Run("pull_request_target", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, srv.URL+"/cm.yaml", "pull_request_target", false, map[string]string{"INPUT_REMOTE-HOSTS": "127.0.0.1"})
		refused(t, body, "fork-remote-hosts")
		if n := srv.hits.Load(); n != 0 {
			t.Errorf("the listener got %d requests from a pull_request_target plan", n)
		}
	})
	t.Run("not listed", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, srv.URL+"/cm.yaml", "pull_request", false, nil)
		refused(t, body, "remote-hosts")
		if n := srv.hits.Load(); n != 0 {
			t.Errorf("the listener got %d requests", n)
		}
	})
	t.Run("listed", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, srv.URL+"/cm.yaml", "pull_request", false, map[string]string{"INPUT_REMOTE-HOSTS": "example.com, 127.0.0.1"})
		if !strings.Contains(body, "fetched-remote") {
			t.Errorf("the comment does not add the fetched ConfigMap:\n%s", body)
		}
		if srv.hits.Load() == 0 {
			t.Error("the listed host was not asked")
		}
	})
	t.Run("fork with fork-remote-hosts", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, srv.URL+"/cm.yaml", "pull_request", true, map[string]string{"INPUT_FORK-REMOTE-HOSTS": "127.0.0.1"})
		if !strings.Contains(body, "fetched-remote") {
			t.Errorf("the comment does not add the fetched ConfigMap:\n%s", body)
		}
	})
	t.Run("redirect to a host not listed", func(t *testing.T) {
		srv.hits.Store(0)
		body := run(t, redirect.URL+"/cm.yaml", "pull_request", false, map[string]string{"INPUT_REMOTE-HOSTS": "127.0.0.1, *"})
		refused(t, body, "remote-hosts")
		if redirect.hits.Load() == 0 {
			t.Error("the listed host was not asked")
		}
		if n := srv.hits.Load(); n != 0 {
			t.Errorf("the redirect's target got %d requests", n)
		}
	})
}
