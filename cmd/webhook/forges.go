package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/markers"
)

// forgeClient is everything the webhook needs of one forge, in one
// value: the dispatcher (forges) hands each repository's calls to its
// forge's, so that a forge is added by a row of the table (forgeTable),
// never by a branch here.
type forgeClient interface {
	// Its deliveries: the header only they carry, the receiver that
	// reads them and the secret that verifies them.
	Route() forge.Route
	// The deploy reports (Started, Finished, Interrupted, Flush) and the
	// reviewed-plan check (Pulls, ReviewedPlan, CanWrite).
	deployer.Reporter
	deployer.Reviews
	// The live plans' comments.
	forge.Commenter
	// The tokens its repositories are fetched with.
	gitmirror.TokenSource
	// ChangeRefs are the fmt patterns of the refs a change's head and
	// merge are fetched by ("" is GitHub's refs/pull/%d/*).
	ChangeRefs() (head, merge string)
	// MaxCommentChars is its limit on a comment, in characters: a live
	// plan is fitted in its own forge's limit.
	MaxCommentChars() int
	// Links are its web pages of a repository's commits and changes, for
	// the status page.
	Links(repo string) forge.Links
}

// forgeEnv is what a forge's constructor reads: the configuration, the
// environment (its credentials) and the logger.
type forgeEnv struct {
	Config *config.Config
	Getenv func(string) string
	Logger *slog.Logger
}

// newForgeClient makes a forge's client once the flags are parsed and the
// configuration read.
type newForgeClient func(forgeEnv) (forgeClient, error)

// forgeRow is a forge the webhook can serve.
type forgeRow struct {
	// Forge is its name in the configuration (Repository.Forge) and in
	// its deliveries (forge.Delivery.Forge).
	Forge string
	// Env lists the environment variables its constructor reads, for
	// --help.
	Env [][2]string
	// Bind registers its flags and returns its constructor, which the
	// parsed flags configure.
	Bind func(*pflag.FlagSet) newForgeClient
}

// forgeTable is every forge kplan-webhook can serve, one row each (in the
// order --help lists their environment). A test extends it with a forge
// of its own.
func forgeTable() []forgeRow {
	return []forgeRow{gitHubRow(), gitLabRow()}
}

// forges dispatches each repository's calls to the client of its forge
// (config.Config.ForgeOf), as Atlantis's vcs.ClientProxy does.
type forges struct {
	cfg    *config.Config
	served map[string]forgeClient
	// order is the forges served, the default one first: its receiver
	// answers a request that carries no forge's header, and Flush goes
	// in this order.
	order []string
}

// newForges builds the client of each forge a repository of the
// configuration is on, and of the default forge (the one ForgeOf names
// for a repository that names none), whose deliveries are read even
// when none of its repositories is configured.
func newForges(table []forgeRow, newClients map[string]newForgeClient, env forgeEnv) (*forges, error) {
	def := env.Config.ForgeOf("")
	f := &forges{cfg: env.Config, served: map[string]forgeClient{}, order: []string{def}}
	for _, row := range table {
		if row.Forge != def && !env.Config.HasForge(row.Forge) {
			continue
		}
		// Its errors name the forge's settings already.
		c, err := newClients[row.Forge](env)
		if err != nil {
			return nil, err
		}
		f.served[row.Forge] = c
		if row.Forge != def {
			f.order = append(f.order, row.Forge)
		}
	}
	if _, ok := f.served[def]; !ok {
		return nil, fmt.Errorf("no forge %s in the table: it is the default forge", def)
	}
	return f, nil
}

// of is the client of repo's forge; the null forge when it is not served.
func (f *forges) of(repo string) forgeClient {
	name := f.cfg.ForgeOf(repo)
	if c, ok := f.served[name]; ok {
		return c
	}
	return nullForge{forge: name}
}

// receiver reads the deliveries of every forge served, on one endpoint.
func (f *forges) receiver() forge.Receiver {
	rs := make(forge.Routes, 0, len(f.order))
	for _, name := range f.order {
		rs = append(rs, f.served[name].Route())
	}
	return rs
}

// Token implements gitmirror.TokenSource.
func (f *forges) Token(ctx context.Context, repo string) (string, error) {
	return f.of(repo).Token(ctx, repo)
}

// ChangeRefs is gitmirror.Mirrors.ChangeRefs: the refs of the forge of
// each clone URL's repository.
func (f *forges) ChangeRefs(repos map[string]string) func(string) (string, string) {
	return func(cloneURL string) (string, string) { return f.of(repos[cloneURL]).ChangeRefs() }
}

// Upsert implements forge.Commenter (the live plans' comments).
func (f *forges) Upsert(ctx context.Context, repo string, number int, marker, body string) (forge.CommentResult, error) {
	return f.of(repo).Upsert(ctx, repo, number, marker, body)
}

// Started implements deployer.Reporter.
func (f *forges) Started(ctx context.Context, t deployer.Target, sha string, pr int) {
	f.of(t.Repo).Started(ctx, t, sha, pr)
}

// Finished implements deployer.Reporter.
func (f *forges) Finished(ctx context.Context, o deployer.Outcome) {
	f.of(o.Target.Repo).Finished(ctx, o)
}

// Interrupted implements deployer.Reporter.
func (f *forges) Interrupted(ctx context.Context, t deployer.Target) (bool, error) {
	return f.of(t.Repo).Interrupted(ctx, t)
}

// Flush implements deployer.Reporter: every forge's held reports.
func (f *forges) Flush(ctx context.Context) {
	for _, name := range f.order {
		f.served[name].Flush(ctx)
	}
}

// Pulls implements deployer.Reviews.
func (f *forges) Pulls(ctx context.Context, t deployer.Target, commits []string) ([]approval.Pull, error) {
	return f.of(t.Repo).Pulls(ctx, t, commits)
}

// ReviewedPlan implements deployer.Reviews.
func (f *forges) ReviewedPlan(ctx context.Context, t deployer.Target, pr int) (*markers.Reviewed, error) {
	return f.of(t.Repo).ReviewedPlan(ctx, t, pr)
}

// CanWrite implements deployer.Reviews.
func (f *forges) CanWrite(ctx context.Context, t deployer.Target, login string) (bool, error) {
	return f.of(t.Repo).CanWrite(ctx, t, login)
}

var (
	_ deployer.Reporter     = (*forges)(nil)
	_ deployer.Reviews      = (*forges)(nil)
	_ forge.Commenter       = (*forges)(nil)
	_ gitmirror.TokenSource = (*forges)(nil)
)

// errNotServed is the answer of a forge the webhook does not serve.
var errNotServed = errors.New("forge not served by this webhook")

// nullForge stands for a forge no client serves, so that the dispatcher
// never holds a nil: it reports nothing, fetches without a token and
// answers every question of a review with errNotServed. newForges
// serves every forge a repository is on, so only a forge missing from
// the table reaches it.
type nullForge struct{ forge string }

var _ forgeClient = nullForge{}

func (n nullForge) err() error { return fmt.Errorf("%s: %w", n.forge, errNotServed) }

func (n nullForge) Route() forge.Route                                       { return forge.Route{Forge: n.forge} }
func (nullForge) ChangeRefs() (string, string)                               { return "", "" }
func (nullForge) MaxCommentChars() int                                       { return 0 }
func (nullForge) Links(string) forge.Links                                   { return forge.Links{} }
func (nullForge) Token(context.Context, string) (string, error)              { return "", nil }
func (nullForge) Started(context.Context, deployer.Target, string, int)      {}
func (nullForge) Finished(context.Context, deployer.Outcome)                 {}
func (nullForge) Interrupted(context.Context, deployer.Target) (bool, error) { return false, nil }
func (nullForge) Flush(context.Context)                                      {}

func (n nullForge) Upsert(context.Context, string, int, string, string) (forge.CommentResult, error) {
	return forge.CommentResult{}, n.err()
}

func (n nullForge) Pulls(context.Context, deployer.Target, []string) ([]approval.Pull, error) {
	return nil, n.err()
}

func (n nullForge) ReviewedPlan(context.Context, deployer.Target, int) (*markers.Reviewed, error) {
	return nil, n.err()
}

func (n nullForge) CanWrite(context.Context, deployer.Target, string) (bool, error) {
	return false, n.err()
}

// Links are the web pages of repo's forge, for the status page.
func (f *forges) Links(repo string) forge.Links { return f.of(repo).Links(repo) }

// maxCommentChars is the comment limit of repo's forge, in characters:
// a live plan on a GitLab merge request is fitted in GitLab's limit, not
// cut at GitHub's.
func (f *forges) maxCommentChars(repo string) int { return f.of(repo).MaxCommentChars() }
