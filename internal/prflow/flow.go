package prflow

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/gate"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/internal/shard"
	"github.com/kplan-dev/kplan/internal/version"
)

// Job is one CI run of the flow: the settings, and what only the front
// end knows (its change, its commits, where its files and comment go),
// as values and hooks, the way Terraform's commands hand their views
// the output.
type Job struct {
	Settings Settings
	Words    Words
	Log      *slog.Logger
	// GC is the job's collector settings (batchgc.Tune), which a small
	// plan tightens.
	GC plan.GC
	// Stdout is the job's log, where the plan is printed as text.
	Stdout io.Writer
	// Repo is the checkout, in the working directory.
	Repo gitcli.Repo
	// Change is the change under review; nil on a push (the Action plans
	// pushes to warm the cache its pull requests read).
	Change *forge.Change
	// Untrusted, when not "", says why the change's content is written
	// by someone the repository does not trust (a fork's; any
	// pull_request_target run): its renders fetch only from
	// ForkRemoteHosts.
	Untrusted string
	// TempDir holds the git repositories remote bases name, for this job
	// only.
	TempDir string
	// CacheDir is the render cache, resolved as the job's cache keeps it;
	// "" keeps none.
	CacheDir string
	// Commits chooses the two commits whose difference merging the
	// change makes.
	Commits func(ctx context.Context) (Commits, error)
	// Group frames the render in the job's log (the Action's log
	// groups); nil frames nothing.
	Group func(title string) (end func())
	// WritePart stores a shard's part for the job that merges the parts
	// (Settings.Plan.Shard set): then nothing is reported.
	WritePart func(shard.Part) error
	// WriteFile keeps a report file where the job keeps them, and says
	// its path.
	WriteFile func(name string, data []byte) (path string, err error)
	// Published is told the complete reports' paths and says where they
	// are, for a comment that has to leave something out
	// (report.Options.Complete). The Action shows the plan in its job
	// summary, outputs and annotations here.
	Published func(p *inventorydiff.Plan, files Files, opts report.Options) (complete string, err error)
	// MaxCommentChars is the forge's limit on a comment
	// (github.MaxCommentChars, gitlab.MaxCommentChars).
	MaxCommentChars int
	// Post keeps body as the change's one plan comment.
	Post func(ctx context.Context, body string) error
	// Deploys reads from the forge what each target's cluster runs, for
	// the comment to say when that is not the plan's base; nil says
	// nothing.
	Deploys Deploys
	// Remote is the checkout's remote, which the commits the checkout
	// lacks are fetched from (a target's deployed commit, the history
	// down to it); "" fetches nothing.
	Remote string
	// Gate names the job's words in its failures.
	Gate gate.Names
}

// Files are the paths of the complete reports a job keeps.
type Files struct {
	Markdown string // kplan-report.md: every field change, however large
	HTML     string // kplan-report.html: the same to browse and filter
	JSON     string // kplan-plan.json
}

// Run plans the change and reports the plan.
func (j *Job) Run(ctx context.Context) error {
	p, err := j.Plan(ctx)
	if err != nil || p == nil {
		return err // a shard's part is written: the merge job reports
	}
	return j.Report(ctx, p)
}

// Plan chooses the commits and plans the change under the settings'
// network policy, through the cache; a shard writes its part and
// returns no plan.
func (j *Job) Plan(ctx context.Context) (*inventorydiff.Plan, error) {
	c, err := j.Commits(ctx)
	if err != nil {
		return nil, err
	}
	j.Log.Info("commits planned", "rule", c.Rule, "base", c.Base, "base_label", c.BaseLabel, "head", c.Head, "head_label", c.HeadLabel)
	opts := j.Settings.Plan
	policy, err := j.remotePolicy()
	if err != nil {
		return nil, err
	}
	opts.Render.Remote = policy
	opts.Render.ChartAuth = j.chartAuth()
	// Git remote bases are fetched for this job only, from the hosts the
	// policy allows.
	gitCache := gitbase.New(filepath.Join(j.TempDir, "kplan-git"), policy)
	defer gitCache.Close()
	opts.Render.Git = gitCache
	opts.RepoDir, opts.Base, opts.Head, opts.BaseLabel, opts.HeadLabel = j.Repo.Dir, c.Base, c.Head, c.BaseLabel, c.HeadLabel
	// A push's plan renders every overlay through the cache, so that
	// the branch's changes find their base side there.
	opts.Logger, opts.CacheDir, opts.Warm, opts.GC = j.Log, j.CacheDir, j.Change == nil && j.CacheDir != "", j.GC
	end := func() {}
	if j.Group != nil {
		end = j.Group("kplan: render and compare the overlays the change can affect")
	}
	if opts.Shard.On() {
		// The shards of one run must plan the same overlays alike (the
		// same settings, the same network policy): the part carries
		// opts.Fingerprint for the merge job to compare.
		part, err := plan.Share(ctx, opts, version.String())
		end()
		if err != nil {
			return nil, plan.NameFilter(err, j.pattern)
		}
		return nil, j.WritePart(part)
	}
	p, err := plan.Run(ctx, opts)
	end()
	return p, plan.NameFilter(err, j.pattern)
}

// pattern names a filter pattern as the settings give it.
func (j *Job) pattern(pattern string, exclude bool) string {
	if exclude {
		return fmt.Sprintf("%s %q", j.Words.Say("exclude"), pattern)
	}
	return fmt.Sprintf("%s %q", j.Words.Say("overlays"), pattern)
}

// chartAuth is the credentials the plan's chart pulls may send: the
// settings', but none for a change the repository does not trust, which
// could name a private chart for its plan to show.
func (j *Job) chartAuth() *charts.Auth {
	a := j.Settings.Plan.Render.ChartAuth
	if j.Untrusted != "" && a != nil {
		j.Log.Info(j.Untrusted + ": charts are pulled without credentials")
		return nil
	}
	return a
}

// remotePolicy is the network policy of the plan's renders: an untrusted
// change's kustomizations are written by someone the repository does not
// trust, so they fetch only from fork-remote-hosts, by default nothing;
// others from remote-hosts.
func (j *Job) remotePolicy() (*netpolicy.Policy, error) {
	s := j.Settings
	var (
		p   *netpolicy.Policy
		err error
	)
	if j.Untrusted != "" {
		j.Log.Info(j.Untrusted+": renders fetch only from "+j.Words.Say("fork-remote-hosts"), "hosts", s.ForkRemoteHosts)
		p, err = netpolicy.New(s.ForkRemoteHosts, "the "+j.Words.Say("fork-remote-hosts")+": %s ("+j.Untrusted+")")
	} else {
		p, err = netpolicy.New(s.RemoteHosts, "the "+j.Words.Say("remote-hosts")+": %s")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", j.Words.sayPair("remote-hosts", "fork-remote-hosts"), err)
	}
	return p, nil
}

// Report prints the plan to the job's log, keeps the complete reports,
// posts the comment and says whether the job passes. Each report notes
// the targets whose cluster runs another commit than the plan's base
// (running.go). Complete first,
// then smaller: files with everything, then the comment, fitted in the
// forge's limit, pointing at them when it has to leave something out.
// Only what this change breaks fails the job: an overlay that fails on
// base too would fail every change until someone fixes it.
func (j *Job) Report(ctx context.Context, p *inventorydiff.Plan) error {
	s := j.Settings
	opts := report.Options{DiffStyle: s.DiffStyle, DangerGate: j.dangerGate(), Running: j.running(ctx, p)}
	if err := report.TextWith(j.Stdout, p, opts); err != nil {
		return err
	}
	full, _ := report.MarkdownFit(p, "", math.MaxInt, opts)
	var (
		files Files
		err   error
	)
	if files.Markdown, err = j.WriteFile("kplan-report.md", []byte(full)); err != nil {
		return fmt.Errorf("write the Markdown report: %w", err)
	}
	var page bytes.Buffer
	if err := report.Write(&page, p, "html", opts); err != nil {
		return err
	}
	if files.HTML, err = j.WriteFile("kplan-report.html", page.Bytes()); err != nil {
		return fmt.Errorf("write the HTML report: %w", err)
	}
	data, err := report.JSONWith(p, opts)
	if err != nil {
		return err
	}
	if files.JSON, err = j.WriteFile("kplan-plan.json", data); err != nil {
		return fmt.Errorf("write the JSON report: %w", err)
	}
	copts := opts
	if copts.Complete, err = j.Published(p, files, opts); err != nil {
		return err
	}
	// The reviewed-plan marker lets the webhook prove, on merge, that it
	// applies what this comment showed.
	reviewed, err := markers.ReviewedMarker(report.Reviewed(p))
	if err != nil {
		return fmt.Errorf("the reviewed-plan marker: %w", err)
	}
	md, _ := report.MarkdownFit(p, markers.PlanMarker+"\n"+reviewed+"\n", j.MaxCommentChars, copts)
	if s.Comment && j.Change != nil {
		if err := j.Post(ctx, md); err != nil {
			return err
		}
	}
	return gate.Check(p, s.FailOnError, opts.DangerGate, j.Gate, j.Log)
}

// dangerGate is what fail-on-dangerous means for this change: the labels
// are the event's (a label added is a new run).
func (j *Job) dangerGate() report.DangerGate {
	g := report.DangerGate{Fails: j.Settings.FailOnDangerous, Label: j.Settings.AllowDangerousLabel}
	if g.Fails && g.Label != "" && j.Change != nil {
		g.Acknowledged = j.Change.HasLabel(g.Label)
	}
	return g
}

// Commits are the two commits a job plans, how the plan names them, and
// why these two (for the log).
type Commits struct {
	Base, Head           string
	BaseLabel, HeadLabel string
	Rule                 string
}

// Short abbreviates a SHA as the forges show it.
func Short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
