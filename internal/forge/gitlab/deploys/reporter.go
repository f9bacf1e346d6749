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
// GitLab asks for; a report that still fails is held, logged once, and
// sent again on the next report or Flush until GitLab takes it
// (deployreport.Outbox, as GitHub's); meanwhile the deploy's outcome is on
// the target's inventory object.
package deploys

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	forgegitlab "github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/markers"
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
	// Outbox sends the reports and holds those GitLab does not take yet.
	*deployreport.Outbox

	mu          sync.Mutex
	deployments map[string]*deployment                 // target key@sha -> its deployment
	summaries   map[string]map[string]deployer.Outcome // project!iid -> target -> latest outcome
}

var (
	_ deployer.Reporter = (*Reporter)(nil)
	_ deployer.Reviews  = (*Reporter)(nil)
)

// NewReporter makes a Reporter. client-go retries each request itself
// (429 and 5xx, after the time GitLab asks for), so the outbox tries
// each report once per delivery and holds what GitLab did not take.
func NewReporter(gl *gitlab.Client, logger *slog.Logger) *Reporter {
	return &Reporter{GL: gl, Logger: logger, Notes: forgegitlab.NewPoster(gl),
		Outbox:      &deployreport.Outbox{Forge: "GitLab", Logger: logger, Attempts: 1, Backoff: time.Second, MaxWait: time.Minute, MaxHeld: 1000, Classify: classify},
		deployments: map[string]*deployment{}, summaries: map[string]map[string]deployer.Outcome{}}
}

// deployment is the state a GitLab deployment should show; id is 0
// until GitLab created it.
type deployment struct {
	id             int64
	status, posted gitlab.DeploymentStatusValue // wanted, and last taken by GitLab
}

// Flush sends the reports GitLab did not take earlier.
func (r *Reporter) Flush(ctx context.Context) { r.Deliver(ctx) }

// Started opens a running deployment of t's environment and marks the
// commit running. The deployment comes first: a run killed in between
// leaves a deployment Interrupted finds.
func (r *Reporter) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	r.setDeployment(t, sha, gitlab.DeploymentStatusRunning)
	r.Enqueue(r.statusOp(t, sha, gitlab.Running, "deploying "+deployreport.Environment(t)))
	r.Deliver(ctx)
}

// setDeployment says which status t's deployment of sha should show and
// queues sending it; the deployment is created on the first send.
func (r *Reporter) setDeployment(t deployer.Target, sha string, status gitlab.DeploymentStatusValue) {
	key := t.Key() + "@" + sha
	env := deployreport.Environment(t)
	r.mu.Lock()
	d := r.deployments[key]
	if d == nil {
		d = &deployment{}
		r.deployments[key] = d
	}
	d.status = status
	r.mu.Unlock()
	r.Enqueue(&deployreport.Op{Key: "deployment\x00" + t.Repo + "\x00" + key, What: "deployment of " + deployreport.Short(sha) + " to " + env + " " + string(status),
		Send: func(ctx context.Context) error {
			r.mu.Lock()
			want := *d
			r.mu.Unlock()
			if want.id == 0 {
				// A protected environment this token may not deploy to
				// answers 403: the status and the note still report.
				dep, _, err := r.GL.Deployments.CreateProjectDeployment(t.Repo, &gitlab.CreateProjectDeploymentOptions{
					Environment: &env, Ref: &t.Branch, SHA: &sha, Tag: gitlab.Ptr(false), Status: gitlab.Ptr(gitlab.DeploymentStatusRunning),
				}, gitlab.WithContext(ctx))
				if err != nil {
					return protectedHint(err, env)
				}
				r.mu.Lock()
				d.id, d.posted = dep.ID, gitlab.DeploymentStatusRunning
				want.id, want.posted = d.id, d.posted
				r.mu.Unlock()
			}
			if want.posted != want.status {
				if _, _, err := r.GL.Deployments.UpdateProjectDeployment(t.Repo, want.id, &gitlab.UpdateProjectDeploymentOptions{Status: &want.status}, gitlab.WithContext(ctx)); err != nil {
					return err
				}
			}
			r.mu.Lock()
			d.posted = want.status
			if want.status != gitlab.DeploymentStatusRunning && r.deployments[key] == d && d.posted == d.status {
				delete(r.deployments, key) // final and shown: nothing more to say about it
			}
			r.mu.Unlock()
			return nil
		}})
}

func protectedHint(err error, env string) error {
	if forgegitlab.Status(err) == http.StatusForbidden {
		return fmt.Errorf("%w (is environment %s protected? allow the token's user to deploy to it)", err, env)
	}
	return err
}

func (r *Reporter) statusOp(t deployer.Target, sha string, state gitlab.BuildStateValue, desc string) *deployreport.Op {
	name := "kplan/" + t.Name
	desc = deployreport.Clip(desc, 253) // at most 255 bytes, the cut marked
	return &deployreport.Op{Key: "status\x00" + t.Repo + "\x00" + sha + "\x00" + name, What: "commit status " + name + " " + string(state) + " on " + deployreport.Short(sha),
		Send: func(ctx context.Context) error {
			_, _, err := r.GL.Commits.SetCommitStatus(t.Repo, sha, &gitlab.SetCommitStatusOptions{
				State: state, Name: &name, Ref: &t.Branch, Description: &desc,
			}, gitlab.WithContext(ctx))
			return err
		}}
}

// Finished reports the outcome on the commit, the deployment and the
// merge request.
func (r *Reporter) Finished(ctx context.Context, o deployer.Outcome) {
	t := o.Target
	state, dstate, desc := gitlab.Success, gitlab.DeploymentStatusSuccess, deployreport.Counts(o.Result)
	switch {
	case o.Waiting != "":
		// Nothing applied yet: the commit's status says what it waits for.
		state, desc = gitlab.Pending, o.Waiting
	case o.Superseded != "":
		state, desc = gitlab.Success, deployreport.SupersededBy(o.Superseded)
	case o.Err != nil:
		state, dstate, desc = gitlab.Failed, gitlab.DeploymentStatusFailed, deployreport.Public(o.Err.Error())
	}
	if o.SHA != "" {
		r.Enqueue(r.statusOp(t, o.SHA, state, desc))
	}
	r.mu.Lock()
	_, started := r.deployments[t.Key()+"@"+o.SHA]
	r.mu.Unlock()
	if started {
		r.setDeployment(t, o.SHA, dstate)
	}
	r.Enqueue(&deployreport.Op{Key: "note\x00" + t.Repo + "\x00" + t.Key() + "@" + o.SHA, What: "merge request note on the deploy of " + deployreport.Short(o.SHA) + " to " + t.Name,
		Send: func(ctx context.Context) error { return r.note(ctx, o) }})
	r.Deliver(ctx)
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
	body := deployreport.Comment(r.summaries[key], forgegitlab.MaxCommentChars)
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
	r.Deliver(ctx) // reports held from before may be the ones missing
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
	for _, d := range r.deployments {
		reporting[d.id] = true
	}
	r.mu.Unlock()
	found := false
	for _, d := range ds {
		if reporting[d.ID] || (self != "" && (d.User == nil || !strings.EqualFold(d.User.Username, self))) {
			continue
		}
		found = true
		id := d.ID
		r.Enqueue(&deployreport.Op{Key: fmt.Sprintf("interrupted\x00%s\x00%d", t.Repo, id), What: fmt.Sprintf("deployment %d interrupted", id),
			Send: func(ctx context.Context) error {
				_, _, err := r.GL.Deployments.UpdateProjectDeployment(t.Repo, id, &gitlab.UpdateProjectDeploymentOptions{Status: gitlab.Ptr(gitlab.DeploymentStatusCanceled)}, gitlab.WithContext(ctx))
				return err
			}})
		var sts []*gitlab.CommitStatus
		err := r.Call(ctx, "the statuses of "+deployreport.Short(d.SHA), func(ctx context.Context) (err error) {
			sts, _, err = r.GL.Commits.GetCommitStatuses(t.Repo, d.SHA, &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr("kplan/" + t.Name)}, gitlab.WithContext(ctx))
			return err
		})
		if err != nil {
			return found, err
		}
		if n := len(sts); n > 0 && (sts[n-1].Status == "running" || sts[n-1].Status == "pending") {
			r.Enqueue(r.statusOp(t, d.SHA, gitlab.Canceled, deployreport.Interrupted))
		}
	}
	r.Deliver(ctx)
	return found, nil
}

// ReviewedPlan reads the plan the CI job recorded in its note on merge
// request mr: only PlanAuthor's note counts.
func (r *Reporter) ReviewedPlan(ctx context.Context, t deployer.Target, mr int) (*markers.Reviewed, error) {
	author := r.PlanAuthor
	if author == "" {
		var err error
		if author, err = r.Notes.Self(ctx); err != nil {
			return nil, err
		}
	}
	n, err := forgegitlab.FindBy(ctx, r.GL, t.Repo, mr, markers.PlanMarker, author)
	if err != nil || n == nil {
		return nil, err
	}
	plan, ok, err := markers.ParseReviewed(n.Body)
	if err != nil || !ok {
		return nil, err
	}
	return &plan, nil
}

// Pulls reads GitLab's record of the merge requests that merged commits
// (the branch's first-parent steps from what runs to the tip): for each
// commit the merged merge requests it belongs to, each once with its
// diff refs, head, merge (or squash) commit and merger, and its approvals,
// as approval.Pull holds them.
//
// GitLab does not record which commit an approval was given on: each
// stands for the merge request's head when it merged, which is what was
// approved only with the project's "Remove all approvals when commits are
// added to the source branch" on (reset_approvals_on_push; a project
// without it is refused with ErrApprovalsKept, and only then can an
// approval given before a rebase stand for the rebased head). The
// project's own rules decide whose approval counts: the author's only
// with merge_requests_author_approval, a committer's not with
// merge_requests_disable_committers_approval (docs/gitlab.md).
func (r *Reporter) Pulls(ctx context.Context, t deployer.Target, commits []string) ([]approval.Pull, error) {
	seen := map[int64]bool{}
	var settings *gitlab.ProjectApprovals
	var out []approval.Pull
	for _, sha := range commits {
		mrs, _, err := r.GL.Commits.ListMergeRequestsByCommit(t.Repo, sha, gitlab.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("the merge requests of %s in %s: %w", deployreport.Short(sha), t.Repo, err)
		}
		for _, m := range mrs {
			// Only a merged one: an open merge request that merely
			// contains the commit merged nothing.
			if m.State != "merged" || seen[m.IID] {
				continue
			}
			seen[m.IID] = true
			p, err := r.mergeRequest(ctx, t, m.IID, &settings)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// approvalRule stands for a project's approval rule in a merge request's
// reviews when no one approved it: the merge request was under review,
// so no plan comment stands in for an approval.
const approvalRule = "(approval rule)"

// mergeRequest reads merge request iid and its approvals; settings holds
// the project's approval settings once read.
func (r *Reporter) mergeRequest(ctx context.Context, t deployer.Target, iid int64, settings **gitlab.ProjectApprovals) (approval.Pull, error) {
	m, _, err := r.GL.MergeRequests.GetMergeRequest(t.Repo, iid, nil, gitlab.WithContext(ctx))
	if err != nil {
		return approval.Pull{}, fmt.Errorf("merge request %s!%d: %w", t.Repo, iid, err)
	}
	p := approval.Pull{Number: int(iid), Base: approval.Ref{Ref: m.TargetBranch, SHA: m.DiffRefs.BaseSha}, Head: approval.Ref{Ref: m.SourceBranch, SHA: m.SHA},
		Merge: cmp.Or(m.MergeCommitSHA, m.SquashCommitSHA)}
	// merged_at is null on merge requests merged before GitLab 13.x
	// recorded it: merged is merged.
	if at := cmp.Or(m.MergedAt, m.UpdatedAt, m.CreatedAt); at != nil {
		p.MergedAt = at.UTC().Format(time.RFC3339)
	} else {
		p.MergedAt = time.Unix(0, 0).UTC().Format(time.RFC3339)
	}
	if u := cmp.Or(m.MergeUser, m.MergedBy); u != nil {
		p.MergedBy.Login = u.Username
	}
	var commits []*gitlab.Commit
	if p.Merge == "" {
		// A fast-forward merge put the merge request's commits on the
		// branch: the rule tells them from pushes by their count.
		if commits, err = r.commits(ctx, t, iid); err != nil {
			return p, err
		}
		p.Commits = len(commits)
	}
	a, _, err := r.GL.MergeRequestApprovals.GetConfiguration(t.Repo, iid, gitlab.WithContext(ctx))
	if err != nil {
		return p, fmt.Errorf("the approvals of %s!%d: %w", t.Repo, iid, err)
	}
	if len(a.ApprovedBy) == 0 {
		if a.ApprovalsRequired > 0 {
			p.Reviews = []approval.Review{{User: approval.User{Login: approvalRule}, State: approval.Commented}}
		}
		return p, nil
	}
	if *settings == nil {
		pa, _, err := r.GL.Projects.GetApprovalConfiguration(t.Repo, gitlab.WithContext(ctx))
		if err != nil {
			return p, fmt.Errorf("the approval settings of %s: %w", t.Repo, err)
		}
		*settings = pa
	}
	if !(*settings).ResetApprovalsOnPush {
		return p, fmt.Errorf("%w: %s keeps approvals when commits are pushed, so an approval does not say what was approved: turn on \"Remove all approvals when commits are added to the source branch\" (Settings → Merge requests)", ErrApprovalsKept, t.Repo)
	}
	if (*settings).MergeRequestsDisableCommittersApproval && commits == nil {
		if commits, err = r.commits(ctx, t, iid); err != nil {
			return p, err
		}
	}
	for _, ab := range a.ApprovedBy {
		u := ab.User
		switch {
		case u == nil || u.Username == "":
		case m.Author != nil && m.Author.ID == u.ID && !(*settings).MergeRequestsAuthorApproval:
			// The author's own approval, which the project does not count.
		case (*settings).MergeRequestsDisableCommittersApproval && committed(commits, u):
		default:
			p.Reviews = append(p.Reviews, approval.Review{User: approval.User{Login: u.Username}, State: approval.Approved, CommitID: m.SHA})
		}
	}
	if len(p.Reviews) == 0 {
		// Approvals the project's rules do not count: under review, not
		// approved.
		p.Reviews = []approval.Review{{User: approval.User{Login: approvalRule}, State: approval.Commented}}
	}
	return p, nil
}

// commits are merge request iid's commits.
func (r *Reporter) commits(ctx context.Context, t deployer.Target, iid int64) ([]*gitlab.Commit, error) {
	var all []*gitlab.Commit
	opts := &gitlab.GetMergeRequestCommitsOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := r.GL.MergeRequests.GetMergeRequestCommits(t.Repo, iid, opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("the commits of %s!%d: %w", t.Repo, iid, err)
		}
		all = append(all, cs...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// committed says whether u wrote or committed one of commits. GitLab
// names a commit's people by name and e-mail, an approver by name and
// username (the approvals API shows no e-mail): a name or username equal
// to a commit's author or committer name counts as theirs.
func committed(commits []*gitlab.Commit, u *gitlab.BasicUser) bool {
	for _, c := range commits {
		for _, name := range []string{c.AuthorName, c.CommitterName} {
			if name != "" && (strings.EqualFold(name, u.Name) || strings.EqualFold(name, u.Username)) {
				return true
			}
		}
	}
	return false
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
	if forgegitlab.Status(err) == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the access of @%s to %s: %w", username, t.Repo, err)
	}
	return m.AccessLevel >= gitlab.DeveloperPermissions, nil
}

// classify says whether a failed request is worth sending again: no
// answer, 5xx, 401 (a token replaced in its Secret) and 429 (after
// Retry-After) are; other client errors are GitLab's refusal.
func classify(err error, now time.Time) (retry bool, wait time.Duration) {
	var er *gitlab.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		return !errors.Is(err, gitlab.ErrNotFound), 0
	}
	switch c := er.Response.StatusCode; {
	case c == http.StatusTooManyRequests:
		if s, err := strconv.Atoi(er.Response.Header.Get("Retry-After")); err == nil && s >= 0 {
			return true, max(time.Duration(s)*time.Second, time.Second)
		}
		return true, time.Minute
	case c >= 500, c == http.StatusUnauthorized:
		return true, 0
	}
	return false, 0
}
