package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

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
	waitFor(e.t, fmt.Sprintf("the deploy comment on PR %d saying %q", n, want), func() bool {
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
// counts for nothing.
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
	e.waitDeployed(git(t, e.repo, "rev-parse", "main"))
	headOf := func(merge string) string { return git(t, e.repo, "rev-parse", merge+"^2") }
	refused := func(n int, merged, says string) {
		t.Helper()
		st := e.status(merged, "kplan/prod", "failure")
		if !strings.Contains(st.Description, "refusing to apply (requireReviewedPlan)") {
			t.Errorf("status of PR %d's refused merge: %+v", n, st)
		}
		e.deployComment(n, says)
	}
	cms := func(what string, want ...string) { t.Helper(); eq(t, what, e.configMaps(), want) }

	// PR 2 is planned, approved at its head and merged: applied.
	merge2 := e.reviewPR("ghs_action", 2, "a", "b")
	e.approve(2, "alice", headOf(merge2))
	e.mergePR(2, merge2)
	e.waitDeployed(merge2)
	e.deployComment(2, "applied exactly as approved in #2 at "+headOf(merge2)[:7]+" by @alice")
	cms("after PR 2", "a", "b")

	// PR 3 is approved, then its author pushes an object no one
	// approved (and the plan comment is refreshed to show it): refused,
	// saying how the merge differs from what was approved.
	merge3 := e.reviewPR("ghs_action", 3, "a", "b", "c")
	approved3 := headOf(merge3)
	e.approve(3, "alice", approved3)
	git(t, e.repo, "checkout", "-q", "pr-3")
	evil := e.commit("a", "b", "c", "evil")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 3", evil)
	merged3 := git(t, e.repo, "rev-parse", "HEAD")
	git(t, e.repo, "reset", "-q", "--hard", "main~1")
	e.mergePR(3, merged3)
	refused(3, merged3, "differs from what was approved in #3 at "+approved3[:7])
	if body := e.deployComment(3, "ConfigMap evil (hook): not in what was reviewed"); !strings.Contains(body, "kplan/apply-unreviewed") {
		t.Errorf("the refusal does not say how to go on:\n%s", body)
	}
	cms("after PR 3's refusal", "a", "b")

	// PR 4 was approved, and the approval dismissed: refused.
	merge4 := e.reviewPR("ghs_action", 4, "a", "b", "d")
	rv := e.approve(4, "alice", headOf(merge4))
	e.gh.DismissReview("Codertocat", "Hello-World", 4, rv.ID)
	e.mergePR(4, merge4)
	refused(4, merge4, "not approved: #4 has no standing approval by a user with write access")

	// PR 5 is approved by a user who may only read: refused.
	merge5 := e.reviewPR("ghs_action", 5, "a", "b", "e")
	e.approve(5, "mallory", headOf(merge5))
	e.mergePR(5, merge5)
	refused(5, merge5, "not approved: #5 has no standing approval")

	// PR 6's only review is a comment; its plan comment, by the Action,
	// is exact: a repository that reviews is not fooled by a comment.
	merge6 := e.reviewPR("ghs_action", 6, "a", "b", "f")
	e.gh.SubmitReview("Codertocat", "Hello-World", 6, "alice", "COMMENTED", headOf(merge6))
	e.mergePR(6, merge6)
	refused(6, merge6, "not approved: #6 has no standing approval")
	cms("after the refusals", "a", "b")

	// PR 7 changes only a README: not changed by #7, deployed, though no
	// one reviewed it.
	git(t, e.repo, "checkout", "-qb", "pr-7", "main")
	gittest.Write(t, e.repo, map[string]string{"README.md": "docs\n"})
	git(t, e.repo, "add", "-A")
	git(t, e.repo, "commit", "-qm", "docs")
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 7", "pr-7")
	merge7 := git(t, e.repo, "rev-parse", "HEAD")
	git(t, e.repo, "reset", "-q", "--hard", "main~1")
	e.mergePR(7, merge7)
	e.waitDeployed(merge7)
	e.deployComment(7, "not changed by #7")

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

	// PR 10 is approved; then main changes the target before the merge:
	// what was approved is applied on the branch as it is, and the
	// reports say the plan comment showed another render.
	merge10 := e.reviewPR("ghs_action", 10, "a", "b", "h", "i")
	e.approve(10, "alice", headOf(merge10))
	gittest.Write(t, e.repo, map[string]string{"app/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: late}\n"})
	git(t, e.repo, "commit", "-qam", "main changes a after PR 10's plan")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 10", headOf(merge10))
	merged10 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(10, merged10)
	e.waitDeployed(merged10)
	e.deployComment(10, "applied exactly as approved in #10 at "+headOf(merge10)[:7]+" by @alice (the plan comment showed another render of this target: the branch changed it after the plan)")
	cms("after PR 10", "a", "b", "h", "i")
}
