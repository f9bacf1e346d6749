package deploys

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	forgegitlab "github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

const (
	project = "platform/infra"
	sha     = "0123456789abcdef0123456789abcdef01234567"
	headSHA = "89abcdef0123456789abcdef0123456789abcdef"
	bot     = "project_15_bot"
)

var (
	prod  = deployer.Target{Target: config.Target{Name: "prod", Environment: "production", Overlay: "overlays/prod"}, Repo: project, Branch: "main"}
	stage = deployer.Target{Target: config.Target{Name: "stage", Overlay: "overlays/stage"}, Repo: project, Branch: "main"}
)

func newReporter(t *testing.T) (*gitlabapi.Server, *Reporter) {
	t.Helper()
	s := gitlabapi.New()
	t.Cleanup(s.Close)
	s.AddToken("glpat-webhook", gitlabapi.User{Username: bot})
	gl, err := forgegitlab.NewClient(s.APIURL(), "glpat-webhook")
	if err != nil {
		t.Fatal(err)
	}
	return s, NewReporter(gl, slog.New(slog.DiscardHandler))
}

func states(s *gitlabapi.Server, name string) string {
	var out []string
	for _, st := range s.Statuses(project, sha) {
		if st.Name == name {
			out = append(out, st.State)
		}
	}
	return strings.Join(out, ",")
}

// A push's deploy of two targets: each commit status goes running then
// success or failed, each environment's deployment the same, and the
// merge request the commit merged gets one note, edited, naming both.
func TestReportsAMergeDeploy(t *testing.T) {
	s, r := newReporter(t)
	s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 7, State: "merged", SHA: headSHA, MergeCommitSHA: sha, TargetBranch: "main"})
	ctx := context.Background()
	r.Started(ctx, prod, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Result: &deploy.Result{Objects: []deploy.ObjectResult{
		{Key: "~G_v1_ConfigMap|a|new", Action: deploy.Created}}}})
	r.Started(ctx, stage, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: stage, SHA: sha, Err: errors.New(`Get "https://10.0.0.1:6443/api": dial tcp 10.0.0.1:6443: connection refused`), Reason: deployer.ReasonApplyFailed})

	if got := states(s, "kplan/prod") + " " + states(s, "kplan/stage"); got != "running,success running,failed" {
		t.Errorf("statuses: %s", got)
	}
	ds := s.Deployments(project)
	if len(ds) != 2 || ds[0].Environment != "production" || ds[1].Environment != "stage" ||
		strings.Join(ds[0].History, ",") != "running,success" || strings.Join(ds[1].History, ",") != "running,failed" || ds[0].Ref != "main" {
		t.Errorf("deployments: %+v", ds)
	}
	ns := s.Notes(project, 7)
	if len(ns) != 1 || ns[0].Author != bot {
		t.Fatalf("notes: %+v, want one by %s", ns, bot)
	}
	for _, want := range []string{deployreport.Marker, "1 of 2 targets succeeded", "| `prod` | production | `0123456` | ✅ 1 created", "cannot reach the cluster's API server"} {
		if !strings.Contains(ns[0].Body, want) {
			t.Errorf("note lacks %q:\n%s", want, ns[0].Body)
		}
	}
	if strings.Contains(ns[0].Body, "10.0.0.1") {
		t.Errorf("the note shows the cluster's address:\n%s", ns[0].Body)
	}
}

// A protected environment the token's user may not deploy to answers
// 403: the deployment is not made, and the commit status and the note
// still report the deploy.
func TestProtectedEnvironmentStillReports(t *testing.T) {
	s, r := newReporter(t)
	s.Protect(project, "production", "release-manager")
	ctx := context.Background()
	r.Started(ctx, prod, sha, 7)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, PR: 7, Result: &deploy.Result{}})
	if got := states(s, "kplan/prod"); got != "running,success" {
		t.Errorf("statuses: %s", got)
	}
	if ds := s.Deployments(project); len(ds) != 0 {
		t.Errorf("deployments in a protected environment: %+v", ds)
	}
	if ns := s.Notes(project, 7); len(ns) != 1 {
		t.Errorf("notes: %+v", ns)
	}
	s.Protect(project, "production", bot)
	r.Started(ctx, prod, sha, 7)
	if ds := s.Deployments(project); len(ds) != 1 || ds[0].User != bot {
		t.Errorf("deployments once allowed: %+v", ds)
	}
}

// Approvals stand for the merge request's head, newest first, from
// users who may push (Developer or above); a merge request that
// requires approvals counts as reviewed even with none.
func TestApprovals(t *testing.T) {
	s, r := newReporter(t)
	ctx := context.Background()
	s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 7, State: "merged", SHA: headSHA, MergeCommitSHA: sha, ApprovalsRequired: 1})
	got, err := r.Approvals(ctx, prod, sha, 0)
	if err != nil || got.PR != 7 || got.Reviews != 1 || len(got.Approved) != 0 {
		t.Fatalf("before approval: %+v, %v", got, err)
	}
	s.SetMember(project, "dev", gitlabapi.Developer)
	s.SetMember(project, "lead", gitlabapi.Maintainer)
	s.SetMember(project, "watcher", gitlabapi.Reporter)
	for _, u := range []string{"dev", "watcher", "outsider", "lead"} {
		s.Approve(project, 7, u)
	}
	got, err = r.Approvals(ctx, prod, sha, 7)
	want := []deployer.Approval{{Commit: headSHA, By: "lead"}, {Commit: headSHA, By: "dev"}}
	if err != nil || got.Reviews != 4 || len(got.Approved) != 2 || got.Approved[0] != want[0] || got.Approved[1] != want[1] {
		t.Errorf("approvals: %+v, %v; want %+v", got, err, want)
	}
	// A project that keeps approvals across pushes: no approval says
	// what was approved.
	s.KeepApprovalsOnPush(project)
	if got, err := r.Approvals(ctx, prod, sha, 7); !errors.Is(err, ErrApprovalsKept) || len(got.Approved) != 0 {
		t.Errorf("approvals kept across pushes: %+v, %v; want ErrApprovalsKept", got, err)
	}
	if ok, err := r.CanWrite(ctx, prod, "watcher"); ok || err != nil {
		t.Errorf("a reporter can write: %v, %v", ok, err)
	}
	if ok, err := r.CanWrite(ctx, prod, "lead"); !ok || err != nil {
		t.Errorf("a maintainer cannot write: %v, %v", ok, err)
	}
}

// The reviewed plan is read from the plan author's note only.
func TestReviewedPlanIsTheAuthorsNote(t *testing.T) {
	s, r := newReporter(t)
	marker, err := markers.ReviewedMarker(markers.Reviewed{Digests: map[string]string{"overlays/prod": "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	s.SeedNote(project, 7, "mallory", markers.PlanMarker+"\n"+strings.ReplaceAll(marker, "abc", "evil"))
	if plan, err := r.ReviewedPlan(context.Background(), prod, 7); plan != nil || err != nil {
		t.Fatalf("a stranger's plan note was read: %+v, %v", plan, err)
	}
	s.SeedNote(project, 7, bot, markers.PlanMarker+"\n"+marker)
	plan, err := r.ReviewedPlan(context.Background(), prod, 7)
	if err != nil || plan == nil || plan.Digests["overlays/prod"] != "abc" {
		t.Errorf("plan: %+v, %v", plan, err)
	}
}

// A deploy killed mid-way leaves a running deployment and status; the
// next run cancels both, saying so, and leaves its own alone.
func TestInterruptedDeploysAreCanceled(t *testing.T) {
	s, killed := newReporter(t)
	ctx := context.Background()
	killed.Started(ctx, prod, sha, 0)
	gl := killed.GL
	r := NewReporter(gl, slog.New(slog.DiscardHandler))
	found, err := r.Interrupted(ctx, prod)
	if err != nil || !found {
		t.Fatalf("Interrupted: %v, %v", found, err)
	}
	ds := s.Deployments(project)
	if len(ds) != 1 || strings.Join(ds[0].History, ",") != "running,canceled" {
		t.Errorf("deployments: %+v", ds)
	}
	sts := s.Statuses(project, sha)
	if got := states(s, "kplan/prod"); got != "running,canceled" || sts[len(sts)-1].Description != deployreport.Interrupted {
		t.Errorf("statuses: %+v", sts)
	}
	r.Started(ctx, prod, sha, 0)
	if found, err := r.Interrupted(ctx, prod); found || err != nil {
		t.Errorf("a deploy of this process was taken for interrupted: %v, %v", found, err)
	}
}

// GitLab down (502 after client-go's own retries, turned off here):
// the reports are held, the pending status replaced by the final one
// while held, and Flush delivers them once GitLab answers.
func TestReportsHeldUntilGitLabAnswers(t *testing.T) {
	s := gitlabapi.New()
	t.Cleanup(s.Close)
	s.AddToken("glpat-webhook", gitlabapi.User{Username: bot})
	gl, err := forgegitlab.NewClient(s.APIURL(), "glpat-webhook", gitlab.WithoutRetries())
	if err != nil {
		t.Fatal(err)
	}
	r := NewReporter(gl, slog.New(slog.DiscardHandler))
	s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 7, State: "merged", SHA: headSHA, MergeCommitSHA: sha})
	ctx := context.Background()
	s.FailNext(1000, http.StatusBadGateway)
	r.Started(ctx, prod, sha, 7)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, PR: 7, Result: &deploy.Result{}})
	if n := len(s.Statuses(project, sha)) + len(s.Deployments(project)) + len(s.Notes(project, 7)); n != 0 || r.Held() != 3 {
		t.Fatalf("while GitLab fails: %d reports arrived, %d held (want 0 and 3: deployment, status, note)", n, r.Held())
	}
	s.FailNext(0, 0)
	r.Flush(ctx)
	if got := states(s, "kplan/prod"); got != "success" || r.Held() != 0 {
		t.Errorf("after the flush: statuses %q, %d held", got, r.Held())
	}
	if ds := s.Deployments(project); len(ds) != 1 || strings.Join(ds[0].History, ",") != "running,success" {
		t.Errorf("deployments: %+v", ds)
	}
	if ns := s.Notes(project, 7); len(ns) != 1 {
		t.Errorf("notes: %+v", ns)
	}
}
