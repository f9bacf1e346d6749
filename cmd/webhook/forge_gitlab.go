package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	gldeploys "github.com/kplan-dev/kplan/internal/forge/gitlab/deploys"
	"github.com/kplan-dev/kplan/internal/ghauth"
)

// gitLabRow is GitLab's forge: served when a repository of the
// configuration is on it (forge: gitlab).
func gitLabRow() forgeRow {
	return forgeRow{
		Forge: config.GitLab,
		Env: [][2]string{
			{config.EnvGitLabToken, "forge: gitlab repositories: an access token (api scope) for GitLab's API and git"},
			{config.EnvGitLabTokenFile, "... or a file holding it, re-read when it changes"},
			{config.EnvGitLabWebhookSecret, "the GitLab webhook's secret token (default: the webhook secret)"},
			{config.EnvGitLabWebhookSecretFile, "... or a file holding it"},
		},
		Bind: func(fs *pflag.FlagSet) newForgeClient {
			planAuthor := fs.String("gitlab-plan-author", "", "GitLab username whose kplan plan note a merge is compared with (the CI job's access token's user); default: KPLAN_GITLAB_TOKEN's own user")
			return func(env forgeEnv) (forgeClient, error) { return newGitLabForge(env, *planAuthor) }
		},
	}
}

// gitLabForge is GitLab's forgeClient: its deploy reports, which share
// their note poster with the live plans, and the access token that
// authenticates its API calls and fetches its projects.
type gitLabForge struct {
	*gldeploys.Reporter
	tokens gitlab.TokenSource
	// secret verifies its deliveries; nil is the webhook secret.
	secret []byte
	web    string // gitlabURL: GitLab's web pages
}

// newGitLabForge reads GitLab's credentials (a token being required)
// and makes its reporter.
func newGitLabForge(env forgeEnv, planAuthor string) (forgeClient, error) {
	auth, err := config.GitLabAuthFrom(env.Getenv)
	if err != nil {
		return nil, err
	}
	var tokens gitlab.TokenSource = ghauth.Static(auth.Token)
	if auth.TokenFile != "" {
		if tokens, err = ghauth.NewFileOf("GitLab token file", auth.TokenFile); err != nil {
			return nil, err
		}
	}
	gl, err := gitlab.NewClientFrom(gitlab.APIURL(env.Config.GitLabURL), tokens)
	if err != nil {
		return nil, err
	}
	r := gldeploys.NewReporter(gl, env.Logger)
	r.PlanAuthor = planAuthor
	return gitLabForge{Reporter: r, tokens: tokens, secret: auth.WebhookSecret, web: env.Config.GitLabURL}, nil
}

// Route reads GitLab's deliveries, verified with its own secret token
// when one is set.
func (g gitLabForge) Route() forge.Route {
	return forge.Route{Forge: config.GitLab, Header: "X-Gitlab-Event", Receiver: gitlab.Receiver{}, Secret: g.secret}
}

// ChangeRefs are GitLab's merge request refs.
func (gitLabForge) ChangeRefs() (head, merge string) { return gitlab.HeadRef, gitlab.MergeRef }

func (gitLabForge) MaxCommentChars() int { return gitlab.MaxCommentChars }

// Links are GitLab's pages of repo's commits and merge requests.
func (g gitLabForge) Links(repo string) forge.Links {
	return forge.RepoLinks(g.web, repo, "/-/commit/%s", "/-/merge_requests/%d")
}

// Token implements gitmirror.TokenSource.
func (g gitLabForge) Token(ctx context.Context, repo string) (string, error) {
	return g.tokens.Token(ctx, repo)
}

// Upsert implements forge.Commenter with the deploy note's poster.
func (g gitLabForge) Upsert(ctx context.Context, repo string, number int, marker, body string) (forge.CommentResult, error) {
	return g.Notes.Upsert(ctx, repo, number, marker, body)
}
