package test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/liveplan"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

const (
	glHookToken  = "glpat-webhook"
	glHookSecret = "gitlab's secret token"
	glHookBot    = "project_15_bot_webhook"
)

// glHookEnv is the webhook serving a GitLab project (and a GitHub
// repository, on the same endpoint) against the real apiserver, git over
// smart HTTP and the local GitLab API.
type glHookEnv struct {
	*hookEnv
	gl *gitlabapi.Server
}

// newGitLabHookEnv configures main of GitLab project platform/infra with
// targets (YAML indented for a branch's fields; KUBECONFIG stands for the
// test cluster's), and GitHub's Codertocat/Hello-World beside it.
func newGitLabHookEnv(t *testing.T, targets string) *glHookEnv {
	base, root := newHookBase(t, glProject)
	e := &glHookEnv{hookEnv: base}
	gitSrv := githttp.Serve(t, root, glHookToken)
	e.gh.AddToken(hookToken, githubapi.Identity{Login: "kplan[bot]"})
	e.gl = gitlabapi.New()
	t.Cleanup(e.gl.Close)
	e.gl.AddToken(glHookToken, gitlabapi.User{Username: glHookBot})
	e.config = filepath.Join(t.TempDir(), "webhook.yaml")
	e.state = t.TempDir()
	cfg := fmt.Sprintf(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
repositories:
  - name: %s
    forge: gitlab
    cloneURL: %s/%s.git
    branches:
      - name: main%s
  - name: %s
    branches:
      - name: release
        targets: [{name: github-app, overlay: app, namespace: other, kubeconfig: %s}]
gitlabURL: %s
gitBaseURL: %s
apiBaseURL: %s/
resyncInterval: 1h
stateDir: %s
`, glProject, gitSrv.URL, glProject, strings.ReplaceAll(targets, "KUBECONFIG", e.cluster.Kubeconfig), hookRepo, e.cluster.Kubeconfig, e.gl.URL(), gitSrv.URL, e.gh.URL(), e.state)
	os.WriteFile(e.config, []byte(cfg), 0o644)
	// The project's API is the local GitLab API (gitlabURL); its git, the
	// smart HTTP server (cloneURL).
	e.env = []string{"KPLAN_GITLAB_TOKEN=" + glHookToken, "KPLAN_GITLAB_WEBHOOK_SECRET=" + glHookSecret}
	e.bin = buildWebhook(t)
	return e
}

// sendGitLab posts a delivery as GitLab does, with the secret token
// given ("" sends none).
func (e *glHookEnv) sendGitLab(event string, body []byte, token string) int {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("gl-%d", e.delivery.Add(1)))
	if token != "" {
		req.Header.Set("X-Gitlab-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (e *glHookEnv) mergeHook(iid int64, head, merge string) []byte {
	return gitlabapi.MergeRequestHook(gitlabapi.MergeRequestEvent{Project: glProject, IID: iid, Action: "merge",
		SourceBranch: fmt.Sprintf("mr-%d", iid), TargetBranch: "main", HeadSHA: head, MergeCommitSHA: merge})
}

// glStatus waits for the newest kplan/<target> status of sha to be state.
func (e *glHookEnv) glStatus(sha, name, state string) gitlabapi.Status {
	e.t.Helper()
	var last gitlabapi.Status
	testkit.Eventually(e.t, fmt.Sprintf("status %s %s on %s", name, state, sha[:7]), time.Minute, func() bool {
		for _, s := range e.gl.Statuses(glProject, sha) {
			if s.Name == name {
				last = s
			}
		}
		return last.State == state
	})
	return last
}

// glNote waits for the deploy note on merge request iid to hold want.
func (e *glHookEnv) glNote(iid int64, want string) string {
	e.t.Helper()
	var body string
	testkit.Eventually(e.t, fmt.Sprintf("the deploy note on !%d saying %q", iid, want), time.Minute, func() bool {
		for _, n := range e.gl.Notes(glProject, iid) {
			if n.Author == glHookBot && strings.Contains(n.Body, want) {
				body = n.Body
				return true
			}
		}
		return false
	})
	return body
}

// One endpoint serves a GitLab project and a GitHub repository: a
// GitLab delivery without the secret token, with a wrong one, or with
// GitHub's secret is refused (unsigned ones before their body is read);
// a GitHub delivery naming the GitLab project deploys nothing; a merge
// deploys, reporting a commit status, a deployment of the environment
// and a note on the merge request; an opened merge request gets a live
// plan note.
func TestWebhookDeploysAGitLabMerge(t *testing.T) {
	t.Parallel()
	e := newGitLabHookEnv(t, `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s`)
	initial := e.commit()
	e.start()
	e.waitDeployed(initial)
	git(t, e.repo, "checkout", "-qb", "mr-1")
	head := e.commit("a", "b")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'mr-1' into 'main'", "mr-1")
	merge := git(t, e.repo, "rev-parse", "HEAD")
	e.gl.SetMergeRequest(glProject, gitlabapi.MergeRequest{IID: 1, State: "merged", SHA: head, MergeCommitSHA: merge, SourceBranch: "mr-1", TargetBranch: "main"})
	body := e.mergeHook(1, head, merge)

	for _, tc := range []struct {
		name, token string
	}{{"no token", ""}, {"a wrong token", "guess"}, {"GitHub's secret", hookSecret}} {
		if code := e.sendGitLab(gitlab.MergeRequestHook, body, tc.token); code != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", tc.name, code)
		}
	}
	// Unsigned, with a body that never comes: refused from its headers.
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhook", pr)
	req.ContentLength = 20 << 20
	req.Header.Set("X-Gitlab-Event", gitlab.MergeRequestHook)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || time.Since(start) > 5*time.Second {
		t.Errorf("unsigned, body pending: HTTP %d after %s, want 401 before the body", resp.StatusCode, time.Since(start))
	}
	// GitHub's signature on a delivery naming the GitLab project.
	if code := e.send("push", pushPayload(t, glProject, "0000000000000000000000000000000000000000", merge), "", true); code != http.StatusOK {
		t.Errorf("a GitHub delivery naming the GitLab project: HTTP %d, want 200 (ignored)", code)
	}
	if sha, _ := e.deployed(); sha != initial {
		t.Fatalf("deployed %s before any GitLab delivery", sha)
	}
	// GitHub's deliveries of its own repository still come in.
	if code := e.send("push", pushPayload(t, hookRepo, "0000000000000000000000000000000000000000", merge), "", true); code != http.StatusOK && code != http.StatusAccepted {
		t.Errorf("a GitHub delivery of the GitHub repository: HTTP %d", code)
	}

	if code := e.sendGitLab(gitlab.MergeRequestHook, body, glHookSecret); code != http.StatusAccepted {
		t.Fatalf("the merge: HTTP %d, want 202", code)
	}
	e.waitDeployed(merge)
	eq(t, "ConfigMaps after the merge", e.configMaps(), []string{"a", "b"})
	if st := e.glStatus(merge, "kplan/prod", "success"); st.Ref != "main" || !strings.Contains(st.Description, "2 created") {
		t.Errorf("commit status: %+v", st)
	}
	testkit.Eventually(t, "the deployment of production finished", time.Minute, func() bool {
		for _, d := range e.gl.Deployments(glProject) {
			if d.SHA == merge {
				return d.Environment == "production" && d.Ref == "main" && strings.Join(d.History, ",") == "running,success"
			}
		}
		return false
	})
	e.glNote(1, "1 of 1 targets succeeded")

	// An opened merge request gets a live plan, as a note, of its head
	// fetched from refs/merge-requests/N/head (its branch is gone: only
	// GitLab's ref keeps it).
	git(t, e.repo, "checkout", "-qb", "mr-5", "main")
	head5 := e.commit("a", "b", "live")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "update-ref", "refs/merge-requests/5/head", head5)
	git(t, e.repo, "branch", "-qD", "mr-5")
	open := gitlabapi.MergeRequestHook(gitlabapi.MergeRequestEvent{Project: glProject, IID: 5, Action: "open",
		SourceBranch: "mr-5", TargetBranch: "main", HeadSHA: head5})
	if code := e.sendGitLab(gitlab.MergeRequestHook, open, glHookSecret); code != http.StatusAccepted {
		t.Fatalf("the opened merge request: HTTP %d, want 202", code)
	}
	testkit.Eventually(t, "the live plan note on !5", time.Minute, func() bool {
		for _, n := range e.gl.Notes(glProject, 5) {
			if n.Author == glHookBot && strings.Contains(n.Body, liveplan.Marker) && strings.Contains(n.Body, "`"+head5[:7]+"`") && strings.Contains(n.Body, "live") {
				return true
			}
		}
		return false
	})
	eq(t, "ConfigMaps after the live plan", e.configMaps(), []string{"a", "b"})

	// A replayed delivery (same idempotency key) is not deployed twice.
	req, _ = http.NewRequest(http.MethodPost, e.url+"/webhook", bytes.NewReader(body))
	req.Header.Set("X-Gitlab-Event", gitlab.MergeRequestHook)
	req.Header.Set("X-Gitlab-Token", glHookSecret)
	req.Header.Set("Idempotency-Key", "gl-replayed")
	for i, want := range []int{http.StatusAccepted, http.StatusOK} {
		resp, err := http.DefaultClient.Do(req.Clone(req.Context()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		if resp.StatusCode != want {
			t.Errorf("delivery %d of one idempotency key: HTTP %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}

// Under requireReviewedPlan a GitLab merge is checked against the merge
// request's approvals: a merge request that requires an approval and
// has none is refused (the cluster untouched, the status failed, the
// note saying why); an approval by a Developer of the merged head
// deploys it as approved.
func TestWebhookRefusesAGitLabMergeWithoutApproval(t *testing.T) {
	t.Parallel()
	e := newGitLabHookEnv(t, `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            requireReviewedPlan: true`)
	e.commit("a")
	e.start()
	e.gl.SetMember(glProject, "alice", gitlabapi.Developer)

	mr := func(iid int64, configMaps ...string) (head, merge string) {
		branch := fmt.Sprintf("mr-%d", iid)
		git(t, e.repo, "checkout", "-qb", branch, "main")
		head = e.commit(configMaps...)
		git(t, e.repo, "checkout", "-q", "main")
		base := git(t, e.repo, "rev-parse", "HEAD")
		git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge branch '"+branch+"' into 'main'", branch)
		merge = git(t, e.repo, "rev-parse", "HEAD")
		e.gl.SetMergeRequest(glProject, gitlabapi.MergeRequest{IID: iid, State: "merged", SHA: head, MergeCommitSHA: merge, BaseSHA: base,
			SourceBranch: branch, TargetBranch: "main", ApprovalsRequired: 1, MergedBy: "alice"})
		return head, merge
	}

	head2, merge2 := mr(2, "a", "evil")
	if code := e.sendGitLab(gitlab.MergeRequestHook, e.mergeHook(2, head2, merge2), glHookSecret); code != http.StatusAccepted {
		t.Fatalf("merge of !2: HTTP %d", code)
	}
	st := e.glStatus(merge2, "kplan/prod", "failed")
	if !strings.Contains(st.Description, "refusing to apply (requireReviewedPlan)") {
		t.Errorf("status of the unapproved merge: %+v", st)
	}
	e.glNote(2, "not approved: !2 has no standing approval")
	eq(t, "ConfigMaps after the refusal", e.configMaps(), nil)

	head3, merge3 := mr(3, "a", "c")
	e.gl.Approve(glProject, 3, "alice")
	if code := e.sendGitLab(gitlab.MergeRequestHook, e.mergeHook(3, head3, merge3), glHookSecret); code != http.StatusAccepted {
		t.Fatalf("merge of !3: HTTP %d", code)
	}
	e.waitDeployed(merge3)
	e.glNote(3, "applied exactly as approved in !3 at "+head3[:7]+" by @alice")
	eq(t, "ConfigMaps after the approved merge", e.configMaps(), []string{"a", "c"})

	// A push straight to main, then !4, approved, merged after it: the
	// approval covers !4's diff, never the push, which is refused.
	push := e.commit("a", "c", "pushed")
	head4, merge4 := mr(4, "a", "c", "pushed", "d")
	e.gl.Approve(glProject, 4, "alice")
	if code := e.sendGitLab(gitlab.MergeRequestHook, e.mergeHook(4, head4, merge4), glHookSecret); code != http.StatusAccepted {
		t.Fatalf("merge of !4: HTTP %d", code)
	}
	e.glStatus(merge4, "kplan/prod", "failed")
	e.glNote(4, "not approved: the push "+push[:7]+" came from no merge request")
	eq(t, "ConfigMaps after the push and !4", e.configMaps(), []string{"a", "c"})
}
