package test

import (
	"encoding/json"
	"fmt"
	"maps"
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

// mergePR moves main to commit, PR n's merge by alice (a writer), which
// GitHub records (its base the merge's first parent, its head the
// second), and delivers it.
func (e *hookEnv) mergePR(n int, commit string) {
	e.t.Helper()
	git(e.t, e.repo, "update-ref", "refs/heads/main", commit)
	git(e.t, e.repo, "reset", "-q", "--hard", "main")
	e.deliverMerge(n, commit)
}

// deliverMerge records PR n as merged by alice into commit, which main
// already holds, and delivers the merge.
func (e *hookEnv) deliverMerge(n int, commit string) {
	e.t.Helper()
	head := commit
	if parents := strings.Fields(git(e.t, e.repo, "rev-list", "--parents", "-n1", commit)); len(parents) > 2 {
		head = parents[2]
	}
	e.gh.MergePull("Codertocat", "Hello-World", n, "alice", git(e.t, e.repo, "rev-parse", commit+"^1"), head, 1, commit)
	if code := e.send("pull_request", mergedPRPayload(e.t, n, commit), "", true); code != http.StatusAccepted {
		e.t.Fatalf("merge of PR %d: HTTP %d", n, code)
	}
}

// quickPR is pull request n with the ConfigMaps, branched from main and
// merged into it with a merge commit, without a plan: its merge.
func (e *hookEnv) quickPR(n int, configMaps ...string) (merge, head string) {
	e.t.Helper()
	branch := fmt.Sprintf("pr-%d", n)
	git(e.t, e.repo, "checkout", "-qb", branch, "main")
	head = e.commit(configMaps...)
	git(e.t, e.repo, "checkout", "-q", "main")
	git(e.t, e.repo, "merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge PR %d", n), branch)
	return git(e.t, e.repo, "rev-parse", "HEAD"), head
}

// restore force-pushes main back to sha, the commit the cluster runs:
// what a team does after a refusal, and no step of its own.
func (e *hookEnv) restore(sha string) {
	e.t.Helper()
	git(e.t, e.repo, "update-ref", "refs/heads/main", sha)
	git(e.t, e.repo, "reset", "-q", "--hard", "main")
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
// with the approval rule (internal/approval) against GitHub's review
// record under requireReviewedPlan: a merge of the approved head is
// "applied exactly as approved"; a push after the approval, a dismissed
// approval, an approval by a user who may not write, and a PR whose only
// review is a comment are refused, the cluster untouched, whatever the
// plan comment says; a PR that does not change the target deploys as
// "not changed"; a PR with no review at all is compared with the plan
// comment, and a plan comment by another user counts for nothing. Each
// refusal is followed by main force-pushed back to what the cluster runs,
// so the next PR starts clean.
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
		body := e.deployComment(n, says)
		if strings.Contains(body, "empty commit") {
			t.Errorf("the refusal advises an empty commit, which no approval covers:\n%s", body)
		}
		return body
	}
	cms := func(what string, want ...string) { t.Helper(); eq(t, what, e.configMaps(), want) }

	// PR 2 is planned, approved at its head and merged: applied, at the
	// cost of one call for the merge's pull requests, one for the pull
	// request, one for its reviews and one permission call.
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
		case strings.HasSuffix(r.Path, "/commits/"+merge2+"/pulls"):
			calls["pulls of the commit"]++
		case strings.HasSuffix(r.Path, "/pulls/2"):
			calls["pull"]++
		case strings.HasSuffix(r.Path, "/pulls/2/reviews"):
			calls["reviews"]++
		case strings.Contains(r.Path, "/collaborators/"):
			calls["permission"]++
		}
	}
	if want := map[string]int{"pulls of the commit": 1, "pull": 1, "reviews": 1, "permission": 1}; !maps.Equal(calls, want) {
		t.Errorf("GitHub calls for the approval check: %v, want %v", calls, want)
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
	for _, want := range []string{"ConfigMap evil (hook): not in what was reviewed", "kplan/apply-unreviewed", "a push after the approval"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refusal's comment lacks %q:\n%s", want, body)
		}
	}
	cms("after PR 4's refusal", "a", "b")
	e.restore(merge3)

	// PR 5 was approved, and the approval dismissed: refused.
	merge5 := e.reviewPR("ghs_action", 5, "a", "b", "d")
	rv := e.approve(5, "alice", headOf(merge5))
	e.gh.DismissReview("Codertocat", "Hello-World", 5, rv.ID)
	e.mergePR(5, merge5)
	refused(5, merge5, "not approved: #5 has no standing approval by a user with write access")
	e.restore(merge3)

	// PR 6 is approved by a user who may only read: refused.
	merge6 := e.reviewPR("ghs_action", 6, "a", "b", "e")
	e.approve(6, "mallory", headOf(merge6))
	e.mergePR(6, merge6)
	refused(6, merge6, "not approved: #6 has no standing approval")
	e.restore(merge3)

	// PR 7's only review is a comment; its plan comment, by the Action,
	// is exact: a repository that reviews is not fooled by a comment.
	merge7 := e.reviewPR("ghs_action", 7, "a", "b", "f")
	e.gh.SubmitReview("Codertocat", "Hello-World", 7, "alice", "COMMENTED", headOf(merge7))
	e.mergePR(7, merge7)
	refused(7, merge7, "not approved: #7 has no standing approval")
	cms("after the refusals", "a", "b")
	e.restore(merge3)

	// PR 8 has no review at all (a repository that does not review): its
	// plan comment decides. One posted by another user counts for nothing.
	e.gh.AddToken("ghs_mallory", githubapi.Identity{Login: "mallory"})
	merge8 := e.reviewPR("ghs_mallory", 8, "a", "b", "g")
	e.mergePR(8, merge8)
	refused(8, merge8, "#8 has no review; not reviewed: #8 has no kplan plan comment")
	e.restore(merge3)
	merge9 := e.reviewPR("ghs_action", 9, "a", "b", "h")
	e.mergePR(9, merge9)
	e.waitDeployed(merge9)
	e.deployComment(9, "#9 has no review; applied exactly as its plan comment showed")
	cms("after PR 9", "a", "b", "h")

	// PR 10 is approved; then someone pushes a change of the target to
	// main, which no one approved, and PR 10 merges after it: refused,
	// naming the push and what it changed.
	merge10 := e.reviewPR("ghs_action", 10, "a", "b", "h", "i")
	e.approve(10, "alice", headOf(merge10))
	gittest.Write(t, e.repo, map[string]string{"app/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: late}\n"})
	git(t, e.repo, "commit", "-qam", "a push to main")
	push := git(t, e.repo, "rev-parse", "HEAD")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 10", headOf(merge10))
	merged10 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(10, merged10)
	if body := refused(10, merged10, "not approved: the push "+push[:7]+" came from no pull request"); !strings.Contains(body, `~ data.v: "a" → "late"`) {
		t.Errorf("the refusal does not show the push no one approved:\n%s", body)
	}
	if sha, _ := e.deployed(); sha != merge9 {
		t.Errorf("the cluster records %s, want PR 9's merge %s", sha, merge9)
	}

	// PR 11, a README typo branched after the push and approved by a
	// writer, does not launder it: the push is still refused.
	git(t, e.repo, "checkout", "-qb", "pr-11", "main")
	gittest.Write(t, e.repo, map[string]string{"README.md": "typo fixed\n"})
	git(t, e.repo, "commit", "-qam", "typo")
	head11 := git(t, e.repo, "rev-parse", "HEAD")
	e.approve(11, "alice", head11)
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 11", "pr-11")
	merged11 := git(t, e.repo, "rev-parse", "HEAD")
	e.mergePR(11, merged11)
	refused(11, merged11, "not approved: the push "+push[:7])
	cms("after PR 11", "a", "b", "h")
	e.restore(merge9)

	// PRs 12 and 13, each approved, merge back to back (a merge queue):
	// both are on main when the deliveries arrive, and the tip deploys
	// once, with a verdict for each.
	merge12, head12 := e.quickPR(12, "a", "b", "h", "j")
	merge13, head13 := e.quickPR(13, "a", "b", "h", "j", "k")
	e.approve(12, "alice", head12)
	e.approve(13, "alice", head13)
	e.deliverMerge(12, merge12)
	e.deliverMerge(13, merge13)
	e.waitDeployed(merge13)
	if body := e.deployComment(13, "applied exactly as approved in #13 at "+head13[:7]+" by @alice"); !strings.Contains(body, "#12: approved") {
		t.Errorf("the deploy comment does not list #12's verdict:\n%s", body)
	}
	cms("after the queue", "a", "b", "h", "j", "k")

	// PR 14 is approved by an app's bot, whose permission GitHub answers
	// 404 for, and by alice: hers still counts.
	merge14, head14 := e.quickPR(14, "a", "b", "h", "j", "k", "l")
	e.gh.SubmitReview("Codertocat", "Hello-World", 14, "renovate[bot]", "APPROVED", head14)
	e.approve(14, "alice", head14)
	e.mergePR(14, merge14)
	e.waitDeployed(merge14)
	e.deployComment(14, "the permission of @renovate[bot] could not be read: counted as not a writer")

	// main is force-pushed to a history that does not descend from what
	// runs: refused, the cluster untouched.
	e.restore(merge12)
	rewritten := e.commit("a", "rewritten")
	if code := e.send("push", pushPayload(t, hookRepo, merge14, rewritten), "", true); code != http.StatusAccepted {
		t.Fatalf("the force-push: HTTP %d", code)
	}
	st := e.status(rewritten, "kplan/prod", "failure")
	if !strings.Contains(st.Description, "refusing to apply") {
		t.Errorf("the force-push's status: %+v", st)
	}
	cms("after the force-push", "a", "b", "h", "j", "k", "l")

	// What each check cost, for the docs (go test -v).
	data, _ := os.ReadFile(e.log)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "compared with what was approved") {
			t.Log(l)
		}
	}
}
