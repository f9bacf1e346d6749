package deploys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	"github.com/kplan-dev/kplan/test/githubapi"
)

func newServer(t *testing.T) *githubapi.Server {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddToken("tok", githubapi.Identity{Login: "kplan[bot]"})
	return gh
}

func newReporter(gh *githubapi.Server) *Reporter {
	r := NewReporter(gh.Client("tok"), slog.New(slog.DiscardHandler))
	r.Backoff = time.Millisecond
	return r
}

// states lists the states of a commit's statuses of one context, oldest
// first.
func states(gh *githubapi.Server, sha, context string) string {
	var out []string
	for _, s := range gh.Statuses("octo", "cfg", sha) {
		if s.Context == context {
			out = append(out, s.State)
		}
	}
	return strings.Join(out, ",")
}

func deploymentStates(gh *githubapi.Server, id int64) string {
	var out []string
	for _, s := range gh.DeploymentStatuses(id) {
		out = append(out, s.State)
	}
	return strings.Join(out, ",")
}

var prod = deployer.Target{Target: config.Target{Name: "prod", Environment: "production", Overlay: "overlays/prod"}, Repo: "octo/cfg"}

func success() deploy.Result {
	return deploy.Result{Objects: []deploy.ObjectResult{{Key: "~G_v1_ConfigMap|a|new", Action: deploy.Created}}}
}

// GitHub's secondary rate limit (403 or 429 with Retry-After) is waited
// out: every report arrives, after the time GitHub asked for.
func TestSecondaryRateLimitIsWaitedOut(t *testing.T) {
	for _, status := range []int{http.StatusForbidden, http.StatusTooManyRequests} {
		gh := newServer(t)
		r := newReporter(gh)
		ctx := context.Background()
		gh.SecondaryRateLimitNext(2, status, time.Second)
		start := time.Now()
		r.Started(ctx, prod, sha, 7)
		res := success()
		r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, PR: 7, Result: &res})
		if got := states(gh, sha, "kplan/prod"); got != "pending,success" {
			t.Errorf("%d: statuses %s", status, got)
		}
		deps := gh.Deployments("octo", "cfg")
		if len(deps) != 1 || deploymentStates(gh, deps[0].ID) != "in_progress,success" {
			t.Errorf("%d: deployments %+v", status, deps)
		}
		if cs := gh.Comments("octo", "cfg", 7); len(cs) != 1 {
			t.Errorf("%d: %d comments", status, len(cs))
		}
		if gh.RateLimited() != 2 || time.Since(start) < time.Second {
			t.Errorf("%d: %d requests limited, reports took %s (Retry-After was 1s)", status, gh.RateLimited(), time.Since(start))
		}
	}
}

// A rate limit longer than MaxWait does not hold the deploy up: the
// reports are kept, a newer report of the same thing replaces an older
// one, and Flush delivers the final state once GitHub answers.
func TestReportsHeldUntilGitHubAnswers(t *testing.T) {
	gh := newServer(t)
	r := newReporter(gh)
	r.MaxWait = 10 * time.Millisecond
	ctx := context.Background()
	gh.SecondaryRateLimitNext(1, http.StatusForbidden, time.Second)
	r.Started(ctx, prod, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Err: errors.New("apply: some objects failed")})
	if n := len(gh.Statuses("octo", "cfg", sha)) + len(gh.Deployments("octo", "cfg")); n != 0 || r.Held() != 3 {
		t.Fatalf("during the rate limit: %d reports reached GitHub, %d held (want 0 and 3: deployment, status, comment)", n, r.Held())
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.Held() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		r.Flush(ctx)
	}
	// The pending status was replaced by the failure while held.
	if got := states(gh, sha, "kplan/prod"); got != "failure" {
		t.Errorf("statuses after the limit: %s", got)
	}
	deps := gh.Deployments("octo", "cfg")
	if len(deps) != 1 || deploymentStates(gh, deps[0].ID) != "failure" {
		t.Errorf("deployments after the limit: %+v", deps)
	}
	if r.Held() != 0 || len(r.deployments) != 0 {
		t.Errorf("left: %d held, %d deployments tracked", r.Held(), len(r.deployments))
	}
}

// A report GitHub refuses for good (422) is dropped, not retried forever;
// the reports behind it still go.
func TestRefusedReportIsDropped(t *testing.T) {
	gh := newServer(t)
	r := newReporter(gh)
	ctx := context.Background()
	r.Enqueue(r.statusOp(prod, sha, "exploded", "not a state"))
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Err: errors.New("render failed")})
	if got := states(gh, sha, "kplan/prod"); got != "failure" || r.Held() != 0 {
		t.Errorf("statuses %s, %d held", got, r.Held())
	}
}

// A run killed mid-deploy leaves a Deployment in progress and a pending
// status. The next run finishes them (error, "interrupted"), leaves other
// targets' and finished Deployments alone, and its own deploy of the same
// commit supersedes the status.
func TestInterruptedDeploysAreFinished(t *testing.T) {
	gh := newServer(t)
	ctx := context.Background()
	stage := deployer.Target{Target: config.Target{Name: "stage", Environment: "production", Overlay: "overlays/stage"}, Repo: "octo/cfg"}
	const old = "1111111111111111111111111111111111111111"
	killed := newReporter(gh)
	res := success()
	killed.Started(ctx, prod, old, 0)
	killed.Finished(ctx, deployer.Outcome{Target: prod, SHA: old, Result: &res})
	killed.Started(ctx, prod, sha, 0)  // then the webhook dies
	killed.Started(ctx, stage, sha, 0) // another target, still deploying elsewhere

	r := newReporter(gh)
	found, err := r.Interrupted(ctx, prod)
	if err != nil || !found {
		t.Fatalf("Interrupted: %v, %v", found, err)
	}
	deps := gh.Deployments("octo", "cfg")
	if len(deps) != 3 {
		t.Fatalf("%d deployments", len(deps))
	}
	for i, want := range []string{"in_progress,success", "in_progress,error", "in_progress"} {
		if got := deploymentStates(gh, deps[i].ID); got != want {
			t.Errorf("deployment %d (%s of %s): %s, want %s", i, deps[i].SHA[:7], deps[i].Description, got, want)
		}
	}
	ds := gh.DeploymentStatuses(deps[1].ID)
	if ds[len(ds)-1].Description != Interrupted {
		t.Errorf("interrupted deployment says %q", ds[len(ds)-1].Description)
	}
	if got := states(gh, sha, "kplan/prod"); got != "pending,error" {
		t.Errorf("status of the interrupted commit: %s", got)
	}
	if got := states(gh, old, "kplan/prod"); got != "pending,success" {
		t.Errorf("status of the finished commit: %s", got)
	}
	if found, err := r.Interrupted(ctx, prod); found || err != nil {
		t.Errorf("second Interrupted: %v, %v", found, err)
	}
	// The new deploy of the same commit supersedes the status.
	r.Started(ctx, prod, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Result: &res})
	if got := states(gh, sha, "kplan/prod"); got != "pending,error,pending,success" {
		t.Errorf("status after the new deploy: %s", got)
	}
	// A deploy this reporter is still reporting is not interrupted.
	r.Started(ctx, prod, old, 0)
	if found, _ := r.Interrupted(ctx, prod); found {
		t.Error("a deploy in progress in this process was taken for an interrupted one")
	}
}

// Nothing GitHub shows holds the cluster's address: not the status, not
// the Deployment, not the comment (object errors included).
func TestNoAddressesOnGitHub(t *testing.T) {
	gh := newServer(t)
	r := newReporter(gh)
	ctx := context.Background()
	const refused = `Get "https://10.96.0.1:443/api?timeout=32s": dial tcp 10.96.0.1:443: connect: connection refused`
	r.Started(ctx, prod, sha, 9)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, PR: 9, Err: errors.New(refused), Result: &deploy.Result{Objects: []deploy.ObjectResult{
		{Key: "~G_v1_ConfigMap|a|x", Action: deploy.Failed, Error: `Patch "https://10.96.0.1:443/api/v1/namespaces/a/configmaps/x": EOF`}}}})
	var shown []string
	for _, s := range gh.Statuses("octo", "cfg", sha) {
		shown = append(shown, s.Description)
	}
	for _, d := range gh.Deployments("octo", "cfg") {
		for _, s := range gh.DeploymentStatuses(d.ID) {
			shown = append(shown, s.Description)
		}
	}
	for _, c := range gh.Comments("octo", "cfg", 9) {
		shown = append(shown, c.Body)
	}
	all := strings.Join(shown, "\n")
	if strings.Contains(all, "10.96.0.1") || deployreport.HasAddress(all) || !strings.Contains(all, "cannot reach the cluster's API server; details in the webhook's logs") || len(shown) != 5 {
		t.Errorf("GitHub shows:\n%s", all)
	}
}

func TestClassify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	resp := func(code int, header ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: code, Header: h, Request: &http.Request{}}
	}
	d := func(v time.Duration) *time.Duration { return &v }
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
		wait  time.Duration
	}{
		{"secondary limit with Retry-After", &github.AbuseRateLimitError{Response: resp(403), RetryAfter: d(30 * time.Second)}, true, 30 * time.Second},
		{"secondary limit without", &github.AbuseRateLimitError{Response: resp(403)}, true, time.Minute},
		{"primary limit", &github.RateLimitError{Response: resp(403), Rate: github.Rate{Reset: github.Timestamp{Time: now.Add(10 * time.Second)}}}, true, 11 * time.Second},
		{"429 with Retry-After", &github.ErrorResponse{Response: resp(429, "Retry-After", "7")}, true, 7 * time.Second},
		{"429 without", &github.ErrorResponse{Response: resp(429)}, true, time.Minute},
		{"wrapped", fmt.Errorf("create comment: %w", &github.ErrorResponse{Response: resp(429, "Retry-After", "3")}), true, 3 * time.Second},
		{"502", &github.ErrorResponse{Response: resp(502)}, true, 0},
		{"no answer", errors.New("dial tcp: connection refused"), true, 0},
		{"401: a token revoked before its time", &github.ErrorResponse{Response: resp(401)}, true, 0},
		{"422", &github.ErrorResponse{Response: resp(422)}, false, 0},
		{"403 without permission", &github.ErrorResponse{Response: resp(403)}, false, 0},
		{"404", &github.ErrorResponse{Response: resp(404)}, false, 0},
	} {
		retry, wait := classify(tc.err, now)
		if retry != tc.retry || wait != tc.wait {
			t.Errorf("%s: retry %v after %s, want %v after %s", tc.name, retry, wait, tc.retry, tc.wait)
		}
	}
}

// Targets report at once through a rate limit: whoever is sending sends
// the others' reports too, and when every call has returned, all arrived.
func TestConcurrentReportsThroughARateLimit(t *testing.T) {
	gh := newServer(t)
	r := newReporter(gh)
	ctx := context.Background()
	gh.SecondaryRateLimitNext(3, http.StatusForbidden, time.Second)
	done := make(chan struct{})
	const n = 6
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			tg := deployer.Target{Target: config.Target{Name: fmt.Sprintf("t%d", i), Overlay: fmt.Sprintf("o%d", i)}, Repo: "octo/cfg"}
			res := success()
			r.Started(ctx, tg, sha, 0)
			r.Finished(ctx, deployer.Outcome{Target: tg, SHA: sha, Result: &res})
		}()
	}
	for range n {
		<-done
	}
	held := r.Held()
	if held != 0 {
		t.Errorf("%d reports still held after every call returned", held)
	}
	for i := range n {
		// A pending status still held when the success came was replaced.
		if got := states(gh, sha, fmt.Sprintf("kplan/t%d", i)); got != "pending,success" && got != "success" {
			t.Errorf("t%d: %s", i, got)
		}
	}
}
