// Package deploys is the GitHub forge's deploy reports: Reporter
// implements deployer.Reporter and deployer.Reviews with go-github. It is
// apart from internal/forge/github (comments, deliveries, the Action's
// event) so that the plan-only Action, which imports that, links no
// deployer.
//
// Reporter tells GitHub how deploys went: a commit status per
// target (kplan/<target>), a Deployment with its statuses per target
// environment, and one comment on the merged pull request summarising
// every target.
//
// GitHub is not always there: failures are retried with backoff, rate
// limits after the time GitHub asks for (Retry-After), each bounded. A
// report GitHub still does not take is kept, logged, and sent again on the
// next report or Flush until it does, a newer report of the same thing
// replacing it; meanwhile the deploy's result is on the target's
// inventory object in the cluster. Messages that would show where the
// cluster lives are replaced by a class of failure (Public).
package deploys

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	forgegithub "github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/markers"
)

// maxSummaries bounds the pull requests whose comment is kept in memory.
const maxSummaries = 200

// Marker finds the deploy comment on a pull request.
const Marker = deployreport.Marker

// payloadTarget is the key of a Deployment's payload naming the target
// that created it, so that finishing an interrupted deploy touches only
// that target's Deployments.
const payloadTarget = forgegithub.PayloadTarget

// Interrupted is what an interrupted deploy's statuses say.
const Interrupted = deployreport.Interrupted

// Reporter implements deployer.Reporter with go-github.
type Reporter struct {
	GH     *github.Client
	Logger *slog.Logger
	// Outbox sends the reports, retried and held while GitHub does not
	// take them (its Attempts, Backoff, MaxWait and MaxHeld bound that).
	*deployreport.Outbox
	// PlanAuthor is the login whose plan comment a merge is compared with
	// (ReviewedPlan); "" is github-actions[bot], the Action's default
	// token.
	PlanAuthor string
	// Comments writes the deploy comment, as the token's own (New makes
	// it; cmd/webhook shares it with the live plans).
	Comments *forgegithub.Poster

	mu          sync.Mutex
	deployments map[string]*deployment              // target key@sha -> its Deployment
	summaries   map[int]map[string]deployer.Outcome // PR -> target -> latest outcome
}

// deployment is the state a Deployment should show; id is 0 until GitHub
// created it.
type deployment struct {
	id          int64
	state, desc string
	posted      string // the state and description GitHub last took
}

var _ deployer.Reporter = (*Reporter)(nil)

// NewReporter makes a Reporter.
func NewReporter(gh *github.Client, logger *slog.Logger) *Reporter {
	return &Reporter{GH: gh, Logger: logger, Comments: forgegithub.NewPoster(gh, ""),
		Outbox:      &deployreport.Outbox{Forge: "GitHub", Logger: logger, Attempts: 5, Backoff: 500 * time.Millisecond, MaxWait: time.Minute, MaxHeld: 1000, Classify: classify},
		deployments: map[string]*deployment{}, summaries: map[int]map[string]deployer.Outcome{}}
}

func split(repo string) (string, string) {
	owner, name, _ := strings.Cut(repo, "/")
	return owner, name
}

func errorf(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }

func environment(t deployer.Target) string { return deployreport.Environment(t) }

// Flush sends the reports GitHub did not take earlier.
func (r *Reporter) Flush(ctx context.Context) { r.Deliver(ctx) }

// Started opens a Deployment in progress and marks the commit pending.
// The Deployment comes first: a run killed in between leaves a Deployment
// that Interrupted finds, never a pending status nothing points to.
func (r *Reporter) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	r.setDeployment(t, sha, "in_progress", "applying "+t.Overlay)
	r.Enqueue(r.statusOp(t, sha, "pending", "deploying "+environment(t)))
	r.Deliver(ctx)
}

func (r *Reporter) statusOp(t deployer.Target, sha, state, desc string) *op {
	owner, repo := split(t.Repo)
	return &op{Key: "status\x00" + t.Repo + "\x00" + sha + "\x00kplan/" + t.Name, What: "commit status kplan/" + t.Name + " " + state + " on " + short(sha),
		Send: func(ctx context.Context) error {
			_, _, err := r.GH.Repositories.CreateStatus(ctx, owner, repo, sha, &github.RepoStatus{
				State: github.String(state), Context: github.String("kplan/" + t.Name), Description: github.String(clip(desc, 140)),
			})
			return err
		}}
}

// setDeployment says which state t's Deployment of sha should show and
// queues sending it; the Deployment is created on the first send.
func (r *Reporter) setDeployment(t deployer.Target, sha, state, desc string) {
	key := t.Key() + "@" + sha
	r.mu.Lock()
	d := r.deployments[key]
	if d == nil {
		d = &deployment{}
		r.deployments[key] = d
	}
	d.state, d.desc = state, desc
	r.mu.Unlock()
	owner, repo := split(t.Repo)
	r.Enqueue(&op{Key: "deployment\x00" + key, What: "deployment of " + short(sha) + " to " + environment(t) + " " + state,
		Send: func(ctx context.Context) error {
			r.mu.Lock()
			want := *d
			r.mu.Unlock()
			if want.id == 0 {
				payload, _ := json.Marshal(map[string]string{payloadTarget: t.Key()})
				dep, _, err := r.GH.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{
					Ref: github.String(sha), Environment: github.String(environment(t)), AutoMerge: github.Bool(false),
					RequiredContexts: &[]string{}, Description: github.String(description(t)), Payload: json.RawMessage(payload),
				})
				if err != nil {
					return err
				}
				r.mu.Lock()
				d.id, want.id = dep.GetID(), dep.GetID()
				r.mu.Unlock()
			}
			if want.posted == want.state+"\x00"+want.desc {
				return nil
			}
			_, _, err := r.GH.Repositories.CreateDeploymentStatus(ctx, owner, repo, want.id, &github.DeploymentStatusRequest{
				State: github.String(want.state), Description: github.String(clip(want.desc, 140)), Environment: github.String(environment(t)),
			})
			if err != nil {
				return err
			}
			r.mu.Lock()
			d.posted = want.state + "\x00" + want.desc
			if !open(want.state) && r.deployments[key] == d && d.posted == d.state+"\x00"+d.desc {
				delete(r.deployments, key) // final and shown: nothing more to say about it
			}
			r.mu.Unlock()
			return nil
		}})
}

// description names a Deployment kplan created for t; deployments made
// before the payload named the target are recognised by it.
func description(t deployer.Target) string { return forgegithub.DeploymentDescription(t.Overlay) }

// open says whether a Deployment state is not final.
func open(state string) bool {
	return state == "in_progress" || state == "queued" || state == "pending"
}

func clip(s string, n int) string { return deployreport.Clip(s, n) }

func short(sha string) string { return deployreport.Short(sha) }

// Finished reports the outcome on the commit, the Deployment and the PR.
func (r *Reporter) Finished(ctx context.Context, o deployer.Outcome) {
	t := o.Target
	state, desc := "success", deployreport.Counts(o.Result)
	switch {
	case o.Waiting != "":
		// Nothing applied yet: the commit's status says what it waits for.
		state, desc = "pending", o.Waiting
	case o.Superseded != "":
		state, desc = "success", deployreport.SupersededBy(o.Superseded)
	case o.Err != nil:
		state, desc = "failure", deployreport.Public(o.Err.Error())
	}
	if o.SHA != "" {
		r.Enqueue(r.statusOp(t, o.SHA, state, desc))
	}
	r.mu.Lock()
	_, started := r.deployments[t.Key()+"@"+o.SHA]
	r.mu.Unlock()
	if started {
		r.setDeployment(t, o.SHA, state, desc)
	}
	r.Enqueue(r.commentOp(o))
	r.Deliver(ctx)
}

// commentOp updates the merged pull request's comment with o; a push's
// pull request is looked up from its commit.
func (r *Reporter) commentOp(o deployer.Outcome) *op {
	t := o.Target
	return &op{Key: "comment\x00" + t.Key() + "@" + o.SHA, What: "PR comment on the deploy of " + short(o.SHA) + " to " + t.Name,
		Send: func(ctx context.Context) error {
			pr := o.PR
			if pr == 0 && o.SHA != "" {
				var err error
				if pr, err = r.mergedPR(ctx, t, o.SHA); err != nil {
					return err
				}
			}
			if pr == 0 {
				return nil
			}
			r.mu.Lock()
			if r.summaries[pr] == nil {
				// Keep the summaries of recent PRs only: a long-running
				// webhook must not grow without bound.
				if len(r.summaries) >= maxSummaries {
					oldest := pr
					for n := range r.summaries {
						oldest = min(oldest, n)
					}
					delete(r.summaries, oldest)
				}
				r.summaries[pr] = map[string]deployer.Outcome{}
			}
			r.summaries[pr][t.Name] = o
			body := deployreport.Comment(r.summaries[pr], forgegithub.MaxCommentChars)
			r.mu.Unlock()
			_, err := r.Comments.Upsert(ctx, t.Repo, pr, Marker, body)
			return err
		}}
}

// ReviewedPlan reads the plan kplan's Action recorded in its comment on
// pull request pr: only the plan author's comment counts, so a marker
// anyone else posts is ignored.
func (r *Reporter) ReviewedPlan(ctx context.Context, t deployer.Target, pr int) (*markers.Reviewed, error) {
	owner, repo := split(t.Repo)
	c, err := forgegithub.FindBy(ctx, r.GH, owner, repo, pr, markers.PlanMarker, cmp.Or(r.PlanAuthor, "github-actions[bot]"))
	if err != nil || c == nil {
		return nil, err
	}
	plan, ok, err := markers.ParseReviewed(c.GetBody())
	if err != nil || !ok {
		// A plan comment from before digests, or damaged: nothing to
		// compare with.
		return nil, err
	}
	return &plan, nil
}

// Pulls reads GitHub's record of the pull requests that merged commits
// (the branch's first-parent steps from what runs to the tip): for each
// commit the merged pull requests it belongs to (GET …/commits/{sha}/pulls),
// each once (GET …/pulls/{n}, for its base, head, merge commit, merger and
// commit count) with its reviews (GET …/pulls/{n}/reviews), in the shapes
// approval.Record holds. The rule decides which reviews stand; GitHub
// lists them oldest first.
func (r *Reporter) Pulls(ctx context.Context, t deployer.Target, commits []string) ([]approval.Pull, error) {
	owner, repo := split(t.Repo)
	seen := map[int]bool{}
	var out []approval.Pull
	for _, sha := range commits {
		prs, _, err := r.GH.PullRequests.ListPullRequestsWithCommit(ctx, owner, repo, sha, &github.ListOptions{PerPage: 100})
		if err != nil {
			return nil, fmt.Errorf("the pull requests of %s in %s: %w", short(sha), t.Repo, err)
		}
		for _, p := range prs {
			// Only a merged one: an open pull request that merely contains
			// the commit merged nothing.
			if seen[p.GetNumber()] || p.MergedAt == nil {
				continue
			}
			seen[p.GetNumber()] = true
			pull, err := r.pull(ctx, t, p.GetNumber())
			if err != nil {
				return nil, err
			}
			out = append(out, pull)
		}
	}
	return out, nil
}

// pull reads pull request n and its reviews.
func (r *Reporter) pull(ctx context.Context, t deployer.Target, n int) (approval.Pull, error) {
	owner, repo := split(t.Repo)
	p, _, err := r.GH.PullRequests.Get(ctx, owner, repo, n)
	if err != nil {
		return approval.Pull{}, fmt.Errorf("pull request %s#%d: %w", t.Repo, n, err)
	}
	out := approval.Pull{Number: n, Base: approval.Ref{Ref: p.GetBase().GetRef(), SHA: p.GetBase().GetSHA()},
		Head: approval.Ref{Ref: p.GetHead().GetRef(), SHA: p.GetHead().GetSHA()}, Merge: p.GetMergeCommitSHA(),
		Commits: p.GetCommits(), MergedBy: approval.User{Login: p.GetMergedBy().GetLogin()}}
	if p.MergedAt != nil {
		out.MergedAt = p.GetMergedAt().UTC().Format(time.RFC3339)
	}
	opts := &github.ListOptions{PerPage: 100}
	for {
		rs, resp, err := r.GH.PullRequests.ListReviews(ctx, owner, repo, n, opts)
		if err != nil {
			return out, fmt.Errorf("list the reviews of %s#%d: %w", t.Repo, n, err)
		}
		for _, rv := range rs {
			a := approval.Review{User: approval.User{Login: rv.GetUser().GetLogin()}, State: rv.GetState(), CommitID: rv.GetCommitID()}
			if rv.SubmittedAt != nil {
				a.SubmittedAt = rv.GetSubmittedAt().UTC().Format(time.RFC3339)
			}
			out.Reviews = append(out.Reviews, a)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// CanWrite says whether login may push to t's repository (admin,
// maintain or write), from GitHub's collaborator permission.
func (r *Reporter) CanWrite(ctx context.Context, t deployer.Target, login string) (bool, error) {
	owner, repo := split(t.Repo)
	p, _, err := r.GH.Repositories.GetPermissionLevel(ctx, owner, repo, login)
	if err != nil {
		return false, fmt.Errorf("the permission of @%s on %s: %w", login, t.Repo, err)
	}
	switch p.GetPermission() {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}

// maxInterrupted bounds the Deployments of a target Interrupted looks at.
const maxInterrupted = 10

// Interrupted finishes the Deployments of t that are still queued,
// pending or in progress though no run reports them any more (the webhook
// was killed, or lost its leadership, mid-deploy): each gets the state
// error, and its commit's kplan/<target> status, if still pending, the
// state error too, both saying the deploy was interrupted and a new one
// follows. A new deploy of the same commit then supersedes that status
// with its own. It reports whether it found any.
func (r *Reporter) Interrupted(ctx context.Context, t deployer.Target) (bool, error) {
	r.Deliver(ctx) // reports held from before may be the ones missing
	owner, repo := split(t.Repo)
	var deps []*github.Deployment
	err := r.Call(ctx, "list the deployments of "+environment(t), func(ctx context.Context) (err error) {
		deps, _, err = r.GH.Repositories.ListDeployments(ctx, owner, repo, &github.DeploymentsListOptions{
			Environment: environment(t), ListOptions: github.ListOptions{PerPage: 50}})
		return err
	})
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	var reporting []int64 // Deployments this process still reports on
	for _, d := range r.deployments {
		reporting = append(reporting, d.id)
	}
	r.mu.Unlock()
	found, looked := false, 0
	for _, d := range deps {
		if !r.mine(d, t) || slices.Contains(reporting, d.GetID()) {
			continue
		}
		if looked++; looked > maxInterrupted {
			break
		}
		var sts []*github.DeploymentStatus
		err := r.Call(ctx, fmt.Sprintf("statuses of deployment %d", d.GetID()), func(ctx context.Context) (err error) {
			sts, _, err = r.GH.Repositories.ListDeploymentStatuses(ctx, owner, repo, d.GetID(), &github.ListOptions{PerPage: 1})
			return err
		})
		if err != nil {
			return found, err
		}
		if len(sts) > 0 && !open(sts[0].GetState()) {
			continue
		}
		found = true
		sha := d.GetSHA()
		if sha == "" {
			sha = d.GetRef()
		}
		r.Logger.Warn("finishing the reports of an interrupted deploy", "target", t.Key(), "deployment", d.GetID(), "sha", sha)
		id := d.GetID()
		r.Enqueue(&op{Key: fmt.Sprintf("interrupted\x00%d", id), What: fmt.Sprintf("deployment %d interrupted", id),
			Send: func(ctx context.Context) error {
				_, _, err := r.GH.Repositories.CreateDeploymentStatus(ctx, owner, repo, id, &github.DeploymentStatusRequest{
					State: github.String("error"), Description: github.String(Interrupted), Environment: github.String(environment(t)),
				})
				return err
			}})
		var cs []*github.RepoStatus
		err = r.Call(ctx, "statuses of "+short(sha), func(ctx context.Context) (err error) {
			cs, _, err = r.GH.Repositories.ListStatuses(ctx, owner, repo, sha, &github.ListOptions{PerPage: 100})
			return err
		})
		if err != nil {
			return found, err
		}
		// The newest status of the target's context decides.
		if i := slices.IndexFunc(cs, func(s *github.RepoStatus) bool { return s.GetContext() == "kplan/"+t.Name }); i >= 0 && cs[i].GetState() == "pending" {
			r.Enqueue(r.statusOp(t, sha, "error", Interrupted))
		}
	}
	r.Deliver(ctx)
	return found, nil
}

// mine says whether t created Deployment d.
func (r *Reporter) mine(d *github.Deployment, t deployer.Target) bool {
	var p map[string]any
	if json.Unmarshal(d.Payload, &p) == nil {
		if v, ok := p[payloadTarget].(string); ok {
			return v == t.Key()
		}
	}
	return d.GetDescription() == description(t)
}

// mergedPR finds the pull request a pushed commit came from (0: none).
func (r *Reporter) mergedPR(ctx context.Context, t deployer.Target, sha string) (int, error) {
	owner, repo := split(t.Repo)
	prs, _, err := r.GH.PullRequests.ListPullRequestsWithCommit(ctx, owner, repo, sha, nil)
	if err != nil {
		return 0, err
	}
	// Only a merged PR: an open one that merely contains the commit did
	// not deploy it.
	for _, p := range prs {
		if p.MergedAt != nil || p.GetMerged() {
			return p.GetNumber(), nil
		}
	}
	return 0, nil
}
