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
	"github.com/kplan-dev/kplan/internal/markers"
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
	// The runner passes every input of action.yml, with its defaults, as
	// the composite action's run step does (see actionInputEnv).
	for k, v := range actionInputEnv(t) {
		r.env[k] = v
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
	for _, want := range []string{markers.PlanMarker, "1 to add, 5 to change, 4 to prune in 3 of 3 overlays", "<code>overlays/enterprise</code></b> — overlay removed", "Dangerous"} {
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
	// Pushes warm the render cache (action_scale_test.go); other events
	// are refused, saying which to use.
	r.env["GITHUB_EVENT_NAME"] = "issues"
	if err := r.run(t); err == nil || !strings.Contains(err.Error(), "on: pull_request") {
		t.Errorf("issues event: %v", err)
	}
}

// prStory is a pull request on a base branch that moved after it was
// opened: main at fork, the PR's one commit pr on top of fork (it adds the
// ConfigMap pr-change to overlays/a), then main gets moved (it adds
// moved-in to overlays/b), and GitHub's merge of pr into main, merge, is
// refs/pull/2/merge. The PR head is refs/pull/2/head only, as a fork's is.
type prStory struct {
	upstream               string
	fork, pr, moved, merge string
}

func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  k: v\n"
}

func newPRStory(t *testing.T) *prStory {
	t.Helper()
	s := &prStory{upstream: t.TempDir()}
	up := s.upstream
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, up, files)
		git(t, up, "add", "-A")
		git(t, up, "commit", "-qm", msg)
		return git(t, up, "rev-parse", "HEAD")
	}
	git(t, up, "init", "-q", "-b", "main")
	s.fork = commit(map[string]string{
		"overlays/a/kustomization.yaml": "resources: [app.yaml]\n",
		"overlays/a/app.yaml":           configMap("app-a"),
		"overlays/b/kustomization.yaml": "resources: [app.yaml]\n",
		"overlays/b/app.yaml":           configMap("app-b"),
	}, "two overlays")
	git(t, up, "checkout", "-qb", "feature")
	s.pr = commit(map[string]string{
		"overlays/a/kustomization.yaml": "resources: [app.yaml, pr-change.yaml]\n",
		"overlays/a/pr-change.yaml":     configMap("pr-change"),
	}, "the pull request's change")
	git(t, up, "checkout", "-q", "main")
	s.moved = commit(map[string]string{
		"overlays/b/kustomization.yaml": "resources: [app.yaml, moved-in.yaml]\n",
		"overlays/b/moved-in.yaml":      configMap("moved-in"),
	}, "merged into main after the PR was opened")
	git(t, up, "checkout", "-q", "--detach")
	git(t, up, "merge", "-q", "--no-ff", "-m", "Merge "+s.pr+" into "+s.moved, "feature")
	s.merge = git(t, up, "rev-parse", "HEAD")
	git(t, up, "update-ref", "refs/pull/2/merge", s.merge)
	git(t, up, "update-ref", "refs/pull/2/head", s.pr)
	git(t, up, "checkout", "-q", "main")
	git(t, up, "branch", "-D", "feature")
	git(t, up, "config", "uploadpack.allowReachableSHA1InWant", "true")
	return s
}

// checkoutRef checks out a ref one commit deep, detached, as
// actions/checkout does for refs/pull/N/merge.
func checkoutRef(t *testing.T, upstream, ref string) string {
	ws := filepath.Join(t.TempDir(), "workspace")
	git(t, t.TempDir(), "init", "-q", ws)
	git(t, ws, "remote", "add", "origin", "file://"+upstream)
	git(t, ws, "fetch", "-q", "--no-tags", "--depth=1", "origin", "+"+ref+":refs/remotes/checkout")
	git(t, ws, "checkout", "-q", "--force", "refs/remotes/checkout")
	return ws
}

func short(sha string) string { return sha[:7] }

// planComment runs the action and returns the plan comment it posted on
// PR 2, checking that the work tree, index, HEAD and refs are as the
// checkout left them: what kplan fetches goes to the object database only.
func planComment(t *testing.T, r *runner, gh *githubapi.Server, ws string) string {
	t.Helper()
	head, refs := git(t, ws, "rev-parse", "HEAD"), git(t, ws, "for-each-ref")
	if err := r.run(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	if now := git(t, ws, "for-each-ref"); now != refs {
		t.Errorf("the action changed refs:\n%s\nwas:\n%s", now, refs)
	}
	if st := git(t, ws, "status", "--porcelain", "--ignored"); st != "" {
		t.Errorf("the action changed the work tree or index: %q", st)
	}
	if now := git(t, ws, "rev-parse", "HEAD"); now != head {
		t.Errorf("the action moved HEAD from %s to %s", head, now)
	}
	comments := gh.Comments("Codertocat", "Hello-World", 2)
	if len(comments) != 1 {
		t.Fatalf("%d comments, want kplan's", len(comments))
	}
	return comments[0].Body
}

// On pull_request the checkout is GitHub's merge commit: its first parent
// is the base, so what reached main after the event's base.sha is not
// part of the plan, and the PR's change is.
func TestActionPullRequestMergeCommit(t *testing.T) {
	s := newPRStory(t)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})

	ws := checkoutRef(t, s.upstream, "refs/pull/2/merge")
	if git(t, ws, "rev-parse", "--is-shallow-repository") != "true" {
		t.Fatal("the checkout should be shallow")
	}
	// The event was sent before main moved: its base.sha is the fork point.
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", s.fork, s.pr), gh.URL(), "ghs_test")
	body := planComment(t, r, gh, ws)
	for _, want := range []string{
		"merge of " + short(s.pr) + " into main against main at " + short(s.moved),
		"1 to add, 0 to change, 0 to prune in 1 of 2 overlays",
		"pr-change",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "moved-in") || strings.Contains(body, "overlays/b") {
		t.Errorf("the comment shows main's later change as the PR's:\n%s", body)
	}
	if log := r.stderr.String(); !strings.Contains(log, "base="+s.moved) || !strings.Contains(log, "head="+s.merge) {
		t.Errorf("the log does not name the commits planned:\n%s", log)
	}
}

// On pull_request with the PR head checked out (no merge commit), the
// base is the merge base with main's tip: neither main's later change
// (the event's base.sha, sent after main moved) nor main's tip, which
// would show that change as pruned.
func TestActionPullRequestHeadCheckout(t *testing.T) {
	s := newPRStory(t)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})

	ws := checkoutRef(t, s.upstream, "refs/pull/2/head")
	r := newRunner(t, ws, pullRequestEvent(t, "synchronize.payload.json", s.moved, s.pr), gh.URL(), "ghs_test")
	body := planComment(t, r, gh, ws)
	for _, want := range []string{
		"head " + short(s.pr) + " against main at " + short(s.fork) + " (merge base)",
		"1 to add, 0 to change, 0 to prune in 1 of 2 overlays",
		"pr-change",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "moved-in") || strings.Contains(body, "overlays/b") {
		t.Errorf("the comment shows main's later change:\n%s", body)
	}
}

// On pull_request_target the checkout is main's tip and the PR head is in
// the base repository only as refs/pull/2/head, as a fork's is: kplan
// fetches it by SHA, plans it against the merge base, and never checks it
// out.
func TestActionPullRequestTarget(t *testing.T) {
	s := newPRStory(t)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})

	ws := checkout(t, s.upstream, "main")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", s.fork, s.pr), gh.URL(), "ghs_test")
	r.env["GITHUB_EVENT_NAME"] = "pull_request_target"
	body := planComment(t, r, gh, ws)
	for _, want := range []string{
		"head " + short(s.pr) + " against main at " + short(s.fork) + " (merge base)",
		"1 to add, 0 to change, 0 to prune in 1 of 2 overlays",
		"pr-change",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "moved-in") || strings.Contains(body, "overlays/b") {
		t.Errorf("the comment shows main's later change:\n%s", body)
	}
	if git(t, ws, "rev-parse", "HEAD") != s.moved {
		t.Error("HEAD is not main's tip")
	}
	if _, err := os.Stat(filepath.Join(ws, "overlays/a/pr-change.yaml")); !os.IsNotExist(err) {
		t.Errorf("the PR's file is in the work tree: %v", err)
	}
}

// An overlay already broken on main does not fail the step, even when the
// PR touches it; an overlay the PR breaks does.
func TestActionPreexistingFailure(t *testing.T) {
	up := t.TempDir()
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, up, files)
		git(t, up, "add", "-A")
		git(t, up, "commit", "-qm", msg)
		return git(t, up, "rev-parse", "HEAD")
	}
	git(t, up, "init", "-q", "-b", "main")
	base := commit(map[string]string{
		"overlays/a/kustomization.yaml":      "resources: [app.yaml]\n",
		"overlays/a/app.yaml":                configMap("app-a"),
		"overlays/broken/kustomization.yaml": "resources: [app.yaml, missing.yaml]\n",
		"overlays/broken/app.yaml":           configMap("app-broken"),
	}, "main, with a broken overlay")
	git(t, up, "checkout", "-qb", "feature")
	head := commit(map[string]string{
		"overlays/a/app.yaml":      configMap("app-a2"),
		"overlays/broken/app.yaml": configMap("app-broken2"), // still broken
	}, "touch both")
	git(t, up, "config", "uploadpack.allowReachableSHA1InWant", "true")

	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", base, head), gh.URL(), "ghs_test")
	body := planComment(t, r, gh, ws)
	for _, want := range []string{"<code>overlays/broken</code></b> — failed to render, already on base", "missing.yaml", "app-a2"} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "introduced by this change") {
		t.Errorf("the comment blames the PR for the existing failure:\n%s", body)
	}
	if !strings.Contains(r.stderr.String(), "overlays/broken") {
		t.Errorf("the log does not mention the existing failure:\n%s", r.stderr.String())
	}

	// The next push breaks overlays/a: that fails the step.
	git(t, up, "checkout", "-q", "feature")
	head2 := commit(map[string]string{"overlays/a/kustomization.yaml": "resources: [app.yaml, gone.yaml]\n"}, "break a")
	ws2 := checkout(t, up, "feature")
	r2 := newRunner(t, ws2, pullRequestEvent(t, "synchronize.payload.json", base, head2), gh.URL(), "ghs_test")
	err := r2.run(t)
	if err == nil || !strings.Contains(err.Error(), "overlays/a") || strings.Contains(err.Error(), "overlays/broken") {
		t.Fatalf("err = %v, want the step failed for overlays/a only", err)
	}
	comments := gh.Comments("Codertocat", "Hello-World", 2)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "<code>overlays/a</code></b> — ❌ failed to render: introduced by this change") {
		t.Errorf("comment after the breaking push:\n%v", comments)
	}
}

// actionInputEnv reads action.yml, a composite action, and returns the
// environment its step "kplan" gives kplan-action when the workflow sets no
// input: every INPUT_* variable of that step with the input's default.
// It fails the test unless every input reaches the program under the name
// go-githubactions reads (INPUT_ and the name upper-cased) and every output
// is the same-named output of that step.
func actionInputEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Inputs  map[string]struct{ Default string }
		Outputs map[string]struct{ Value string }
		Runs    struct {
			Using string
			Steps []struct {
				ID   string
				Env  map[string]string
				Run  string
				Uses string
				If   string
				With map[string]string
			}
		}
	}
	if err := sigsyaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if meta.Runs.Using != "composite" {
		t.Fatalf("action.yml runs using %q, want composite", meta.Runs.Using)
	}
	var stepEnv map[string]string
	// The render cache is restored before the plan and saved after it,
	// even when the plan fails the step, at the same path and key.
	var restore, save map[string]string
	pinned := regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	for _, s := range meta.Runs.Steps {
		if s.ID == "kplan" {
			stepEnv = s.Env
			if restore == nil || save != nil {
				t.Error("action.yml: the kplan step must come after the cache restore step and before the save step")
			}
		}
		if s.Uses != "" && !pinned.MatchString(s.Uses) {
			t.Errorf("action.yml: %s is not pinned by commit SHA", s.Uses)
		}
		switch {
		case strings.HasPrefix(s.Uses, "actions/cache/restore@"):
			restore = s.With
		case strings.HasPrefix(s.Uses, "actions/cache/save@"):
			save = s.With
			if !strings.HasPrefix(s.If, "always()") {
				t.Errorf("action.yml: the cache save step runs if %q: it must save after a failing plan too (always())", s.If)
			}
		}
	}
	if restore == nil || save == nil || restore["path"] != save["path"] || restore["key"] != save["key"] || restore["restore-keys"] == "" {
		t.Errorf("action.yml: the render cache's restore (%v) and save (%v) steps must share path and key, and restore have restore-keys", restore, save)
	}
	if stepEnv == nil {
		t.Fatal("action.yml has no step with id kplan and an env")
	}
	env := map[string]string{}
	ref := regexp.MustCompile(`^\$\{\{ inputs\.([\w-]+) \}\}$`)
	for k, v := range stepEnv {
		if !strings.HasPrefix(k, "INPUT_") {
			continue
		}
		m := ref.FindStringSubmatch(v)
		if m == nil {
			t.Errorf("action.yml: %s: %q is not ${{ inputs.<name> }}", k, v)
			continue
		}
		in, ok := meta.Inputs[m[1]]
		if !ok {
			t.Errorf("action.yml: %s names no input %q", k, m[1])
		}
		if want := "INPUT_" + strings.ToUpper(m[1]); k != want {
			t.Errorf("action.yml: input %s is passed as %s, go-githubactions reads %s", m[1], k, want)
		}
		env[k] = in.Default
	}
	for name := range meta.Inputs {
		if _, ok := env["INPUT_"+strings.ToUpper(name)]; !ok {
			t.Errorf("action.yml: input %s does not reach kplan-action", name)
		}
	}
	for name, o := range meta.Outputs {
		if want := "${{ steps.kplan.outputs." + name + " }}"; o.Value != want {
			t.Errorf("action.yml: output %s is %q, want %q", name, o.Value, want)
		}
	}
	return env
}
