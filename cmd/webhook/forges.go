package main

import (
	"context"
	"log/slog"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/github/deploys"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	gldeploys "github.com/kplan-dev/kplan/internal/forge/gitlab/deploys"
	"github.com/kplan-dev/kplan/internal/ghauth"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/markers"
)

// forges is the wiring of the forges one webhook serves: GitHub's always,
// GitLab's when a repository of the configuration is on GitLab. Each
// repository's reports, comments, tokens and refs go to its own forge
// (config.Config.ForgeOf).
type forges struct {
	cfg    *config.Config
	github *deploys.Reporter
	gitlab *gldeploys.Reporter // nil: no GitLab repository
	// gitHubTokens fetch GitHub repositories; gitLabTokens GitLab ones
	// (and authenticate its API calls).
	gitHubTokens gitmirror.TokenSource
	gitLabTokens gitlab.TokenSource
	// gitLabSecret verifies GitLab's deliveries; nil is the webhook
	// secret.
	gitLabSecret []byte
}

// newForges reads GitLab's credentials when GitLab repositories are
// configured and makes its reporter.
func newForges(cfg *config.Config, getenv func(string) string, gh *deploys.Reporter, ghTokens gitmirror.TokenSource, gitLabPlanAuthor string, log *slog.Logger) (*forges, error) {
	f := &forges{cfg: cfg, github: gh, gitHubTokens: ghTokens}
	if !cfg.HasForge(config.GitLab) {
		return f, nil
	}
	auth, err := config.GitLabAuthFrom(getenv)
	if err != nil {
		return nil, err
	}
	var tokens gitlab.TokenSource = ghauth.Static(auth.Token)
	if auth.TokenFile != "" {
		if tokens, err = ghauth.NewFileOf("GitLab token file", auth.TokenFile); err != nil {
			return nil, err
		}
	}
	gl, err := gitlab.NewClientFrom(gitlab.APIURL(cfg.GitLabURL), tokens)
	if err != nil {
		return nil, err
	}
	f.gitlab = gldeploys.NewReporter(gl, log)
	f.gitlab.PlanAuthor = gitLabPlanAuthor
	f.gitLabTokens, f.gitLabSecret = tokens, auth.WebhookSecret
	return f, nil
}

// receiver reads the deliveries of every forge served, on one endpoint.
func (f *forges) receiver() forge.Receiver {
	rs := forge.Routes{{Forge: config.GitHub, Header: "X-GitHub-Event", Receiver: github.Receiver{}}}
	if f.gitlab != nil {
		rs = append(rs, forge.Route{Forge: config.GitLab, Header: "X-Gitlab-Event", Receiver: gitlab.Receiver{}, Secret: f.gitLabSecret})
	}
	return rs
}

func (f *forges) onGitLab(repo string) bool {
	return f.gitlab != nil && f.cfg.ForgeOf(repo) == config.GitLab
}

// Token implements gitmirror.TokenSource.
func (f *forges) Token(ctx context.Context, repo string) (string, error) {
	if f.onGitLab(repo) {
		return f.gitLabTokens.Token(ctx, repo)
	}
	return f.gitHubTokens.Token(ctx, repo)
}

// ChangeRefs is gitmirror.Mirrors.ChangeRefs: GitLab's merge request
// refs for its projects' clone URLs.
func (f *forges) ChangeRefs(repos map[string]string) func(string) (string, string) {
	return func(cloneURL string) (string, string) {
		if f.onGitLab(repos[cloneURL]) {
			return gitlab.HeadRef, gitlab.MergeRef
		}
		return "", ""
	}
}

// Upsert implements forge.Commenter (the live plans' comments).
func (f *forges) Upsert(ctx context.Context, repo string, number int, marker, body string) (forge.CommentResult, error) {
	if f.onGitLab(repo) {
		return f.gitlab.Notes.Upsert(ctx, repo, number, marker, body)
	}
	return f.github.Comments.Upsert(ctx, repo, number, marker, body)
}

func (f *forges) reporter(t deployer.Target) interface {
	deployer.Reporter
	deployer.Reviews
} {
	if f.onGitLab(t.Repo) {
		return f.gitlab
	}
	return f.github
}

// Started implements deployer.Reporter.
func (f *forges) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	f.reporter(t).Started(ctx, t, sha, pr)
}

// Finished implements deployer.Reporter.
func (f *forges) Finished(ctx context.Context, o deployer.Outcome) {
	f.reporter(o.Target).Finished(ctx, o)
}

// Interrupted implements deployer.Reporter.
func (f *forges) Interrupted(ctx context.Context, t deployer.Target) (bool, error) {
	return f.reporter(t).Interrupted(ctx, t)
}

// Flush implements deployer.Reporter.
func (f *forges) Flush(ctx context.Context) {
	f.github.Flush(ctx)
	if f.gitlab != nil {
		f.gitlab.Flush(ctx)
	}
}

// Approvals implements deployer.Reviews.
func (f *forges) Approvals(ctx context.Context, t deployer.Target, sha string, pr int) (deployer.Approvals, error) {
	return f.reporter(t).Approvals(ctx, t, sha, pr)
}

// ReviewedPlan implements deployer.Reviews.
func (f *forges) ReviewedPlan(ctx context.Context, t deployer.Target, pr int) (*markers.Reviewed, error) {
	return f.reporter(t).ReviewedPlan(ctx, t, pr)
}

// CanWrite implements deployer.Reviews.
func (f *forges) CanWrite(ctx context.Context, t deployer.Target, login string) (bool, error) {
	return f.reporter(t).CanWrite(ctx, t, login)
}

var (
	_ deployer.Reporter     = (*forges)(nil)
	_ deployer.Reviews      = (*forges)(nil)
	_ forge.Commenter       = (*forges)(nil)
	_ gitmirror.TokenSource = (*forges)(nil)
)
