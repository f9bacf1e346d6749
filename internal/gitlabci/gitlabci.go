// Package gitlabci is kplan's GitLab CI front end: in a merge request
// pipeline it plans what merging the merge request will do, prints the
// plan to the job log, writes the full report for the job's artifacts,
// keeps one note on the merge request up to date, and fails the job on
// the overlays the change breaks (and, if asked, on dangerous changes).
// The GitLab CI/CD component in templates/kplan-plan.yml runs it; it is
// configured by CI/CD variables (Settings) and reads the pipeline from
// GitLab's predefined variables (internal/forge/gitlab.FromCI). It is an
// adapter onto the flow the Action shares (internal/prflow): what is
// GitLab's own here is the variables' names, the commits a pipeline
// plans (commits.go), the artifact directory and the note.
package gitlabci

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kplan-dev/kplan/internal/batchgc"
	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/gate"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/prflow"
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

// variables are the flow's settings the job reads (prflow.Inputs, by the
// component's input names) and the CI/CD variables that carry them; the
// flow's other settings are the Action's alone.
var variables = map[string]string{
	"overlays": EnvOverlays, "exclude": EnvExclude, "working-directory": EnvWorkDir,
	"fail-on-error": EnvFailOnError, "fail-on-dangerous": EnvFailOnDangerous, "allow-dangerous-label": EnvAllowDangerousLabel,
	"comment": EnvComment, "enable-helm": EnvEnableHelm, "load-restrictor": EnvLoadRestrictor, "cache-dir": EnvCacheDir,
	"diff-style": EnvDiffStyle, "ignore-fields": EnvIgnoreFields, "ignore-kinds": EnvIgnoreKinds,
	"remote-hosts": EnvRemoteHosts, "fork-remote-hosts": EnvForkRemoteHosts,
}

// words name the settings as the job's CI/CD variables.
var words = prflow.Words{Name: func(input string) string { return variables[input] }, Kind: "CI/CD variable"}

// Settings are the job's CI/CD variables, read.
type Settings struct {
	prflow.Settings
	Token string
	// ReportDir is where the complete reports are written, kept as the
	// job's artifact.
	ReportDir string
}

// ReadSettings reads the KPLAN_* variables; projectDir is CI_PROJECT_DIR,
// which relative directories are relative to (GitLab's cache: and
// artifacts: take paths inside it).
func ReadSettings(getenv func(string) string, projectDir string) (Settings, error) {
	get := func(input string) string {
		if v, ok := variables[input]; ok {
			return getenv(v)
		}
		return ""
	}
	s := Settings{Token: getenv(EnvToken), ReportDir: inside(projectDir, cmp.Or(getenv(EnvReportDir), "kplan-report"))}
	var err error
	if s.Settings, err = prflow.Read(get, words, ""); err != nil {
		return s, err
	}
	s.CacheDir = inside(projectDir, cmp.Or(s.CacheDir, ".kplan-cache"))
	return s, nil
}

func inside(projectDir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(projectDir, p)
}

// gateNames are GitLab's words in the job's failures.
var gateNames = gate.Names{Change: "merge request", Comment: "the plan note",
	NoFailOnError:     "set the CI/CD variable " + EnvFailOnError + " (the component's input fail-on-error) to false",
	NoFailOnDangerous: "set " + EnvFailOnDangerous + " (fail-on-dangerous) to false",
	LabelRerun:        "then run the pipeline again: GitLab starts none for a label"}

// Run is the GitLab CI entry point, with the job's environment.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	gc := batchgc.Tune(getenv)
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
	change := pl.Change
	// Charts from private registries and repositories: the credentials
	// a login step left where helm and docker keep them (prflow drops
	// them for an untrusted change).
	in.Settings.Plan.Render.ChartAuth = charts.Standard(getenv)
	job := &prflow.Job{
		Settings: in.Settings, Words: words, Log: log, GC: gc, Stdout: stdout, Repo: g, Change: &change,
		TempDir: os.TempDir(), CacheDir: in.CacheDir,
		Commits: func(ctx context.Context) (prflow.Commits, error) { return commitsOf(ctx, g, pl) },
		WriteFile: func(name string, data []byte) (string, error) {
			if err := os.MkdirAll(in.ReportDir, 0o755); err != nil {
				return "", fmt.Errorf("the report directory: %w", err)
			}
			path := filepath.Join(in.ReportDir, name)
			return path, os.WriteFile(path, data, 0o644)
		},
		Published: func(*inventorydiff.Plan, prflow.Files, report.Options) (string, error) {
			dir := filepath.Base(in.ReportDir)
			artifact := "artifact `" + dir + "/kplan-report.md`"
			if pl.JobURL != "" {
				// GitLab shows an HTML artifact as a page at its file URL.
				page := pl.JobURL + "/artifacts/file/" + dir + "/kplan-report.html"
				return "[the job](" + pl.JobURL + ")'s " + artifact + ", and [the HTML report](" + page + ") to browse and filter by target, kind and change", nil
			}
			return "the job's " + artifact + " (and `" + dir + "/kplan-report.html` to browse and filter by target, kind and change)", nil
		},
		MaxCommentChars: gitlab.MaxCommentChars,
		Post:            func(ctx context.Context, md string) error { return note(ctx, pl, in.Token, md, log) },
		Gate:            gateNames,
		Remote:          remote,
	}
	if in.Token != "" {
		// What each target's cluster runs, from the deployments kplan's
		// webhook made.
		if d, err := gitlab.NewDeployed(pl.APIURL, in.Token); err == nil {
			job.Deploys = d
		}
	}
	if change.Fork {
		job.Untrusted = "the merge request comes from a fork"
	}
	return job.Run(ctx)
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
