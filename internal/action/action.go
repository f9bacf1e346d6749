// Package action is the GitHub Action: on a pull request it plans what
// merging it will do (see commits.go for which two commits), posts or
// edits one PR comment, and writes the job summary and outputs. It is an
// adapter onto the flow the GitLab job shares (internal/prflow): it maps
// the inputs and the event onto the flow's settings and change, and keeps
// what only GitHub has (the job summary, annotations, step outputs,
// sharded runs, workflow commands stopped around repository text).
package action

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/batchgc"
	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/gate"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/prflow"
	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/internal/shard"
)

// inputs are the action.yml inputs: the flow's settings (prflow.Read)
// and the Action's own.
type inputs struct {
	prflow.Settings
	token string
	// commentAuthor is whom token posts as when GitHub will not say (an
	// App's installation token); "" is the workflow token's
	// github-actions[bot].
	commentAuthor string
	// merge is the directory holding the parts of a sharded run: the
	// plan is theirs, merged, and nothing is rendered.
	merge string
}

// autoCacheDir is the cache-dir input's default: the render cache under
// the runner's temporary directory, where action.yml's cache steps
// restore and save it.
const autoCacheDir = "auto"

// words name the settings as action.yml's inputs.
var words = prflow.Words{Name: func(input string) string { return input }, Kind: "Action input"}

func readInputs(a *githubactions.Action) (inputs, error) {
	in := inputs{
		token:         a.GetInput("github-token"),
		commentAuthor: strings.TrimSpace(a.GetInput("comment-author")),
		merge:         strings.TrimSpace(a.GetInput("merge")),
	}
	var err error
	if in.Settings, err = prflow.Read(a.GetInput, words, a.Getenv("GITHUB_REPOSITORY")); err != nil {
		return in, err
	}
	if in.Plan.Shard.On() && in.merge != "" {
		return in, errors.New("inputs shard and merge: a step either plans a shard or merges the parts; set one")
	}
	return in, nil
}

// Run is the Action's entrypoint, with the runner's environment.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	gc := batchgc.Tune(getenv)
	rl, err := newRunnerLog(stdout)
	if err != nil {
		return err
	}
	defer rl.Close()
	// From here, stdout is repository text, printed with workflow
	// commands stopped; kplan's own commands go through a.
	stdout = rl
	a := githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(rl.Commands()))
	log := slog.New(slog.NewTextHandler(inertLog{stderr}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	in, err := readInputs(a)
	if err != nil {
		return err
	}
	if in.token != "" {
		a.AddMask(in.token)
	}
	gctx, err := a.Context()
	if err != nil {
		return fmt.Errorf("read the workflow context: %w", err)
	}
	ev, err := readEvent(gctx)
	if err != nil {
		return err
	}
	pr := ev.change

	dir := gctx.Workspace
	if dir == "" {
		dir = "."
	}
	if in.WorkDir != "" && in.WorkDir != "." {
		dir = filepath.Join(dir, in.WorkDir)
	}
	g := gitcli.Repo{Dir: dir, Env: fetchAuth(ctx, dir, gctx.ServerURL, in.token)}
	temp := cmp.Or(getenv("RUNNER_TEMP"), os.TempDir())
	// Charts from private registries and repositories: the credentials
	// a login step left where helm and docker keep them (prflow drops
	// them for an untrusted change).
	in.Settings.Plan.Render.ChartAuth = charts.Standard(getenv)
	job := &prflow.Job{
		Settings: in.Settings, Words: words, Log: log, GC: gc, Stdout: stdout, Repo: g, Change: pr,
		TempDir: temp, CacheDir: cacheDir(in.CacheDir, temp, gctx.Workspace),
		Commits: func(ctx context.Context) (prflow.Commits, error) {
			if pr != nil {
				return planCommits(ctx, g, gctx.EventName, pr)
			}
			return pushCommits(ctx, g, ev.branch)
		},
		Group:     func(title string) func() { a.Group(title); return a.EndGroup },
		WritePart: func(part shard.Part) error { return writePart(a, part, in.Plan.Shard, getenv, log) },
		WriteFile: func(name string, data []byte) (string, error) { return writeTempFile(name, data, getenv) },
		Published: func(p *inventorydiff.Plan, files prflow.Files, opts report.Options) (string, error) {
			annotate(a, p, annotationPrefix(ctx, g, gctx.Workspace))
			return publish(a, p, files, opts, getenv), nil
		},
		MaxCommentChars: github.MaxCommentChars,
		Post: func(ctx context.Context, md string) error {
			return comment(ctx, a, getenv, in.token, commentAuthor(in, getenv), ev.repo, pr.Number, md, log)
		},
		Gate:   gateNames,
		Remote: remote,
	}
	if pr != nil && in.token != "" {
		// What each target's cluster runs, from the Deployments kplan's
		// webhook made: the token needs deployments: read.
		if d, err := github.NewDeployed(getenv("GITHUB_API_URL"), in.token); err == nil {
			job.Deploys = d
		}
	}
	if untrusted(gctx.EventName, pr) {
		job.Untrusted = "the head is from a fork or the run is pull_request_target"
	}
	if in.merge == "" {
		return job.Run(ctx)
	}
	p, err := mergeParts(resolve(gctx.Workspace, in.merge), log)
	if err != nil {
		return err
	}
	return job.Report(ctx, p)
}

// publish shows the plan where GitHub shows a run's: the job summary
// (1 MiB) keeping every field change, and the step's outputs; it says
// where the complete report is, for the comment (65,536 characters).
func publish(a *githubactions.Action, p *inventorydiff.Plan, files prflow.Files, opts report.Options, getenv func(string) string) string {
	artifact := "the file `kplan-report.md`, and `kplan-report.html` to browse and filter by target, kind and change (the `report-file` and `report-html` outputs: upload them with actions/upload-artifact to keep them)"
	sopts := opts
	sopts.Complete = artifact
	summary, _ := report.MarkdownFitBytes(p, "", github.MaxSummaryBytes, sopts)
	a.AddStepSummary(summary)
	t := p.Totals
	a.SetOutput("added", strconv.Itoa(t.Added))
	a.SetOutput("changed", strconv.Itoa(t.Changed))
	a.SetOutput("pruned", strconv.Itoa(t.Pruned))
	a.SetOutput("has-changes", strconv.FormatBool(t.ChangedOverlays > 0))
	a.SetOutput("dangerous", strconv.FormatBool(t.Dangerous > 0))
	a.SetOutput("failed", strconv.FormatBool(len(p.IntroducedFailures()) > 0))
	a.SetOutput("report-json", files.JSON)
	a.SetOutput("report-file", files.Markdown)
	a.SetOutput("report-html", files.HTML)
	if u := runURL(getenv); u != "" {
		return "[in the job summary](" + u + ") and in " + artifact
	}
	return artifact
}

// cacheDir resolves the cache-dir input as action.yml's cache step does:
// auto is under the runner's temporary directory, a relative path is
// against the workspace (as actions/cache resolves its path), "" is none.
func cacheDir(dir, temp, workspace string) string {
	switch {
	case dir == autoCacheDir:
		return filepath.Join(temp, "kplan-cache")
	case dir != "":
		return resolve(workspace, dir)
	}
	return ""
}

// gateNames are the Action's words in the step's failures.
var gateNames = gate.Names{Change: "pull request", Comment: "the plan comment",
	NoFailOnError: "set fail-on-error: false", NoFailOnDangerous: "set fail-on-dangerous: false",
	LabelRerun: "the workflow must run on pull_request types labeled/unlabeled"}

// resolve makes a path of an input absolute against the workspace.
func resolve(workspace, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(workspace, p)
}

// fetchAuth lets git fetch the commits to plan with the Action's token, so
// that a checkout with persist-credentials: false, or of a private
// repository, works. A checkout that kept its credentials already sends
// them (a second Authorization header would be refused), so then nothing
// is added.
func fetchAuth(ctx context.Context, dir, serverURL, token string) []string {
	if token == "" {
		return nil
	}
	if out, err := (gitcli.Repo{Dir: dir}).Run(ctx, "config", "--get-regexp", `^http\..*\.extraheader$`); err == nil && len(out) > 0 {
		return nil
	}
	if serverURL == "" {
		serverURL = "https://github.com"
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	return []string{"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http." + strings.TrimSuffix(serverURL, "/") + "/.extraheader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + basic}
}

// event is what the Action reads of the event that triggered it.
type event struct {
	change *forge.Change // the pull request; nil on a push
	repo   string        // owner/name
	branch string        // the branch a push updated
}

// readEvent reads the event that triggered the workflow: a pull request,
// or a push to a branch.
func readEvent(gctx *githubactions.GitHubContext) (event, error) {
	switch gctx.EventName {
	case "pull_request", "pull_request_target", "push":
	default:
		return event{}, fmt.Errorf("kplan plans pull requests and pushes, but this workflow ran on %q: trigger it with on: pull_request (and on: push to warm the render cache)", gctx.EventName)
	}
	data, err := os.ReadFile(gctx.EventPath)
	if err != nil {
		return event{}, fmt.Errorf("read the event payload (GITHUB_EVENT_PATH): %w", err)
	}
	ev, err := github.DecodeEvent(gctx.EventName, data)
	if err != nil {
		return event{}, fmt.Errorf("parse the event payload %s: %w", gctx.EventPath, err)
	}
	if ev.Kind == forge.Push {
		branch, ok := strings.CutPrefix(ev.Ref, "refs/heads/")
		if !ok {
			return event{}, fmt.Errorf("the push event %s updates %q, not a branch: run kplan on pushes to branches", gctx.EventPath, ev.Ref)
		}
		return event{repo: ev.Repo, branch: branch}, nil
	}
	pr := ev.Change
	if pr.BaseRef == "" || pr.HeadSHA == "" || pr.Number == 0 {
		return event{}, fmt.Errorf("the event payload %s has no pull_request.base.ref, head.sha or number: is it a pull request event?", gctx.EventPath)
	}
	return event{change: pr, repo: ev.Repo}, nil
}

// workflowBot is whom the workflow's GITHUB_TOKEN, the github-token
// input's default, posts as.
const workflowBot = "github-actions[bot]"

// commentAuthor is whom the token posts as when GET /user will not say
// (installation tokens): the comment-author input, else github-actions[bot]
// for the workflow's own token (action.yml compares the input with
// github.token; without it, as in a Docker action, the token is taken for
// the default), else "": unknown, so kplan posts a comment rather than
// edit one it cannot tell is its own.
func commentAuthor(in inputs, getenv func(string) string) string {
	switch {
	case in.commentAuthor != "":
		return in.commentAuthor
	case getenv("KPLAN_GITHUB_TOKEN_IS_DEFAULT") == "false":
		return ""
	}
	return workflowBot
}

// comment posts the plan as the PR's one kplan comment: the plan
// comment is the token's own marked comment (GET /user's login, else as,
// whom the token posts as), never a marked comment someone else posted.
// A token that may not comment (a PR from a fork) is a warning: the
// summary has the plan.
func comment(ctx context.Context, a *githubactions.Action, getenv func(string) string, token, as, repo string, number int, md string, log *slog.Logger) error {
	if token == "" {
		a.Warningf("no github-token: the plan is in the job summary only")
		return nil
	}
	// GitHub Enterprise Server and tests set GITHUB_API_URL.
	commenter, err := github.NewCommenter(getenv("GITHUB_API_URL"), token, as)
	if err != nil {
		return fmt.Errorf("GITHUB_API_URL %q: %w", getenv("GITHUB_API_URL"), err)
	}
	res, err := commenter.Upsert(ctx, repo, number, markers.PlanMarker, md)
	if errors.Is(err, forge.ErrNoPermission) {
		a.Warningf("the token cannot comment on %s#%d (a pull request from a fork?): the plan is in the job summary only", repo, number)
		return nil
	}
	if err != nil {
		return fmt.Errorf("comment on %s#%d: %w", repo, number, err)
	}
	verb := "updated"
	if res.Created {
		verb = "posted"
		if res.Author != "" && !strings.EqualFold(res.Author, res.Self) {
			// A custom token that GET /user does not answer (an App's):
			// without its login the next run cannot tell kplan's comment
			// from a stranger's and posts another.
			looked := fmt.Sprintf("looked for its plan comment among the comments of %s", res.Self)
			if res.Self == "" {
				looked = "could not tell whom github-token posts as (GET /user does not say for an App's token)"
			}
			a.Warningf("kplan %s, and the token posts as %s: set the input comment-author: %s so that the next run edits this comment instead of posting another", looked, res.Author, res.Author)
		}
	}
	log.Info("plan comment "+verb, "url", res.URL)
	return nil
}

// runURL is the run's page, where its job summary is:
// GITHUB_SERVER_URL/GITHUB_REPOSITORY/actions/runs/GITHUB_RUN_ID; "" when
// the runner does not say.
func runURL(getenv func(string) string) string {
	server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if repo == "" || id == "" {
		return ""
	}
	if server == "" {
		server = "https://github.com"
	}
	u := strings.TrimSuffix(server, "/") + "/" + repo + "/actions/runs/" + id
	if n := getenv("GITHUB_RUN_ATTEMPT"); n != "" && n != "1" {
		u += "/attempts/" + n
	}
	return u
}

// annotationPrefix is the repository's top level relative to the
// workspace, which annotations' file paths are relative to ("" when they
// are the same or it cannot be told).
func annotationPrefix(ctx context.Context, g gitcli.Repo, workspace string) string {
	top, err := g.TopLevel(ctx)
	if err != nil || workspace == "" {
		return ""
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		ws = workspace
	}
	rel, err := filepath.Rel(ws, top)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	return filepath.ToSlash(rel)
}

// annotate marks the kustomization of each overlay the change breaks
// with an error, and of each overlay with a dangerous change with a
// warning, so that they show on the pull request's files and the run.
func annotate(a *githubactions.Action, p *inventorydiff.Plan, prefix string) {
	for i := range p.Overlays {
		o := &p.Overlays[i]
		file := o.File
		if file == "" {
			file = path.Join(o.Path, "kustomization.yaml")
		}
		file = path.Join(prefix, file)
		if msg, introduced := o.Problem(); msg != "" && introduced {
			a.WithFieldsMap(map[string]string{"file": file, "title": "kplan: this change breaks " + o.Path}).Errorf("%s", oneLine(msg))
		}
		for _, why := range o.Dangerous {
			a.WithFieldsMap(map[string]string{"file": file, "title": "kplan: dangerous change in " + o.Path}).Warningf("%s", oneLine(why.String()))
		}
	}
}

// oneLine keeps an annotation's message on its line: a workflow command
// escapes newlines, but one line reads better on the file view.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// dockerHome is where the runner mounts $RUNNER_TEMP/_github_home inside
// a Docker action's container.
const dockerHome = "/github/home"

// writeTempFile stores a report where later steps can read it and
// returns that path as the host sees it. Inside a Docker action the
// container's RUNNER_TEMP is not mounted, but /github/home is: it is
// $RUNNER_TEMP/_github_home on the host. The work tree is never written.
func writeTempFile(name string, data []byte, getenv func(string) string) (string, error) {
	runnerTemp := getenv("RUNNER_TEMP")
	if getenv("HOME") == dockerHome && runnerTemp != "" {
		if err := os.WriteFile(filepath.Join(dockerHome, name), data, 0o644); err != nil {
			return "", err
		}
		return filepath.Join(runnerTemp, "_github_home", name), nil
	}
	dir := runnerTemp
	if dir == "" {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, data, 0o644)
}
