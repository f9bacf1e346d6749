// End-to-end tests: the real programs against real git repositories and a
// local server speaking GitHub's REST API.
package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/action"
	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/prcomment"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// fixtures are GitHub's published example payloads, copied into testdata
// (see its LICENCE.md) so that a clean clone tests on its own.
const fixtures = "testdata/github-webhooks"

// git runs the git command line (shared with other packages' tests).
var git = gittest.Git

// pullRequestEvent copies GitHub's example payload with the test's commits;
// the base branch is main, as in the test repositories.
func pullRequestEvent(t *testing.T, name, baseSHA, headSHA string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "pull_request", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	pr := ev["pull_request"].(map[string]any)
	pr["base"].(map[string]any)["sha"] = baseSHA
	pr["base"].(map[string]any)["ref"] = "main"
	pr["head"].(map[string]any)["sha"] = headSHA
	out, _ := json.Marshal(ev)
	p := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runner holds what a GitHub runner gives a Docker action.
type runner struct {
	env             map[string]string
	output, summary string
	stdout, stderr  bytes.Buffer // stderr: the log
}

func newRunner(t *testing.T, workspace, eventPath, apiURL, token string) *runner {
	tmp := t.TempDir()
	r := &runner{output: filepath.Join(tmp, "output"), summary: filepath.Join(tmp, "summary")}
	for _, f := range []string{r.output, r.summary} {
		os.WriteFile(f, nil, 0o644)
	}
	r.env = map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": eventPath,
		"GITHUB_WORKSPACE": workspace, "GITHUB_OUTPUT": r.output, "GITHUB_STEP_SUMMARY": r.summary,
		"GITHUB_API_URL": apiURL, "GITHUB_REPOSITORY": "Codertocat/Hello-World", "RUNNER_TEMP": tmp,
	}
	// The runner passes every input of action.yml, with its defaults.
	data, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Inputs map[string]struct{ Default string }
	}
	if err := sigsyaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	for name, in := range meta.Inputs {
		r.env["INPUT_"+strings.ToUpper(name)] = in.Default
	}
	r.env["INPUT_GITHUB-TOKEN"] = token
	return r
}

func (r *runner) run(t *testing.T) error {
	t.Helper()
	r.stdout.Reset()
	r.stderr.Reset()
	err := action.Run(context.Background(), nil, func(k string) string { return r.env[k] }, &r.stdout, &r.stderr)
	if err != nil {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
	}
	return err
}

// outputs parses GITHUB_OUTPUT's name<<delimiter blocks.
func (r *runner) outputs(t *testing.T) map[string]string {
	data, err := os.ReadFile(r.output)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	re := regexp.MustCompile(`(?s)([\w-]+)<<(\S+)\n(.*?)\n(\S+)\n`)
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		if m[2] == m[4] {
			out[m[1]] = m[3]
		}
	}
	return out
}

// checkout clones branch as actions/checkout does: one commit deep.
func checkout(t *testing.T, upstream, branch string) string {
	ws := filepath.Join(t.TempDir(), "workspace")
	git(t, t.TempDir(), "clone", "-q", "--depth=1", "--branch", branch, "file://"+upstream, ws)
	return ws
}

// demoPR makes the demo repository a pull request on GitHub: main at the
// base commit, branch changes at the head, checked out.
func demoPR(t *testing.T, upstream string) *demo.Repo {
	t.Helper()
	repo, err := demo.NewRepo(context.Background(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	git(t, upstream, "checkout", "-qb", "changes")
	git(t, upstream, "branch", "-f", "main", repo.Base)
	// As GitHub does: any commit reachable from a ref can be fetched by SHA.
	git(t, upstream, "config", "uploadpack.allowReachableSHA1InWant", "true")
	return repo
}

func TestActionCommentsAndEditsInPlace(t *testing.T) {
	upstream := t.TempDir()
	repo := demoPR(t, upstream)

	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	gh.SeedComment("Codertocat", "Hello-World", 2, "octocat", "Looks good to me")

	// First push: the PR is opened.
	ws := checkout(t, upstream, "changes")
	if git(t, ws, "rev-parse", "--is-shallow-repository") != "true" {
		t.Fatal("the checkout should be shallow, as actions/checkout makes it")
	}
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", repo.Base, repo.Head), gh.URL(), "ghs_test")
	if err := r.run(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	comments := gh.Comments("Codertocat", "Hello-World", 2)
	if len(comments) != 2 {
		t.Fatalf("%d comments, want the seeded one and kplan's", len(comments))
	}
	first := comments[1]
	for _, want := range []string{prcomment.PlanMarker, "1 to add, 5 to change, 4 to prune in 3 of 3 overlays", "#### `overlays/enterprise` — overlay removed", "Dangerous"} {
		if !strings.Contains(first.Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, first.Body)
		}
	}
	if strings.Contains(first.Body, "secret-key-rotated") {
		t.Error("the comment shows a Secret value")
	}
	out := r.outputs(t)
	if out["added"] != "1" || out["changed"] != "5" || out["pruned"] != "4" || out["has-changes"] != "true" {
		t.Errorf("outputs = %v", out)
	}
	var js struct{ Totals struct{ Added int } }
	if data, err := os.ReadFile(out["report-json"]); err != nil || json.Unmarshal(data, &js) != nil || js.Totals.Added != 1 {
		t.Errorf("report-json %q: %v %+v", out["report-json"], err, js)
	}
	if summary, _ := os.ReadFile(r.summary); !strings.Contains(string(summary), "1 to add, 5 to change, 4 to prune") {
		t.Errorf("job summary = %q", summary)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" || git(t, ws, "rev-parse", "HEAD") != repo.Head {
		t.Errorf("the action changed the work tree: %q", st)
	}

	// Second push: enterprise comes back; the same comment is edited.
	git(t, upstream, "checkout", "-q", "changes")
	git(t, upstream, "checkout", "-q", repo.Base, "--", "overlays/enterprise")
	git(t, upstream, "commit", "-qm", "bring enterprise back")
	head2 := git(t, upstream, "rev-parse", "HEAD")
	ws2 := checkout(t, upstream, "changes")
	r2 := newRunner(t, ws2, pullRequestEvent(t, "synchronize.payload.json", repo.Base, head2), gh.URL(), "ghs_test")
	if err := r2.run(t); err != nil {
		t.Fatalf("second run: %v", err)
	}
	comments = gh.Comments("Codertocat", "Hello-World", 2)
	if len(comments) != 2 || comments[1].ID != first.ID {
		t.Fatalf("after the second push: %d comments (ids %v), want kplan's comment %d edited", len(comments), ids(comments), first.ID)
	}
	if body := comments[1].Body; !strings.Contains(body, "1 to add, 6 to change, 0 to prune in 3 of 3 overlays") || strings.Contains(body, "overlay removed") {
		t.Errorf("edited comment:\n%s", body)
	}
	if comments[0].Body != "Looks good to me" {
		t.Error("another user's comment was changed")
	}
}

func ids(cs []githubapi.Comment) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// A fork's token cannot comment: the plan goes to the summary and the step
// succeeds with a warning. A broken head overlay fails the step.
func TestActionForkAndBrokenOverlay(t *testing.T) {
	upstream := t.TempDir()
	repo := demoPR(t, upstream)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_fork", githubapi.Identity{Login: "github-actions[bot]", ReadOnly: true})

	ws := filepath.Join(t.TempDir(), "ws")
	git(t, t.TempDir(), "clone", "-q", "file://"+upstream, ws)
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", repo.Base, repo.Head), gh.URL(), "ghs_fork")
	if err := r.run(t); err != nil {
		t.Fatalf("fork run: %v", err)
	}
	if !strings.Contains(r.stdout.String(), "::warning::") || len(gh.Comments("Codertocat", "Hello-World", 2)) != 0 {
		t.Errorf("want a warning and no comment; stdout:\n%s", r.stdout.String())
	}
	if summary, _ := os.ReadFile(r.summary); !strings.Contains(string(summary), "to prune") {
		t.Error("the plan is not in the job summary")
	}
	if strings.Contains(r.stdout.String(), "ghs_fork") && !strings.Contains(r.stdout.String(), "::add-mask::ghs_fork") {
		t.Error("the token appears in the log")
	}

	// Break an overlay on a new head commit.
	os.WriteFile(filepath.Join(ws, "overlays/dev/kustomization.yaml"), []byte("resources: [../../nothere]\n"), 0o644)
	git(t, ws, "commit", "-qam", "break dev")
	r.env["GITHUB_EVENT_PATH"] = pullRequestEvent(t, "synchronize.payload.json", repo.Base, git(t, ws, "rev-parse", "HEAD"))
	err := r.run(t)
	if err == nil || !strings.Contains(err.Error(), "overlays/dev") {
		t.Errorf("broken overlay: err %v, want it named", err)
	}
	r.env["INPUT_FAIL-ON-ERROR"] = "false"
	if err := r.run(t); err != nil {
		t.Errorf("fail-on-error false: %v", err)
	}
	r.env["GITHUB_EVENT_NAME"] = "push"
	if err := r.run(t); err == nil || !strings.Contains(err.Error(), "pull_request") {
		t.Errorf("push event: %v", err)
	}
}
