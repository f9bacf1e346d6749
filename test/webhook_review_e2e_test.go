package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// reviewPR is pull request n of the hook repository: branch pr-N with
// configMaps, merged by GitHub's test merge into main as refs/pull/N/merge.
// It runs kplan's Action on that merge checkout, as a pull_request
// workflow does, so the PR gets the real plan comment with its hidden
// reviewed-plan marker; it returns the test merge commit.
func (e *hookEnv) reviewPR(token string, n int, configMaps ...string) string {
	t := e.t
	t.Helper()
	branch := fmt.Sprintf("pr-%d", n)
	base := git(t, e.repo, "rev-parse", "main")
	git(t, e.repo, "checkout", "-qb", branch, "main")
	head := e.commit(configMaps...)
	git(t, e.repo, "checkout", "-q", "--detach", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge "+head+" into main", branch)
	merge := git(t, e.repo, "rev-parse", "HEAD")
	git(t, e.repo, "update-ref", fmt.Sprintf("refs/pull/%d/merge", n), merge)
	git(t, e.repo, "checkout", "-q", "main")

	event := pullRequestEvent(t, "opened.payload.json", base, head)
	data, _ := os.ReadFile(event)
	var ev map[string]any
	json.Unmarshal(data, &ev)
	ev["number"] = n
	ev["pull_request"].(map[string]any)["number"] = n
	data, _ = json.Marshal(ev)
	os.WriteFile(event, data, 0o644)

	ws := checkoutRef(t, e.repo, fmt.Sprintf("refs/pull/%d/merge", n))
	r := newRunner(t, ws, event, e.gh.URL(), token)
	if err := r.run(t); err != nil {
		t.Fatalf("the Action on PR %d: %v", n, err)
	}
	return merge
}

// mergePR moves main to commit and delivers PR n's merge.
func (e *hookEnv) mergePR(n int, commit string) {
	e.t.Helper()
	git(e.t, e.repo, "update-ref", "refs/heads/main", commit)
	git(e.t, e.repo, "reset", "-q", "--hard", "main")
	if code := e.send("pull_request", mergedPRPayload(e.t, n, commit), "", true); code != http.StatusAccepted {
		e.t.Fatalf("merge of PR %d: HTTP %d", n, code)
	}
}

// deployComment waits for the deploy comment on PR n to hold want.
func (e *hookEnv) deployComment(n int, want string) string {
	e.t.Helper()
	var body string
	testkit.Eventually(e.t, fmt.Sprintf("the deploy comment on PR %d saying %q", n, want), time.Minute, func() bool {
		for _, c := range e.gh.Comments("Codertocat", "Hello-World", n) {
			if c.User.Login == "kplan[bot]" && strings.Contains(c.Body, want) {
				body = c.Body
				return true
			}
		}
		return false
	})
	return body
}

// approve records alice's (a writer's) approval of PR n at commit.
func (e *hookEnv) approve(n int, by, commit string) githubapi.Review {
	return e.gh.SubmitReview("Codertocat", "Hello-World", n, by, "APPROVED", commit)
}

// The Action plans each PR and the webhook deploys its merge, checked
// against GitHub's review record under requireReviewedPlan: a merge of
// the approved head is "applied exactly as approved"; a push after the
// approval, a dismissed approval, an approval by a user who may not
// write, and a PR whose only review is a comment are refused, the
// cluster untouched, whatever the plan comment says; a PR that does not
// change the target deploys as "not changed"; a PR with no review at all
// is compared with the plan comment, and a plan comment by another user
// counts for nothing; a push to main no one approved is not applied
// under a later approval.
func TestWebhookAppliesWhatWasApproved(t *testing.T) {
	t.Parallel()
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            requireReviewedPlan: true`)
	e.gh.AddToken("ghs_action", githubapi.Identity{Login: "github-actions[bot]"})
	e.gh.SetPermission("Codertocat", "Hello-World", "alice", "write")
	e.gh.SetPermission("Codertocat", "Hello-World", "mallory", "read")
	e.commit("a")
	e.start()
	headOf := func(merge string) string { return git(t, e.repo, "rev-parse", merge+"^2") }
	refused := func(n int, merged, says string) string {
		t.Helper()
		st := e.status(merged, "kplan/prod", "failure")
		if !strings.Contains(st.Description, "refusing to apply (requireReviewedPlan)") {
			t.Errorf("status of PR %d's refused merge: %+v", n, st)
		}
		return e.deployComment(n, says)
	}
	cms := func(what string, want ...string) { t.Helper(); eq(t, what, e.configMaps(), want) }

	// PR 2 is planned, approved at its head and merged: applied, at the
	// cost of one reviews call and one permission call.
	merge2 := e.reviewPR("ghs_action", 2, "a", "b")
	e.approve(2, "alice", headOf(merge2))
	e.gh.ResetRequests()
	e.mergePR(2, merge2)
	e.waitDeployed(merge2)
	e.deployComment(2, "applied exactly as approved in #2 at "+headOf(merge2)[:7]+" by @alice")
	cms("after PR 2", "a", "b")
	calls := map[string]int{}
	for _, r := range e.gh.Requests() {
		switch {
		case strings.HasSuffix(r.Path, "/pulls/2/reviews"):
			calls["reviews"]++
		case strings.Contains(r.Path, "/collaborators/"):
			calls["permission"]++
		}
	}
	if calls["reviews"] != 1 || calls["permission"] != 1 {
		t.Errorf("GitHub calls for the approval check: %v, want one reviews and one permission call", calls)
	}

	// PR 3 changes only a README: not changed by #3, deployed, though no
	// one reviewed it.
	git(t, e.repo, "checkout", "-qb", "pr-3", "main")
	gittest.Write(t, e.repo, map[string]string{"README.md": "docs\n"})
	git(t, e.repo, "add", "-A")
	git(t, e.repo, "commit", "-qm", "docs")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 3", "pr-3")
	merge3 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(3, merge3)
	e.waitDeployed(merge3)
	e.deployComment(3, "not changed by #3")

	// PR 4 is approved, then its author pushes an object no one
	// approved: refused, saying how the merge differs from what was
	// approved.
	merge4 := e.reviewPR("ghs_action", 4, "a", "b", "c")
	approved4 := headOf(merge4)
	e.approve(4, "alice", approved4)
	git(t, e.repo, "checkout", "-q", "pr-4")
	pushed := e.commit("a", "b", "c", "evil")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 4", pushed)
	merged4 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(4, merged4)
	body := refused(4, merged4, "differs from what was approved in #4 at "+approved4[:7])
	for _, want := range []string{"ConfigMap evil (hook): not in what was reviewed", "kplan/apply-unreviewed"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refusal's comment lacks %q:\n%s", want, body)
		}
	}
	cms("after PR 4's refusal", "a", "b")

	// PR 5 was approved, and the approval dismissed: refused.
	merge5 := e.reviewPR("ghs_action", 5, "a", "b", "d")
	rv := e.approve(5, "alice", headOf(merge5))
	e.gh.DismissReview("Codertocat", "Hello-World", 5, rv.ID)
	e.mergePR(5, merge5)
	refused(5, merge5, "not approved: #5 has no standing approval by a user with write access")

	// PR 6 is approved by a user who may only read: refused.
	merge6 := e.reviewPR("ghs_action", 6, "a", "b", "e")
	e.approve(6, "mallory", headOf(merge6))
	e.mergePR(6, merge6)
	refused(6, merge6, "not approved: #6 has no standing approval")

	// PR 7's only review is a comment; its plan comment, by the Action,
	// is exact: a repository that reviews is not fooled by a comment.
	merge7 := e.reviewPR("ghs_action", 7, "a", "b", "f")
	e.gh.SubmitReview("Codertocat", "Hello-World", 7, "alice", "COMMENTED", headOf(merge7))
	e.mergePR(7, merge7)
	refused(7, merge7, "not approved: #7 has no standing approval")
	cms("after the refusals", "a", "b")

	// PR 8 has no review at all (a repository that does not review): its
	// plan comment decides. One posted by another user counts for nothing.
	e.gh.AddToken("ghs_mallory", githubapi.Identity{Login: "mallory"})
	merge8 := e.reviewPR("ghs_mallory", 8, "a", "b", "g")
	e.mergePR(8, merge8)
	refused(8, merge8, "#8 has no review; not reviewed: #8 has no kplan plan comment")
	merge9 := e.reviewPR("ghs_action", 9, "a", "b", "h")
	e.mergePR(9, merge9)
	e.waitDeployed(merge9)
	e.deployComment(9, "#9 has no review; applied exactly as its plan comment showed")
	cms("after PR 9", "a", "b", "h")

	// PR 10 is approved; then someone pushes a change of the target to
	// main, which no one approved, and PR 10 merges after it: refused, the
	// push shown.
	merge10 := e.reviewPR("ghs_action", 10, "a", "b", "h", "i")
	e.approve(10, "alice", headOf(merge10))
	gittest.Write(t, e.repo, map[string]string{"app/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: late}\n"})
	git(t, e.repo, "commit", "-qam", "a push to main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 10", headOf(merge10))
	merged10 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(10, merged10)
	if body := refused(10, merged10, "differs from what was approved in #10"); !strings.Contains(body, `~ data.v: "a" → "late"`) {
		t.Errorf("the refusal does not show the push no one approved:\n%s", body)
	}
	if sha, _ := e.deployed(); sha != merge9 {
		t.Errorf("the cluster records %s, want PR 9's merge %s", sha, merge9)
	}
	cms("after PR 10's refusal", "a", "b", "h")

	// What each check cost, for the docs (go test -v).
	data, _ := os.ReadFile(e.log)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "compared with what was approved") {
			t.Log(l)
		}
	}
}
