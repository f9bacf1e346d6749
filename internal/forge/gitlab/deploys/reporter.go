// Package deploys is the GitLab forge's deploy reports: Reporter
// implements deployer.Reporter and deployer.Reviews with GitLab's Go
// client. It is apart from internal/forge/gitlab (notes, deliveries, CI
// variables) so that the plan-only CI entry point links no deployer.
//
// Reporter tells GitLab how deploys went: a commit status per target
// (kplan/<target>), a deployment of the target's environment, and one
// note on the merged merge request summarising every target
// (internal/deployreport's text, as on GitHub). What reviewers approved
// is the merge request's approvals (the approvals API) in place of
// GitHub's reviews.
//
// client-go retries GitLab's 429 and 5xx answers itself, after the time
// GitLab asks for; a report that still fails is logged and dropped (the
// deploy's outcome stays on the target's inventory object).
package deploys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	forgegitlab "github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/prcomment"
)

// ErrApprovalsKept refuses to read approvals as approving the merged
// head in a project that keeps them across pushes.
var ErrApprovalsKept = errors.New("approvals are kept across pushes")

// maxSummaries bounds the merge requests whose note is kept in memory.
const maxSummaries = 200

// Reporter implements deployer.Reporter and deployer.Reviews for GitLab
// projects.
type Reporter struct {
	GL     *gitlab.Client
	Logger *slog.Logger
	// PlanAuthor is the username whose plan note a merge is compared with
	// (ReviewedPlan): the user of the access token the CI job posts with.
	// "" is the token's own user: the webhook and the CI job may share
	// one project access token.
	PlanAuthor string
	// Notes writes the deploy note as the token's own (NewReporter makes
	// it; cmd/webhook shares it with the live plans).
	Notes *forgegitlab.Poster

	mu          sync.Mutex
	deployments map[string]int64                       // target key@sha -> its deployment's ID
	summaries   map[string]map[string]deployer.Outcome // project!iid -> target -> latest outcome
}

var (
	_ deployer.Reporter = (*Reporter)(nil)
	_ deployer.Reviews  = (*Reporter)(nil)
)

// NewReporter makes a Reporter.
func NewReporter(gl *gitlab.Client, logger *slog.Logger) *Reporter {
	return &Reporter{GL: gl, Logger: logger, Notes: forgegitlab.NewPoster(gl),
		deployments: map[string]int64{}, summaries: map[string]map[string]deployer.Outcome{}}
}

// Flush implements deployer.Reporter: nothing is held.
func (r *Reporter) Flush(context.Context) {}

// logged logs a report GitLab did not take.
func (r *Reporter) logged(what string, err error) {
	if err != nil {
		r.Logger.Error("GitLab report not delivered", "what", what, "err", err)
	}
}

// Started opens a running deployment of t's environment and marks the
// commit running. The deployment comes first: a run killed in between
// leaves a deployment Interrupted finds.
func (r *Reporter) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	env := deployreport.Environment(t)
	d, _, err := r.GL.Deployments.CreateProjectDeployment(t.Repo, &gitlab.CreateProjectDeploymentOptions{
		Environment: &env, Ref: &t.Branch, SHA: &sha, Tag: gitlab.Ptr(false), Status: gitlab.Ptr(gitlab.DeploymentStatusRunning),
	}, gitlab.WithContext(ctx))
	if err != nil {
		// A protected environment this token may not deploy to answers
		// 403: the status and the note still say how the deploy went.
		r.logged("deployment of "+deployreport.Short(sha)+" to "+env, protectedHint(err, env))
	} else {
		r.mu.Lock()
		r.deployments[t.Key()+"@"+sha] = d.ID
		r.mu.Unlock()
	}
	r.status(ctx, t, sha, gitlab.Running, "deploying "+env)
}

func protectedHint(err error, env string) error {
	if status(err) == http.StatusForbidden {
		return fmt.Errorf("%w (is environment %s protected? allow the token's user to deploy to it)", err, env)
	}
	return err
}

func (r *Reporter) status(ctx context.Context, t deployer.Target, sha string, state gitlab.BuildStateValue, desc string) {
	name := "kplan/" + t.Name
	desc = deployreport.Clip(desc, 253) // at most 255 bytes, the cut marked
	_, _, err := r.GL.Commits.SetCommitStatus(t.Repo, sha, &gitlab.SetCommitStatusOptions{
		State: state, Name: &name, Ref: &t.Branch, Description: &desc,
	}, gitlab.WithContext(ctx))
	r.logged("commit status "+name+" "+string(state)+" on "+deployreport.Short(sha), err)
}

// Finished reports the outcome on the commit, the deployment and the
// merge request.
func (r *Reporter) Finished(ctx context.Context, o deployer.Outcome) {
	t := o.Target
	state, dstate, desc := gitlab.Success, gitlab.DeploymentStatusSuccess, deployreport.Counts(o.Result)
	if o.Err != nil {
		state, dstate, desc = gitlab.Failed, gitlab.DeploymentStatusFailed, deployreport.Public(o.Err.Error())
	}
	if o.SHA != "" {
		r.status(ctx, t, o.SHA, state, desc)
	}
	r.mu.Lock()
	id, started := r.deployments[t.Key()+"@"+o.SHA]
	delete(r.deployments, t.Key()+"@"+o.SHA)
	r.mu.Unlock()
	if started {
		_, _, err := r.GL.Deployments.UpdateProjectDeployment(t.Repo, id, &gitlab.UpdateProjectDeploymentOptions{Status: &dstate}, gitlab.WithContext(ctx))
		r.logged(fmt.Sprintf("deployment %d %s", id, dstate), err)
	}
	r.logged("merge request note on the deploy of "+deployreport.Short(o.SHA)+" to "+t.Name, r.note(ctx, o))
}

// note updates the merged merge request's note with o; a push's merge
// request is looked up from its commit.
func (r *Reporter) note(ctx context.Context, o deployer.Outcome) error {
	t := o.Target
	mr := o.PR
	if mr == 0 && o.SHA != "" {
		var err error
		if mr, _, err = r.mergedMR(ctx, t, o.SHA); err != nil {
			return err
		}
	}
	if mr == 0 {
		return nil
	}
	key := fmt.Sprintf("%s!%d", t.Repo, mr)
	r.mu.Lock()
	if r.summaries[key] == nil {
		if len(r.summaries) >= maxSummaries {
			for k := range r.summaries { // any: a long-running webhook must not grow
				delete(r.summaries, k)
				break
			}
		}
		r.summaries[key] = map[string]deployer.Outcome{}
	}
	r.summaries[key][t.Name] = o
	body := deployreport.Comment(r.summaries[key])
	r.mu.Unlock()
	_, err := r.Notes.Upsert(ctx, t.Repo, mr, deployreport.Marker, body)
	return err
}

// mergedMR finds the merged merge request a commit came from (0: none)
// and its head.
func (r *Reporter) mergedMR(ctx context.Context, t deployer.Target, sha string) (int, string, error) {
	mrs, _, err := r.GL.Commits.ListMergeRequestsByCommit(t.Repo, sha, gitlab.WithContext(ctx))
	if err != nil {
		return 0, "", fmt.Errorf("the merge requests of %s in %s: %w", deployreport.Short(sha), t.Repo, err)
	}
	// Only a merged one: an open merge request that merely contains the
	// commit did not deploy it.
	for _, m := range mrs {
		if m.State == "merged" {
			return int(m.IID), m.SHA, nil
		}
	}
	return 0, "", nil
}

// Interrupted finishes t's environment's deployments still running that
// no deploy of this process reports on (the webhook was killed, or lost
// its leadership, mid-deploy), and their commits' running kplan/<target>
// statuses: both canceled, saying the deploy was interrupted. Only
// deployments by the token's own user are touched.
func (r *Reporter) Interrupted(ctx context.Context, t deployer.Target) (bool, error) {
	env := deployreport.Environment(t)
	ds, _, err := r.GL.Deployments.ListProjectDeployments(t.Repo, &gitlab.ListProjectDeploymentsOptions{
		ListOptions: gitlab.ListOptions{PerPage: 20}, Environment: &env, Status: gitlab.Ptr("running"),
		OrderBy: gitlab.Ptr("id"), Sort: gitlab.Ptr("desc"),
	}, gitlab.WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("list the running deployments of %s in %s: %w", env, t.Repo, err)
	}
	self, err := r.Notes.Self(ctx)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	reporting := map[int64]bool{}
	for _, id := range r.deployments {
		reporting[id] = true
	}
	r.mu.Unlock()
	found := false
	for _, d := range ds {
		if reporting[d.ID] || (self != "" && (d.User == nil || !strings.EqualFold(d.User.Username, self))) {
			continue
		}
		found = true
		_, _, err := r.GL.Deployments.UpdateProjectDeployment(t.Repo, d.ID, &gitlab.UpdateProjectDeploymentOptions{Status: gitlab.Ptr(gitlab.DeploymentStatusCanceled)}, gitlab.WithContext(ctx))
		r.logged(fmt.Sprintf("interrupted deployment %d", d.ID), err)
		sts, _, err := r.GL.Commits.GetCommitStatuses(t.Repo, d.SHA, &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr("kplan/" + t.Name)}, gitlab.WithContext(ctx))
		if err != nil {
			return found, fmt.Errorf("the statuses of %s: %w", deployreport.Short(d.SHA), err)
		}
		if n := len(sts); n > 0 && (sts[n-1].Status == "running" || sts[n-1].Status == "pending") {
			r.status(ctx, t, d.SHA, gitlab.Canceled, deployreport.Interrupted)
		}
	}
	return found, nil
}

// ReviewedPlan reads the plan the CI job recorded in its note on merge
// request mr: only PlanAuthor's note counts.
func (r *Reporter) ReviewedPlan(ctx context.Context, t deployer.Target, mr int) (*prcomment.Reviewed, error) {
	author := r.PlanAuthor
	if author == "" {
		var err error
		if author, err = r.Notes.Self(ctx); err != nil {
			return nil, err
		}
	}
	n, err := forgegitlab.FindBy(ctx, r.GL, t.Repo, mr, prcomment.PlanMarker, author)
	if err != nil || n == nil {
		return nil, err
	}
	plan, ok, err := prcomment.ParseReviewed(n.Body)
	if err != nil || !ok {
		return nil, err
	}
	return &plan, nil
}

// Approvals reads the approvals of the merge request sha merged (mr, or
// found from the commit) from GitLab's record (the approvals API). GitLab
// does not record which commit an approval was given on: each stands for
// the merge request's head when it merged, which is what was approved
// only with the project's "Remove all approvals when commits are added to
// the source branch" on (docs/gitlab.md). An approval counts from a
// user who may push (Developer or above). A merge request that requires
// approvals has been reviewed even with none given: Reviews counts the
// approvals required or given, whichever is more.
func (r *Reporter) Approvals(ctx context.Context, t deployer.Target, sha string, mr int) (deployer.Approvals, error) {
	var head string
	if mr == 0 {
		n, h, err := r.mergedMR(ctx, t, sha)
		if err != nil || n == 0 {
			return deployer.Approvals{}, err
		}
		mr, head = n, h
	}
	ap := deployer.Approvals{PR: mr}
	if head == "" {
		m, _, err := r.GL.MergeRequests.GetMergeRequest(t.Repo, int64(mr), nil, gitlab.WithContext(ctx))
		if err != nil {
			return ap, fmt.Errorf("merge request %s!%d: %w", t.Repo, mr, err)
		}
		head = m.SHA
	}
	a, _, err := r.GL.MergeRequestApprovals.GetConfiguration(t.Repo, int64(mr), gitlab.WithContext(ctx))
	if err != nil {
		return ap, fmt.Errorf("the approvals of %s!%d: %w", t.Repo, mr, err)
	}
	ap.Reviews = max(len(a.ApprovedBy), int(a.ApprovalsRequired))
	if len(a.ApprovedBy) > 0 {
		// An approval stands for the merged head only if a push removes
		// it: otherwise what was approved cannot be told, and an
		// approval must not vouch for commits pushed after it.
		pa, _, err := r.GL.Projects.GetApprovalConfiguration(t.Repo, gitlab.WithContext(ctx))
		if err != nil {
			return ap, fmt.Errorf("the approval settings of %s: %w", t.Repo, err)
		}
		if !pa.ResetApprovalsOnPush {
			return ap, fmt.Errorf("%w: %s keeps approvals when commits are pushed, so an approval does not say what was approved: turn on \"Remove all approvals when commits are added to the source branch\" (Settings → Merge requests)", ErrApprovalsKept, t.Repo)
		}
	}
	// GitLab lists approvals oldest first; the deployer wants newest first.
	for i := len(a.ApprovedBy) - 1; i >= 0; i-- {
		u := a.ApprovedBy[i].User
		if u == nil || u.Username == "" || head == "" {
			continue
		}
		ok, err := r.canWrite(ctx, t, u.ID, u.Username)
		if err != nil {
			return ap, err
		}
		if ok {
			ap.Approved = append(ap.Approved, deployer.Approval{Commit: head, By: u.Username})
		}
	}
	return ap, nil
}

// CanWrite says whether username may push to t's project: a member,
// direct or inherited, of Developer access or above.
func (r *Reporter) CanWrite(ctx context.Context, t deployer.Target, username string) (bool, error) {
	us, _, err := r.GL.Users.ListUsers(&gitlab.ListUsersOptions{Username: &username}, gitlab.WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("the user @%s: %w", username, err)
	}
	for _, u := range us {
		if strings.EqualFold(u.Username, username) {
			return r.canWrite(ctx, t, u.ID, u.Username)
		}
	}
	return false, nil
}

func (r *Reporter) canWrite(ctx context.Context, t deployer.Target, id int64, username string) (bool, error) {
	m, _, err := r.GL.ProjectMembers.GetInheritedProjectMember(t.Repo, id, gitlab.WithContext(ctx))
	if status(err) == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the access of @%s to %s: %w", username, t.Repo, err)
	}
	return m.AccessLevel >= gitlab.DeveloperPermissions, nil
}

func status(err error) int {
	var er *gitlab.ErrorResponse
	switch {
	case errors.As(err, &er) && er.Response != nil:
		return er.Response.StatusCode
	case errors.Is(err, gitlab.ErrNotFound):
		// client-go answers 404 with this sentinel, not an ErrorResponse.
		return http.StatusNotFound
	}
	return 0
}
