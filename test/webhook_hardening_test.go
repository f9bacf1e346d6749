package test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/forge/github/deploys"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const zeroSHA = "0000000000000000000000000000000000000000"

// deploymentsOf lists the Deployments of sha, oldest first.
func (e *hookEnv) deploymentsOf(sha string) []githubapi.Deployment {
	var out []githubapi.Deployment
	for _, d := range e.gh.Deployments("Codertocat", "Hello-World") {
		if d.SHA == sha {
			out = append(out, d)
		}
	}
	return out
}

// lastState is the newest status of a Deployment ("" if none).
func (e *hookEnv) lastState(id int64) githubapi.DeploymentStatus {
	ds := e.gh.DeploymentStatuses(id)
	if len(ds) == 0 {
		return githubapi.DeploymentStatus{}
	}
	return ds[len(ds)-1]
}

// statusStates lists the states of the kplan/prod statuses of sha, oldest
// first.
func (e *hookEnv) statusStates(sha string) string {
	var out []string
	for _, s := range e.gh.Statuses("Codertocat", "Hello-World", sha) {
		if s.Context == "kplan/prod" {
			out = append(out, s.State)
		}
	}
	return strings.Join(out, ",")
}

// openDeployments lists the Deployments whose newest state is not final.
func (e *hookEnv) openDeployments() []string {
	var out []string
	for _, d := range e.gh.Deployments("Codertocat", "Hello-World") {
		switch st := e.lastState(d.ID).State; st {
		case "", "queued", "pending", "in_progress":
			out = append(out, fmt.Sprintf("%d (%s) %q", d.ID, d.SHA[:7], st))
		}
	}
	return out
}

// commitSlow commits the overlay app/ with ConfigMaps and a Deployment
// that never becomes available (this API server runs no controllers), so
// its deploy waits out the target's reconcileTimeout and fails, as a
// deploy of a Deployment whose pods do not start would.
func (e *hookEnv) commitSlow(configMaps ...string) string {
	e.t.Helper()
	e.commit(configMaps...)
	app := filepath.Join(e.repo, "app")
	os.WriteFile(filepath.Join(app, "slow.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: slow}
spec:
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec: {containers: [{name: app, image: registry.example/slow:1}]}
`), 0o644)
	k, _ := os.ReadFile(filepath.Join(app, "kustomization.yaml"))
	os.WriteFile(filepath.Join(app, "kustomization.yaml"), bytes.Replace(k, []byte("resources: ["), []byte("resources: [slow.yaml, "), 1), 0o644)
	git(e.t, e.repo, "add", "-A")
	git(e.t, e.repo, "commit", "-q", "--amend", "--no-edit")
	return git(e.t, e.repo, "rev-parse", "HEAD")
}

// A late delivery of a merge that a force-push removed deploys the
// branch's tip: B's objects are pruned and B is never applied again.
func TestWebhookForcePushDeploysTheTip(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, "1h")
	shaA := e.commit("a")
	e.start()
	e.send("push", pushPayload(t, hookRepo, zeroSHA, shaA), "", true)
	e.waitDeployed(shaA)
	shaB := e.commit("a", "b")
	if code := e.send("pull_request", mergedPRPayload(t, 2, shaB), "merge-b", true); code != http.StatusAccepted {
		t.Fatalf("merge B: HTTP %d", code)
	}
	e.waitDeployed(shaB)
	eq(t, "ConfigMaps after merge B", e.configMaps(), []string{"a", "b"})

	// The branch is force-pushed back to A and C lands on it; GitHub's
	// delivery of C is lost, and merge B's is delivered again late.
	git(t, e.repo, "reset", "-q", "--hard", shaA)
	shaC := e.commit("a", "c")
	if code := e.send("pull_request", mergedPRPayload(t, 2, shaB), "merge-b-redelivered", true); code != http.StatusAccepted {
		t.Fatalf("late delivery of B: HTTP %d", code)
	}
	e.waitDeployed(shaC)
	eq(t, "ConfigMaps after the late delivery of B", e.configMaps(), []string{"a", "c"})
	eq(t, "ResourceGroup after the late delivery of B", e.inventory(), []string{"ConfigMap/a", "ConfigMap/c", "Namespace/hook"})
	e.status(shaC, "kplan/prod", "success")
	if n := len(e.deploymentsOf(shaB)); n != 1 {
		t.Errorf("B was deployed %d times, want once (its merge)", n)
	}
	if got := e.statusStates(shaB); got != "pending,success" {
		t.Errorf("statuses of B: %s (the late delivery must report nothing on B)", got)
	}
}

// A webhook SIGKILLed mid-deploy and restarted finishes what the killed
// run left open: its Deployment becomes "error" (interrupted) and the
// commit's pending status gets a final state, either the next deploy's
// own (same commit) or "error" (the branch moved on while it was down).
func TestWebhookKilledMidDeployFinishesItsReports(t *testing.T) {
	t.Parallel()
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 6s`)
	sha1 := e.commit("a")
	e.start()
	e.waitDeployed(sha1) // the resync at start

	killMidDeploy := func(sha string) {
		t.Helper()
		e.send("push", pushPayload(t, hookRepo, zeroSHA, sha), "", true)
		testkit.Eventually(t, "the deploy of "+sha[:7]+" to be in progress", time.Minute, func() bool {
			deps := e.deploymentsOf(sha)
			return len(deps) == 1 && e.lastState(deps[0].ID).State == "in_progress" && e.statusStates(sha) == "pending"
		})
		killGroup(e.proc) // SIGKILL: nothing is reported
		e.proc.Wait()
		if s, _ := e.deployed(); s == sha {
			t.Fatalf("the deploy of %s finished before the kill", sha[:7])
		}
	}

	// Killed at sha2, restarted at the same tip: the interrupted
	// Deployment is closed, and a new deploy of sha2 gives its status the
	// final word (failure: the Deployment never becomes ready).
	sha2 := e.commitSlow("slow2")
	killMidDeploy(sha2)
	e.start()
	e.status(sha2, "kplan/prod", "failure")
	deps := e.deploymentsOf(sha2)
	if len(deps) != 2 {
		t.Fatalf("%d deployments of %s, want the interrupted one and the new one", len(deps), sha2[:7])
	}
	if st := e.lastState(deps[0].ID); st.State != "error" || st.Description != deploys.Interrupted {
		t.Errorf("the interrupted deployment ends %+v", st)
	}
	// The commit status and the Deployment's status are two requests:
	// the second may land after the first is seen.
	testkit.Eventually(t, "the new deployment ends in failure", time.Minute, func() bool { return e.lastState(deps[1].ID).State == "failure" })
	if got := e.statusStates(sha2); got != "pending,error,pending,failure" {
		t.Errorf("statuses of %s: %s", sha2[:7], got)
	}

	// Killed at sha3; the branch moves to sha4 while the webhook is down.
	sha3 := e.commitSlow("slow3")
	killMidDeploy(sha3)
	sha4 := e.commit("d")
	e.start()
	e.waitDeployed(sha4)
	e.status(sha4, "kplan/prod", "success")
	st := e.status(sha3, "kplan/prod", "error")
	if st.Description != deploys.Interrupted {
		t.Errorf("status of the interrupted commit: %+v", st)
	}
	testkit.Eventually(t, "no Deployment left open", time.Minute, func() bool { return len(e.openDeployments()) == 0 })
	if got := e.statusStates(sha3); got != "pending,error" {
		t.Errorf("statuses of %s: %s", sha3[:7], got)
	}
	eq(t, "ConfigMaps at sha4", e.configMaps(), []string{"d"})
}

// hostPort finds what would tell a reader of GitHub where the cluster is.
var hostPort = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b|localhost|\[::1?\]|:\d{2,5}\b`)

// A deploy failing because the API server is unreachable reports a class
// of failure everywhere GitHub shows it — no address — while the webhook's
// log has the whole error.
func TestWebhookUnreachableClusterShowsNoAddress(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, "1h")
	sha1 := e.commit("a")
	logs := e.startWithEnv("KPLAN_WEBHOOK_SECRET="+hookSecret, "KPLAN_GITHUB_TOKEN="+hookToken)
	e.waitDeployed(sha1)
	if err := e.cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	sha2 := e.commit("b")
	e.send("pull_request", mergedPRPayload(t, 5, sha2), "", true)
	st := e.status(sha2, "kplan/prod", "failure")
	testkit.Eventually(t, "the comment on PR 5", time.Minute, func() bool { return len(e.gh.Comments("Codertocat", "Hello-World", 5)) == 1 })
	shown := []string{st.Description}
	for _, d := range e.deploymentsOf(sha2) {
		for _, s := range e.gh.DeploymentStatuses(d.ID) {
			shown = append(shown, s.Description)
		}
	}
	shown = append(shown, e.gh.Comments("Codertocat", "Hello-World", 5)[0].Body)
	for _, s := range shown {
		if m := hostPort.FindString(s); m != "" {
			t.Errorf("GitHub shows %q in:\n%s", m, s)
		}
	}
	if !strings.Contains(st.Description, "cannot reach the cluster's API server; details in the webhook's logs") {
		t.Errorf("status: %q", st.Description)
	}
	if len(shown) < 3 {
		t.Errorf("no Deployment status for the failed deploy: %q", shown)
	}
	host := strings.TrimPrefix(strings.TrimPrefix(e.cluster.Config.Host, "https://"), "http://")
	if data, _ := os.ReadFile(logs); !strings.Contains(string(data), host) {
		t.Errorf("the webhook's log does not name the API server %s", host)
	}
}

// GitHub's secondary rate limit (403, then 429, with Retry-After) on the
// first reports: every report still arrives with the right final state.
func TestWebhookReportsThroughSecondaryRateLimits(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, "1h")
	sha1 := e.commit("a")
	e.gh.SecondaryRateLimitNext(4, http.StatusForbidden, time.Second)
	e.start() // the resync at start deploys sha1
	e.waitDeployed(sha1)
	e.status(sha1, "kplan/prod", "success")

	e.gh.SecondaryRateLimitNext(3, http.StatusTooManyRequests, time.Second)
	sha2 := e.commit("a", "b")
	e.send("pull_request", mergedPRPayload(t, 4, sha2), "", true)
	e.waitDeployed(sha2)
	e.status(sha2, "kplan/prod", "success")
	testkit.Eventually(t, "the comment on PR 4", time.Minute, func() bool {
		cs := e.gh.Comments("Codertocat", "Hello-World", 4)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "1 of 1 targets succeeded")
	})
	for _, sha := range []string{sha1, sha2} {
		if got := e.statusStates(sha); got != "pending,success" {
			t.Errorf("statuses of %s: %s", sha[:7], got)
		}
		deps := e.deploymentsOf(sha)
		if len(deps) != 1 || e.lastState(deps[0].ID).State != "success" {
			t.Errorf("deployments of %s: %+v", sha[:7], deps)
		}
	}
	if n := e.gh.RateLimited(); n != 7 {
		t.Errorf("%d requests were refused, want 7", n)
	}
}
