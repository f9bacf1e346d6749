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

// The Action plans a PR and the webhook deploys its merge: the deploy
// comment says the merge applied exactly what the plan comment showed;
// when main changed the target after the plan, it says the merge differs;
// a plan comment posted by another user counts for nothing; and with
// requireReviewedPlan the differing merge is refused, the cluster
// untouched, until a merge whose plan matches.
func TestWebhookAppliesWhatWasReviewed(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		name := "reports"
		if require {
			name = "requireReviewedPlan"
		}
		t.Run(name, func(t *testing.T) {
			extra := ""
			if require {
				extra = "\n            requireReviewedPlan: true"
			}
			e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s`+extra)
			e.gh.AddToken("ghs_action", githubapi.Identity{Login: "github-actions[bot]"})
			e.commit("a")
			e.start()

			// PR 2 is planned and merged as planned.
			merge2 := e.reviewPR("ghs_action", 2, "a", "b")
			e.mergePR(2, merge2)
			e.waitDeployed(merge2)
			e.deployComment(2, "applied exactly as reviewed in #2")

			// PR 3 is planned; then main changes the target; the merge is
			// not what the plan showed.
			merge3 := e.reviewPR("ghs_action", 3, "a", "b", "c")
			gittest.Write(t, e.repo, map[string]string{"app/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: late}\n"})
			git(t, e.repo, "commit", "-qam", "main changes a after PR 3's plan")
			git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 3", merge3+"^2")
			merged := git(t, e.repo, "rev-parse", "HEAD")
			e.mergePR(3, merged)
			if !require {
				e.waitDeployed(merged)
				body := e.deployComment(3, "differs from the plan reviewed in #3")
				// And how: the object and field main changed, reviewed → merged.
				for _, want := range []string{"the base branch changed this target after the plan", "~ ConfigMap a (hook)", `~ data.v: "a" → "late"`} {
					if !strings.Contains(body, want) {
						t.Errorf("deploy comment lacks %q:\n%s", want, body)
					}
				}
				// PR 5's plan comment is kplan's, exact digest and all, but
				// posted by someone else: it counts for nothing.
				e.gh.AddToken("ghs_mallory", githubapi.Identity{Login: "mallory"})
				merge5 := e.reviewPR("ghs_mallory", 5, "a", "e")
				e.mergePR(5, merge5)
				e.waitDeployed(merge5)
				e.deployComment(5, "no reviewed plan (#5 has no kplan plan comment)")
				return
			}
			st := e.status(merged, "kplan/prod", "failure")
			if !strings.Contains(st.Description, "refusing to apply (requireReviewedPlan)") {
				t.Errorf("status of the refused merge: %+v", st)
			}
			if body := e.deployComment(3, "differs from the plan reviewed in #3"); !strings.Contains(body, `~ data.v: "a" → "late"`) || !strings.Contains(body, "kplan/apply-unreviewed") {
				t.Errorf("the refusal's comment does not say how the merge differs or how to go on:\n%s", body)
			}
			if sha, _ := e.deployed(); sha != merge2 {
				t.Errorf("the refused merge changed the cluster: it records %s, want %s", sha, merge2)
			}
			eq(t, "ConfigMaps after the refusal", e.configMaps(), []string{"a", "b"})

			// PR 4, planned on the new main, merges as planned: deployed.
			merge4 := e.reviewPR("ghs_action", 4, "a", "b", "c")
			e.mergePR(4, merge4)
			e.waitDeployed(merge4)
			e.deployComment(4, "applied exactly as reviewed in #4")
			eq(t, "ConfigMaps after PR 4", e.configMaps(), []string{"a", "b", "c"})
		})
	}
}
