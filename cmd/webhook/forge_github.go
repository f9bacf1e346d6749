package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/github/deploys"
	"github.com/kplan-dev/kplan/internal/ghauth"
)

// gitHubRow is GitHub's forge: served always, as the default forge of
// the configuration.
func gitHubRow() forgeRow {
	return forgeRow{
		Forge: config.GitHub,
		Env: [][2]string{
			{config.EnvGitHubToken, "a token for GitHub's API and git"},
			{config.EnvGitHubTokenFile, "... or a file holding it, re-read when it changes"},
			{config.EnvGitHubAppID, "a GitHub App instead of a token: its ID,"},
			{config.EnvGitHubAppPrivateKey, "its private key (PEM)"},
			{config.EnvGitHubAppPrivateKeyFile, "... or the key's file"},
			{config.EnvGitHubAppInstallationID, "the installation to act as (default: looked up per repository)"},
		},
		Bind: func(fs *pflag.FlagSet) newForgeClient {
			planAuthor := fs.String("plan-author", "github-actions[bot]", "login whose kplan plan comment a merge is compared with (the Action's token's user)")
			return func(env forgeEnv) (forgeClient, error) { return newGitHubForge(env, *planAuthor) }
		},
	}
}

// gitHubForge is GitHub's forgeClient: its deploy reports, which share
// their comment poster with the live plans, and one source of tokens for
// the API client and the git mirror.
type gitHubForge struct {
	*deploys.Reporter
	tokens ghauth.Source
	web    string // gitBaseURL: GitHub's web pages
}

// newGitHubForge reads GitHub's credentials: a token, a token file
// re-read when it changes, or a GitHub App whose installation tokens are
// minted and refreshed (internal/ghauth).
func newGitHubForge(env forgeEnv, planAuthor string) (forgeClient, error) {
	auth, err := config.GitHubAuthFrom(env.Getenv)
	if err != nil {
		return nil, err
	}
	tokens, err := ghauth.New(auth, env.Config.APIBaseURL, nil)
	if err != nil {
		return nil, err
	}
	gh, err := github.NewClient(env.Config.APIBaseURL, ghauth.Transport(tokens, nil))
	if err != nil {
		return nil, fmt.Errorf("%s: apiBaseURL: %w", env.Config.File, err)
	}
	env.Logger.Info("GitHub credentials", "kind", ghauth.Describe(tokens))
	r := deploys.NewReporter(gh, env.Logger)
	r.PlanAuthor = planAuthor
	return gitHubForge{Reporter: r, tokens: tokens, web: env.Config.GitBaseURL}, nil
}

// Route reads GitHub's deliveries, verified with the webhook secret.
func (gitHubForge) Route() forge.Route {
	return forge.Route{Forge: config.GitHub, Header: "X-GitHub-Event", Receiver: github.Receiver{}}
}

// ChangeRefs are GitHub's refs/pull/N/*, the mirror's default.
func (gitHubForge) ChangeRefs() (head, merge string) { return "", "" }

func (gitHubForge) MaxCommentChars() int { return github.MaxCommentChars }

// Links are GitHub's pages of repo's commits and pull requests, on
// gitBaseURL (GitHub Enterprise's own host).
func (g gitHubForge) Links(repo string) forge.Links {
	return forge.RepoLinks(g.web, repo, "/commit/%s", "/pull/%d")
}

// Token implements gitmirror.TokenSource.
func (g gitHubForge) Token(ctx context.Context, repo string) (string, error) {
	return g.tokens.Token(ctx, repo)
}

// Upsert implements forge.Commenter with the deploy comment's poster.
func (g gitHubForge) Upsert(ctx context.Context, repo string, number int, marker, body string) (forge.CommentResult, error) {
	return g.Comments.Upsert(ctx, repo, number, marker, body)
}
