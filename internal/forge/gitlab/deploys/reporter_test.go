package deploys

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	"github.com/kplan-dev/kplan/internal/forge"
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

// The record of a merged merge request: its diff refs, head, merge
// commit and merger; each approval stands for the head that merged (GitLab
// records no commit), and the project's own settings decide whose count:
// the author's only with merge_requests_author_approval, a committer's
// not with merge_requests_disable_committers_approval. A merge request
// that requires approvals and has none is under review (no plan comment
// stands in); a project that keeps approvals across pushes is refused.
func TestPulls(t *testing.T) {
	const base = "fedcba9876543210fedcba9876543210fedcba98"
	ctx := context.Background()
	approvers := func(p approval.Pull) string {
		var out []string
		for _, rv := range p.Reviews {
			out = append(out, rv.User.Login+"="+rv.State+"@"+rv.CommitID[:min(len(rv.CommitID), 7)])
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name     string
		settings gitlabapi.ApprovalSettings
		required int64
		approve  []string
		want     string
		err      error
	}{
		{name: "none required, none given", want: ""},
		{name: "required, none given", required: 1, want: "(approval rule)=COMMENTED@"},
		{name: "a developer and the author; the author's does not count", approve: []string{"dev", "author"}, want: "dev=APPROVED@89abcde"},
		{name: "the author's counts where the project lets authors approve", settings: gitlabapi.ApprovalSettings{AuthorApproval: true},
			approve: []string{"author"}, want: "author=APPROVED@89abcde"},
		{name: "a committer's does not count where the project says so", settings: gitlabapi.ApprovalSettings{NoCommitterApproval: true},
			approve: []string{"pusher", "dev"}, want: "dev=APPROVED@89abcde"},
		{name: "only approvals the project does not count", approve: []string{"author"}, want: "(approval rule)=COMMENTED@"},
		{name: "approvals kept across pushes", settings: gitlabapi.ApprovalSettings{KeepOnPush: true}, approve: []string{"dev"}, err: ErrApprovalsKept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := newReporter(t)
			s.AddUser("author")
			s.SetApprovalSettings(project, tc.settings)
			s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 7, State: "merged", SHA: headSHA, MergeCommitSHA: sha, BaseSHA: base,
				TargetBranch: "main", SourceBranch: "feature", Author: "author", MergedBy: "lead", ApprovalsRequired: tc.required,
				MergedAt: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), Committers: []string{"author", "pusher"}})
			s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 8, State: "opened", SHA: sha, TargetBranch: "main"})
			for _, u := range tc.approve {
				s.Approve(project, 7, u)
			}
			got, err := r.Pulls(ctx, prod, []string{sha})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Pulls: %+v, %v; want %v", got, err, tc.err)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("Pulls: %+v, %v; want merge request 7 only", got, err)
			}
			p := got[0]
			if p.Number != 7 || p.Merge != sha || p.Head.SHA != headSHA || p.Base.SHA != base || p.MergedBy.Login != "lead" || p.MergedAt != "2026-11-01T10:00:00Z" {
				t.Errorf("the record: %+v", p)
			}
			if a := approvers(p); a != tc.want {
				t.Errorf("reviews %q, want %q", a, tc.want)
			}
			rec := approval.Record{Pulls: got}
			if err := rec.Validate(); err != nil {
				t.Errorf("the record is not one the rule reads: %v", err)
			}
		})
	}
	// A fast-forward merge put the merge request's commits on the branch:
	// no merge commit, and their count.
	s, r := newReporter(t)
	s.SetMergeRequest(project, gitlabapi.MergeRequest{IID: 9, State: "merged", SHA: headSHA, Committers: []string{"a", "b", "c"}})
	if got, err := r.Pulls(ctx, prod, []string{headSHA}); err != nil || len(got) != 1 || got[0].Merge != "" || got[0].Commits != 3 {
		t.Errorf("a fast-forward merge: %+v, %v", got, err)
	}
	s.SetMember(project, "watcher", gitlabapi.Reporter)
	s.SetMember(project, "lead", gitlabapi.Maintainer)
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

// What the reporter writes is what a plan reads back
// (forgegitlab.Deployed): the environment's last successful deployment
// from the branch, a newer failed one passed over.
func TestPlansReadWhatTheReporterWrote(t *testing.T) {
	s, r := newReporter(t)
	ctx := context.Background()
	r.Started(ctx, prod, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Result: &deploy.Result{}})
	r.Started(ctx, prod, headSHA, 0)
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: headSHA, Err: errors.New("apply: connection refused"), Reason: deployer.ReasonApplyFailed})
	read, err := forgegitlab.NewDeployed(s.APIURL(), "glpat-webhook")
	if err != nil {
		t.Fatal(err)
	}
	got, err := read.LastDeployed(ctx, forge.DeployTarget{Repo: project, Branch: "main", Name: prod.Name, Key: prod.Key(), Environment: prod.Environment, Overlay: prod.Overlay})
	if err != nil || got != sha {
		t.Errorf("got %q, %v; want %q", got, err, sha)
	}
}
