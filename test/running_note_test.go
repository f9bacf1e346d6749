package test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	ghdeploys "github.com/kplan-dev/kplan/internal/forge/github/deploys"
	forgegitlab "github.com/kplan-dev/kplan/internal/forge/gitlab"
	gldeploys "github.com/kplan-dev/kplan/internal/forge/gitlab/deploys"
	"github.com/kplan-dev/kplan/internal/gitlabci"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gitlabapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// behindRepo makes dir a repository whose main declares two targets in
// .kplan.yaml, prod and staging, and moves on twice after c0; the
// branch changes, off main's tip (base), edits prod.
func behindRepo(t *testing.T, dir string) (c0, base, head string) {
	t.Helper()
	cm := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {v: \"" + v + "\"}\n"
	}
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, dir, files)
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-qm", msg)
		return git(t, dir, "rev-parse", "HEAD")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	c0 = commit(map[string]string{
		".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets:\n" +
			"  - {name: prod, overlay: overlays/prod, environment: production-eu, namespace: prod}\n" +
			"  - {name: staging, overlay: overlays/staging, namespace: staging}\n",
		"overlays/prod/kustomization.yaml":    "resources: [cm.yaml]\n",
		"overlays/prod/cm.yaml":               cm("1"),
		"overlays/staging/kustomization.yaml": "resources: [cm.yaml]\n",
		"overlays/staging/cm.yaml":            cm("1"),
	}, "c0")
	commit(map[string]string{"overlays/prod/cm.yaml": cm("2")}, "prod 2, merged unreviewed")
	base = commit(map[string]string{"overlays/staging/cm.yaml": cm("2")}, "staging 2")
	git(t, dir, "checkout", "-qb", "changes")
	head = commit(map[string]string{"overlays/prod/cm.yaml": cm("3")}, "prod 3")
	git(t, dir, "config", "uploadpack.allowReachableSHA1InWant", "true")
	return c0, base, head
}

// target is one of behindRepo's targets as the webhook deploys it from
// the repository's .kplan.yaml (targetsFrom).
func target(repo, name, overlay, env string) deployer.Target {
	return deployer.Target{Target: config.Target{Name: name, Overlay: overlay, Environment: env}, Repo: repo, Branch: "main", Source: config.SourceName(repo, "main")}
}

// reporter is the webhook's deploy reports (deployer.Reporter's part
// that records a deploy).
type reporter interface {
	Started(ctx context.Context, t deployer.Target, sha string, pr int)
	Finished(ctx context.Context, o deployer.Outcome)
}

// deployed records a successful deploy of sha to t, as the webhook does.
func deployed(r reporter, t deployer.Target, sha string) {
	ctx := context.Background()
	r.Started(ctx, t, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: t, SHA: sha, Result: &deploy.Result{}})
}

// defaultBranch sets the repository's default branch in an event
// payload (GitHub's example says master).
func defaultBranch(t *testing.T, path, branch string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	ev["repository"].(map[string]any)["default_branch"] = branch
	out, _ := json.Marshal(ev)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The webhook deployed c0 to prod and main's tip to staging, and
// recorded both as GitHub Deployments; a pull request into main then
// learns from its plan comment that prod's cluster runs c0, two commits
// behind main, whose changes its deploy needs approved too. Staging runs
// the base: nothing said. A token without deployments: read (GitHub
// answers 403) fails nothing: a warning, and the comment is the one
// without deployments.
func TestActionNotesWhatTheClusterRuns(t *testing.T) {
	up := t.TempDir()
	c0, base, head := behindRepo(t, up)
	const repo = "Codertocat/Hello-World"
	ws := checkout(t, up, "changes")

	run := func(t *testing.T, gh *githubapi.Server, token string) (body, summary, log string) {
		t.Helper()
		r := newRunner(t, ws, defaultBranch(t, pullRequestEvent(t, "opened.payload.json", base, head), "main"), gh.URL(), token)
		if err := r.run(t); err != nil {
			t.Fatal(err)
		}
		cs := gh.Comments("Codertocat", "Hello-World", 2)
		if len(cs) != 1 {
			t.Fatalf("%d comments, want kplan's one", len(cs))
		}
		s, _ := os.ReadFile(r.summary)
		return took.ReplaceAllString(cs[0].Body, "; TIME.</sub>"), string(s), r.stderr.String()
	}
	newServer := func(t *testing.T) *githubapi.Server {
		gh := githubapi.New()
		t.Cleanup(gh.Close)
		gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
		gh.AddToken("ghs_nodeploy", githubapi.Identity{Login: "github-actions[bot]", NoDeployments: true})
		gh.AddToken("ghs_webhook", githubapi.Identity{Login: "kplan[bot]"})
		return gh
	}
	plain, _, _ := run(t, newServer(t), "ghs_test")

	gh := newServer(t)
	rep := ghdeploys.NewReporter(gh.Client("ghs_webhook"), slog.New(slog.DiscardHandler))
	rep.Backoff = time.Millisecond
	deployed(rep, target(repo, "prod", "overlays/prod", "production-eu"), c0)
	deployed(rep, target(repo, "staging", "overlays/staging", "staging"), base)

	t.Run("read", func(t *testing.T) {
		body, summary, _ := run(t, gh, "ghs_test")
		note := "> [!NOTE]\n> Target `prod`: the cluster runs `" + c0[:7] + "`, 2 commits behind `main`: the deploy needs those approved too.\n\n"
		if strings.Count(body, note) != 1 || strings.Index(body, note) > strings.Index(body, "| Overlay |") {
			t.Errorf("the comment does not note prod once, above the table:\n%s", body)
		}
		if strings.Contains(body, "`staging`: the cluster runs") {
			t.Errorf("staging runs the base, yet is noted:\n%s", body)
		}
		if body != strings.Replace(plain, "\n\n| Overlay |", "\n\n"+note+"| Overlay |", 1) {
			t.Errorf("the note changed more than its line:\n%s\nwithout deployments:\n%s", body, plain)
		}
		if !strings.Contains(summary, note) {
			t.Errorf("the job summary lacks the note:\n%s", summary)
		}
		var envs []string
		for _, req := range gh.Requests() {
			if req.Method == "GET" && strings.HasSuffix(req.Path, "/deployments") {
				envs = append(envs, req.Query)
			}
		}
		if len(envs) != 2 || !strings.Contains(envs[0], "environment=production-eu") || !strings.Contains(envs[1], "environment=staging") {
			t.Errorf("deployments listed with %v, want production-eu then staging", envs)
		}
	})
	t.Run("403", func(t *testing.T) {
		body, _, log := run(t, gh, "ghs_nodeploy")
		if body != plain {
			t.Errorf("a 403 changed the comment:\n%s\nwant\n%s", body, plain)
		}
		if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "403") || !strings.Contains(log, "deployments: read") {
			t.Errorf("no warning naming the permission:\n%s", log)
		}
	})
}

// The same on GitLab: the webhook's deployment of prod's environment,
// recorded by its reporter, is two commits behind the merge request's
// target branch; a token GitLab refuses (403) fails nothing.
func TestGitLabPipelineNotesWhatTheClusterRuns(t *testing.T) {
	root := t.TempDir()
	upstream := filepath.Join(root, glProject+".git")
	c0, base, head := behindRepo(t, upstream)
	merge := mergeRef(t, upstream, 1)
	srv := githttp.Serve(t, root, jobToken)

	gl := gitlabapi.New()
	defer gl.Close()
	gl.AddToken("glpat-kplan", gitlabapi.User{Username: glBot})
	gl.AddToken("glpat-guest", gitlabapi.User{Username: "guest", Guest: true})
	gl.AddToken("glpat-webhook", gitlabapi.User{Username: "project_15_bot_webhook"})
	client, err := forgegitlab.NewClient(gl.APIURL(), "glpat-webhook")
	if err != nil {
		t.Fatal(err)
	}
	rep := gldeploys.NewReporter(client, slog.New(slog.DiscardHandler))
	deployed(rep, target(glProject, "prod", "overlays/prod", "production-eu"), c0)
	deployed(rep, target(glProject, "staging", "overlays/staging", "staging"), base)

	run := func(t *testing.T, token, user string) (string, string) {
		t.Helper()
		ws := runnerCheckout(t, srv, "refs/merge-requests/1/merge")
		j := newGitLabJob(gl, ws, map[string]string{"CI_MERGE_REQUEST_EVENT_TYPE": "merged_result", "CI_COMMIT_SHA": merge,
			"CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": head, "CI_MERGE_REQUEST_TARGET_BRANCH_SHA": base, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
			"CI_DEFAULT_BRANCH": "main", gitlabci.EnvToken: token})
		if err := j.run(t); err != nil {
			t.Fatal(err)
		}
		var body string
		for _, n := range gl.Notes(glProject, 1) {
			if n.Author == user {
				body = n.Body
			}
		}
		return took.ReplaceAllString(body, "; TIME.</sub>"), j.stderr.String()
	}
	note := "> [!NOTE]\n> Target `prod`: the cluster runs `" + c0[:7] + "`, 2 commits behind `main`: the deploy needs those approved too.\n\n"
	body, _ := run(t, "glpat-kplan", glBot)
	if strings.Count(body, note) != 1 || strings.Contains(body, "`staging`: the cluster runs") {
		t.Errorf("the note does not note prod alone, once:\n%s", body)
	}
	// A guest may write the note but not read deployments: the log says
	// so, the job passes, and the note is the plan without the line.
	guest, log := run(t, "glpat-guest", "guest")
	if guest != strings.Replace(body, note, "", 1) {
		t.Errorf("the guest's note:\n%s\nwant the plan without the line:\n%s", guest, body)
	}
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "403") || !strings.Contains(log, "Reporter") {
		t.Errorf("no warning naming the role:\n%s", log)
	}
}
