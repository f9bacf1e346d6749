// Package ghreport tells GitHub how deploys went: a commit status per
// target (kplan/<target>), a Deployment with its statuses per target
// environment, and one comment on the merged pull request summarising
// every target. GitHub API failures are retried with backoff; a report
// that still fails is logged, and the deploy's result stays on the
// target's inventory object in the cluster.
package ghreport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/prcomment"
)

// maxSummaries bounds the pull requests whose comment is kept in memory.
const maxSummaries = 200

// Marker finds the deploy comment on a pull request.
const Marker = "<!-- kplan:deploy -->"

// Reporter implements deployer.Reporter with go-github.
type Reporter struct {
	GH     *github.Client
	Logger *slog.Logger
	// Attempts and Backoff bound the retries of one API call.
	Attempts int
	Backoff  time.Duration

	mu          sync.Mutex
	deployments map[string]int64                    // target@sha -> deployment id
	summaries   map[int]map[string]deployer.Outcome // PR -> target -> latest outcome
}

var _ deployer.Reporter = (*Reporter)(nil)

// New makes a Reporter.
func New(gh *github.Client, logger *slog.Logger) *Reporter {
	return &Reporter{GH: gh, Logger: logger, Attempts: 5, Backoff: 500 * time.Millisecond,
		deployments: map[string]int64{}, summaries: map[int]map[string]deployer.Outcome{}}
}

func split(repo string) (string, string) {
	owner, name, _ := strings.Cut(repo, "/")
	return owner, name
}

// retry calls f until it succeeds, fails for good (a 4xx other than a rate
// limit) or runs out of attempts.
func (r *Reporter) retry(ctx context.Context, what string, f func() (*github.Response, error)) error {
	wait := r.Backoff
	var err error
	for i := 0; i < r.Attempts; i++ {
		var resp *github.Response
		resp, err = f()
		if err == nil {
			return nil
		}
		if resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			var rl *github.RateLimitError
			if !errors.As(err, &rl) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	r.Logger.Error("GitHub report failed", "what", what, "err", err)
	return fmt.Errorf("%s: %w", what, err)
}

func environment(t deployer.Target) string {
	if t.Environment != "" {
		return t.Environment
	}
	return t.Name
}

// Started marks the commit pending and opens a Deployment in progress.
func (r *Reporter) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	owner, repo := split(t.Repo)
	r.status(ctx, t, sha, "pending", "deploying "+environment(t))
	var dep *github.Deployment
	err := r.retry(ctx, "create deployment", func() (resp *github.Response, err error) {
		dep, resp, err = r.GH.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{
			Ref: github.String(sha), Environment: github.String(environment(t)), AutoMerge: github.Bool(false),
			RequiredContexts: &[]string{}, Description: github.String("kplan deploy of " + t.Overlay),
		})
		return resp, err
	})
	if err != nil {
		return
	}
	r.mu.Lock()
	r.deployments[t.Name+"@"+sha] = dep.GetID()
	r.mu.Unlock()
	r.deploymentStatus(ctx, t, dep.GetID(), "in_progress", "applying "+t.Overlay)
}

func (r *Reporter) status(ctx context.Context, t deployer.Target, sha, state, desc string) {
	owner, repo := split(t.Repo)
	r.retry(ctx, "commit status", func() (*github.Response, error) {
		_, resp, err := r.GH.Repositories.CreateStatus(ctx, owner, repo, sha, &github.RepoStatus{
			State: github.String(state), Context: github.String("kplan/" + t.Name), Description: github.String(clip(desc, 140)),
		})
		return resp, err
	})
}

func (r *Reporter) deploymentStatus(ctx context.Context, t deployer.Target, id int64, state, desc string) {
	owner, repo := split(t.Repo)
	r.retry(ctx, "deployment status", func() (*github.Response, error) {
		_, resp, err := r.GH.Repositories.CreateDeploymentStatus(ctx, owner, repo, id, &github.DeploymentStatusRequest{
			State: github.String(state), Description: github.String(clip(desc, 140)), Environment: github.String(environment(t)),
		})
		return resp, err
	})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// Finished reports the outcome on the commit, the Deployment and the PR.
func (r *Reporter) Finished(ctx context.Context, o deployer.Outcome) {
	t := o.Target
	state, desc := "success", counts(o.Result)
	if o.Err != nil {
		state, desc = "failure", o.Err.Error()
	}
	if o.SHA != "" {
		r.status(ctx, t, o.SHA, state, desc)
	}
	r.mu.Lock()
	id, ok := r.deployments[t.Name+"@"+o.SHA]
	delete(r.deployments, t.Name+"@"+o.SHA)
	r.mu.Unlock()
	if ok {
		r.deploymentStatus(ctx, t, id, state, desc)
	}
	pr := o.PR
	if pr == 0 && o.SHA != "" {
		pr = r.mergedPR(ctx, t, o.SHA)
	}
	if pr == 0 {
		return
	}
	r.mu.Lock()
	if r.summaries[pr] == nil {
		// Keep the summaries of recent PRs only: a long-running webhook
		// must not grow without bound.
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
	body := comment(r.summaries[pr])
	r.mu.Unlock()
	owner, repo := split(t.Repo)
	r.retry(ctx, "PR comment", func() (*github.Response, error) {
		_, err := prcomment.Upsert(ctx, r.GH, owner, repo, pr, Marker, body)
		var er *github.ErrorResponse
		if errors.As(err, &er) {
			return &github.Response{Response: er.Response}, err
		}
		return nil, err
	})
}

// mergedPR finds the pull request a pushed commit came from.
func (r *Reporter) mergedPR(ctx context.Context, t deployer.Target, sha string) int {
	owner, repo := split(t.Repo)
	var prs []*github.PullRequest
	err := r.retry(ctx, "pull requests of commit", func() (resp *github.Response, err error) {
		prs, resp, err = r.GH.PullRequests.ListPullRequestsWithCommit(ctx, owner, repo, sha, nil)
		return resp, err
	})
	if err != nil {
		return 0
	}
	// Only a merged PR: an open one that merely contains the commit did
	// not deploy it.
	for _, p := range prs {
		if p.MergedAt != nil || p.GetMerged() {
			return p.GetNumber()
		}
	}
	return 0
}

func counts(res *deploy.Result) string {
	if res == nil {
		return ""
	}
	c := map[deploy.Action]int{}
	for _, o := range res.Objects {
		c[o.Action]++
	}
	s := fmt.Sprintf("%d created, %d configured, %d unchanged, %d pruned", c[deploy.Created], c[deploy.Configured], c[deploy.Unchanged], c[deploy.Pruned])
	if c[deploy.Kept] > 0 {
		s += fmt.Sprintf(", %d left in the cluster", c[deploy.Kept])
	}
	if c[deploy.Failed]+c[deploy.Skipped] > 0 {
		s += fmt.Sprintf(", %d failed, %d skipped", c[deploy.Failed], c[deploy.Skipped])
	}
	return s
}

// comment is the PR comment: one row per target, details per target, and
// how to retry what failed. Secret values never reach it: only keys.
func comment(byTarget map[string]deployer.Outcome) string {
	names := make([]string, 0, len(byTarget))
	failed := 0
	for n, o := range byTarget {
		names = append(names, n)
		if o.Err != nil {
			failed++
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(Marker + "\n")
	fmt.Fprintf(&b, "### kplan deploy: %d of %d targets succeeded\n\n", len(names)-failed, len(names))
	b.WriteString("| Target | Environment | Commit | Result |\n|---|---|---|---|\n")
	for _, n := range names {
		o := byTarget[n]
		res := "✅ " + counts(o.Result)
		if o.Err != nil {
			res = "❌ " + cell(clip(o.Err.Error(), 300))
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", n, environment(o.Target), short(o.SHA), res)
	}
	for _, n := range names {
		o := byTarget[n]
		if o.Result == nil || len(o.Result.Objects) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary>%s: %s</summary>\n\n", n, counts(o.Result))
		for _, obj := range o.Result.Objects {
			line := fmt.Sprintf("- %s `%s`", obj.Action, strings.ReplaceAll(obj.Key, "|", `\|`))
			if obj.Reason != "" {
				line += " (" + obj.Reason + ")"
			}
			if obj.Error != "" {
				line += ": " + strings.Join(strings.Fields(clip(obj.Error, 200)), " ")
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("\n</details>\n")
	}
	if failed > 0 {
		b.WriteString("\n**To retry**: fix the cause (the error above says what failed) and merge again, or wait for the next resync, which retries every failed target at the branch's newest commit.\n")
	}
	out := b.String()
	if len(out) > prcomment.MaxBodyChars {
		out = out[:prcomment.MaxBodyChars-100] + "\n\n…(cut to fit GitHub's comment size limit)\n"
	}
	return out
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// cell makes text safe in a Markdown table cell: one line, pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
