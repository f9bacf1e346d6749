// Package gitlabci is kplan's GitLab CI front end: in a merge request
// pipeline it plans what merging the merge request will do, prints the
// plan to the job log, writes the full report for the job's artifacts,
// keeps one note on the merge request up to date, and fails the job on
// the overlays the change breaks (and, if asked, on dangerous changes).
// The GitLab CI/CD component in templates/kplan-plan.yml runs it; it is
// configured by CI/CD variables (Settings) and reads the pipeline from
// GitLab's predefined variables (internal/forge/gitlab.FromCI).
package gitlabci

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kplan-dev/kplan/internal/batchgc"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/gate"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/report"
)

// The CI/CD variables kplan reads (the component's inputs set them).
const (
	EnvToken               = "KPLAN_GITLAB_TOKEN" // a project or group access token (api scope) that posts the note
	EnvOverlays            = "KPLAN_OVERLAYS"
	EnvExclude             = "KPLAN_EXCLUDE"
	EnvWorkDir             = "KPLAN_WORKING_DIRECTORY"
	EnvFailOnError         = "KPLAN_FAIL_ON_ERROR"
	EnvFailOnDangerous     = "KPLAN_FAIL_ON_DANGEROUS"
	EnvAllowDangerousLabel = "KPLAN_ALLOW_DANGEROUS_LABEL"
	EnvComment             = "KPLAN_COMMENT"
	EnvEnableHelm          = "KPLAN_ENABLE_HELM"
	EnvLoadRestrictor      = "KPLAN_LOAD_RESTRICTOR"
	EnvCacheDir            = "KPLAN_CACHE_DIR"
	EnvReportDir           = "KPLAN_REPORT_DIR"
	EnvDiffStyle           = "KPLAN_DIFF_STYLE"
	EnvIgnoreFields        = "KPLAN_IGNORE_FIELDS"
	EnvIgnoreKinds         = "KPLAN_IGNORE_KINDS"
	EnvRemoteHosts         = "KPLAN_REMOTE_HOSTS"
	EnvForkRemoteHosts     = "KPLAN_FORK_REMOTE_HOSTS"
)

// remote is the checkout's remote, as GitLab Runner names it; its URL
// carries the job token, which fetches what the plan needs.
const remote = "origin"

// Settings are the job's CI/CD variables, read.
type Settings struct {
	Token                        string
	Include, Exclude             []string
	WorkDir, CacheDir, ReportDir string
	FailOnError, FailOnDangerous bool
	AllowDangerousLabel          string
	Comment, EnableHelm          bool
	LoadRestrictorNone           bool
	DiffStyle                    string
	Ignore                       inventorydiff.IgnoreRules
	RemoteHosts, ForkRemoteHosts []string
}

// ReadSettings reads the KPLAN_* variables; projectDir is CI_PROJECT_DIR,
// which relative directories are relative to (GitLab's cache: and
// artifacts: take paths inside it).
func ReadSettings(getenv func(string) string, projectDir string) (Settings, error) {
	s := Settings{
		Token: getenv(EnvToken), Include: render.Patterns(getenv(EnvOverlays)), Exclude: render.Patterns(getenv(EnvExclude)),
		WorkDir: getenv(EnvWorkDir), AllowDangerousLabel: getenv(EnvAllowDangerousLabel), DiffStyle: getenv(EnvDiffStyle),
		Ignore:      inventorydiff.IgnoreRules{Fields: render.Patterns(getenv(EnvIgnoreFields)), Kinds: render.Patterns(getenv(EnvIgnoreKinds)), Source: "CI/CD variable"},
		RemoteHosts: render.Patterns(getenv(EnvRemoteHosts)), ForkRemoteHosts: render.Patterns(getenv(EnvForkRemoteHosts)),
		CacheDir:  inside(projectDir, cmp.Or(getenv(EnvCacheDir), ".kplan-cache")),
		ReportDir: inside(projectDir, cmp.Or(getenv(EnvReportDir), "kplan-report")),
	}
	for _, b := range []struct {
		name string
		def  bool
		dst  *bool
	}{{EnvFailOnError, true, &s.FailOnError}, {EnvComment, true, &s.Comment}, {EnvEnableHelm, false, &s.EnableHelm}, {EnvFailOnDangerous, false, &s.FailOnDangerous}} {
		v := getenv(b.name)
		if v == "" {
			*b.dst = b.def
			continue
		}
		var err error
		if *b.dst, err = strconv.ParseBool(v); err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", b.name, v)
		}
	}
	if err := report.CheckDiffStyle(s.DiffStyle); err != nil {
		return s, fmt.Errorf("%s: %w", EnvDiffStyle, err)
	}
	var err error
	if s.LoadRestrictorNone, err = render.ParseLoadRestrictor(getenv(EnvLoadRestrictor)); err != nil {
		return s, fmt.Errorf("%s %w", EnvLoadRestrictor, err)
	}
	if err := s.planOptions().Validate(); err != nil {
		return s, plan.NameOptions(err, map[string]string{"Ignore": "CI/CD variables " + EnvIgnoreFields + "/" + EnvIgnoreKinds})
	}
	return s, nil
}

func inside(projectDir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(projectDir, p)
}

func (s Settings) planOptions() plan.Options {
	return plan.Options{
		Filter: render.Filter{Include: s.Include, Exclude: s.Exclude},
		Render: render.Options{LoadRestrictorNone: s.LoadRestrictorNone, EnableHelm: s.EnableHelm},
		Ignore: s.Ignore,
	}
}

// gateNames are GitLab's words in the job's failures.
var gateNames = gate.Names{Change: "merge request", Comment: "the plan note",
	NoFailOnError:     "set the CI/CD variable " + EnvFailOnError + " (the component's input fail-on-error) to false",
	NoFailOnDangerous: "set " + EnvFailOnDangerous + " (fail-on-dangerous) to false",
	LabelRerun:        "then run the pipeline again: GitLab starts none for a label"}

// Run is the GitLab CI entry point, with the job's environment.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	batchgc.Tune(getenv)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(args) > 0 {
		return fmt.Errorf("kplan-gitlab takes no arguments (%q): it is configured by CI/CD variables (docs/gitlab.md)", args)
	}
	pl, err := gitlab.FromCI(getenv)
	if err != nil {
		return err
	}
	in, err := ReadSettings(getenv, cmp.Or(pl.ProjectDir, "."))
	if err != nil {
		return err
	}
	dir := cmp.Or(pl.ProjectDir, ".")
	if in.WorkDir != "" && in.WorkDir != "." {
		dir = filepath.Join(dir, in.WorkDir)
	}
	g := gitcli.Repo{Dir: dir}
	c, err := commitsOf(ctx, g, pl)
	if err != nil {
		return err
	}
	log.Info("commits planned", "pipeline", pl.Kind, "rule", c.rule, "base", c.base, "head", c.head)

	opts := in.planOptions()
	policy, err := remotePolicy(in, pl.Change)
	if err != nil {
		return err
	}
	if pl.Change.Fork {
		log.Info("the merge request comes from a fork: renders fetch only from "+EnvForkRemoteHosts, "hosts", in.ForkRemoteHosts)
	}
	opts.Render.Remote = policy
	gitCache := gitbase.New(filepath.Join(os.TempDir(), "kplan-git"), policy)
	defer gitCache.Close()
	opts.Render.Git = gitCache
	opts.RepoDir, opts.Base, opts.Head, opts.BaseLabel, opts.HeadLabel = g.Dir, c.base, c.head, c.baseLabel, c.headLabel
	opts.Logger, opts.CacheDir = log, in.CacheDir
	p, err := plan.Run(ctx, opts)
	if err != nil {
		return err
	}

	ropts := report.Options{DiffStyle: in.DiffStyle, DangerGate: report.DangerGate{Fails: in.FailOnDangerous, Label: in.AllowDangerousLabel}}
	if ropts.DangerGate.Fails && ropts.DangerGate.Label != "" {
		ropts.DangerGate.Acknowledged = pl.Change.HasLabel(ropts.DangerGate.Label)
	}
	if err := report.TextWith(stdout, p, ropts); err != nil {
		return err
	}
	if err := writeReports(in.ReportDir, p, ropts); err != nil {
		return err
	}
	copts := ropts
	copts.Complete = "the job's artifact `" + filepath.Base(in.ReportDir) + "/kplan-report.md`"
	if pl.JobURL != "" {
		copts.Complete = "[the job](" + pl.JobURL + ")'s artifact `" + filepath.Base(in.ReportDir) + "/kplan-report.md`"
	}
	// The reviewed-plan marker lets the webhook prove, on merge, that it
	// applies what this note showed.
	reviewed, err := markers.ReviewedMarker(report.Reviewed(p))
	if err != nil {
		return fmt.Errorf("the reviewed-plan marker: %w", err)
	}
	md, _ := report.MarkdownFit(p, markers.PlanMarker+"\n"+reviewed+"\n", gitlab.MaxCommentChars, copts)
	if in.Comment {
		if err := note(ctx, pl, in.Token, md, log); err != nil {
			return err
		}
	}
	return gate.Check(p, in.FailOnError, ropts.DangerGate, gateNames, log)
}

// writeReports writes the complete report (Markdown and JSON) where the
// component's artifacts: keeps them.
func writeReports(dir string, p *inventorydiff.Plan, opts report.Options) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the report directory: %w", err)
	}
	full, _ := report.MarkdownFit(p, "", math.MaxInt, opts)
	data, err := report.JSONWith(p, opts)
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(filepath.Join(dir, "kplan-report.md"), []byte(full), 0o644),
		os.WriteFile(filepath.Join(dir, "kplan-plan.json"), data, 0o644))
}

// note keeps the plan as the merge request's one kplan note, found
// among the token's own notes. A token that may not write notes is a
// warning: the job log and the artifact have the plan.
func note(ctx context.Context, pl gitlab.Pipeline, token, md string, log *slog.Logger) error {
	if token == "" {
		log.Warn("no " + EnvToken + ": the plan is in the job log and its artifact only (CI_JOB_TOKEN cannot write notes; give the job a project access token with the api scope)")
		return nil
	}
	commenter, err := gitlab.NewCommenter(pl.APIURL, token)
	if err != nil {
		return err
	}
	res, err := commenter.Upsert(ctx, pl.Change.Repo, pl.Change.Number, markers.PlanMarker, md)
	if errors.Is(err, forge.ErrNoPermission) {
		log.Warn("the token cannot write notes on the merge request: the plan is in the job log and its artifact only", "mr", pl.Change.Number)
		return nil
	}
	if err != nil {
		return fmt.Errorf("note on %s!%d: %w", pl.Change.Repo, pl.Change.Number, err)
	}
	verb := "updated"
	if res.Created {
		verb = "posted"
	}
	log.Info("plan note "+verb, "note", res.URL)
	return nil
}

// remotePolicy is the network policy of the renders: a fork's merge
// request is written by someone the project does not trust, so its
// renders fetch only from KPLAN_FORK_REMOTE_HOSTS (by default nothing),
// as a fork's pull request on GitHub.
func remotePolicy(in Settings, mr forge.Change) (*netpolicy.Policy, error) {
	if mr.Fork {
		return netpolicy.New(in.ForkRemoteHosts, "the CI/CD variable "+EnvForkRemoteHosts+": %s (merge requests from forks fetch only from these)")
	}
	return netpolicy.New(in.RemoteHosts, "the CI/CD variable "+EnvRemoteHosts+": %s")
}
