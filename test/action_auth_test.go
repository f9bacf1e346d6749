package test

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// A checkout made with persist-credentials: false keeps no credentials;
// the Action fetches what it plans from a repository that requires them
// with its own token, as it must for a private repository.
func TestActionFetchesWithItsToken(t *testing.T) {
	const token = "ghs_private"
	s := newPRStory(t)
	root := t.TempDir()
	git(t, root, "clone", "-q", "--mirror", s.upstream, filepath.Join(root, "Hello-World.git"))
	git(t, filepath.Join(root, "Hello-World.git"), "config", "uploadpack.allowReachableSHA1InWant", "true")
	srv := githttp.Serve(t, root, token)
	url := srv.URL + "/Hello-World.git"

	ws := filepath.Join(t.TempDir(), "workspace")
	header := "http.extraheader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	git(t, t.TempDir(), "-c", header, "clone", "-q", "--depth=1", "--branch", "main", url, ws)
	if out := git(t, ws, "config", "--list"); strings.Contains(out, "extraheader") {
		t.Fatalf("the checkout kept credentials:\n%s", out)
	}
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken(token, githubapi.Identity{Login: "github-actions[bot]"})
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", s.fork, s.pr), gh.URL(), token)
	r.env["GITHUB_EVENT_NAME"] = "pull_request_target"
	r.env["GITHUB_SERVER_URL"] = srv.URL
	body := planComment(t, r, gh, ws)
	if !strings.Contains(body, "head "+short(s.pr)+" against main at "+short(s.fork)) || !strings.Contains(body, "pr-change") {
		t.Errorf("the comment does not plan the PR fetched with the token:\n%s", body)
	}
	// (Only in the ::add-mask:: command that tells the runner to hide it.)
	if out := strings.ReplaceAll(r.stdout.String(), "::add-mask::"+token, ""); strings.Contains(out+r.stderr.String(), token) {
		t.Error("the token appears in the Action's output")
	}
	// Without the token, the fetch fails and says what to do.
	r = newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", s.fork, s.pr), gh.URL(), "")
	r.env["GITHUB_EVENT_NAME"] = "pull_request_target"
	if err := r.run(t); err == nil || !strings.Contains(err.Error(), "Authentication failed") && !strings.Contains(err.Error(), "could not read Username") {
		t.Errorf("planning a private repository without a token: %v, want git's authentication failure", err)
	}
}
