// Command kplan is the command line for people: render overlays and show
// the plan between two revisions, as the GitHub Action does on a PR.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/batchgc"
	_ "github.com/kplan-dev/kplan/internal/batchgc/atstart" // the collector off while packages initialize
	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	_ "github.com/kplan-dev/kplan/internal/noi18n" // before kubectl's packages start
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/prflow"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/version"
)

func main() {
	batchgc.Tune(os.Getenv)
	stopProfile, err := startProfiles(os.Getenv("KPLAN_CPUPROFILE"), os.Getenv("KPLAN_TRACE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kplan:", err)
		os.Exit(1)
	}
	// krusty writes its warnings to os.Stderr itself: a filter stands
	// there, and kplan writes to the real stderr.
	filter, stderr, ferr := plan.FilterStderr()
	if ferr != nil {
		fmt.Fprintln(stderr, "kplan: kustomize's warnings will show raw:", ferr)
	}
	ctx, stop := signal.NotifyContext(context.WithValue(context.Background(), stderrFilterKey{}, filter), os.Interrupt)
	code := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, stderr)
	stop()
	stopProfile()
	filter.Close()
	os.Exit(code)
}

// runMain runs kplan and returns the status it ends with, having
// reported why. A crash (a panic in run, recovered) exits 1 with the
// stack and a request for a report: never 2, which --exit-code means as
// "changes" (and Go exits with on a panic nobody recovers).
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return exitCode(crash.Catch(func() error { return run(ctx, args, getenv, stdout, stderr) }), stderr)
}

// exitCode reports err, as run returned it, and says the status kplan
// ends with.
func exitCode(err error, stderr io.Writer) int {
	var exit exitError
	switch {
	case err == nil:
		return 0
	case crash.Report(stderr, "kplan", err):
		return 1
	case errors.As(err, &exit):
		return int(exit)
	default:
		fmt.Fprintln(stderr, "kplan:", err)
		return 1
	}
}

// startProfiles writes a CPU profile to cpu (KPLAN_CPUPROFILE) and an
// execution trace to exec (KPLAN_TRACE: what waits on what, where a
// plan's wall time goes), for finding where a plan's time goes; ""
// writes none.
func startProfiles(cpu, exec string) (stop func(), err error) {
	stopCPU, err := startCPUProfile(cpu)
	if err != nil || exec == "" {
		return stopCPU, err
	}
	f, err := os.Create(exec)
	if err == nil {
		err = trace.Start(f)
	}
	if err != nil {
		stopCPU()
		return nil, fmt.Errorf("KPLAN_TRACE: %w", err)
	}
	return func() { trace.Stop(); f.Close(); stopCPU() }, nil
}

// startCPUProfile writes a CPU profile to path; "" profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("KPLAN_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("KPLAN_CPUPROFILE %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// exitError ends the program with a status and no message (the output
// already said why).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCodes is the part of every command's help that says how it ends
// (terraform's -detailed-exitcode convention).
const exitCodes = `Exit codes:
  0  success
  1  any error, usage errors included (and for diff and merge, an overlay the change breaks);
     a crash (a bug in kplan) too, whatever the flags
  2  diff and merge --exit-code only: the plan has changes
  3  approval only: the tip is refused (a change no approval covers)`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	level := slog.LevelWarn
	if getenv("KPLAN_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// krusty prints deprecation warnings through the standard logger, once
	// per overlay and side; they are noise in a plan unless debugging.
	log.SetFlags(0)
	log.SetOutput(io.Discard)
	if level == slog.LevelDebug {
		log.SetOutput(stderr)
	}
	root := rootCmd(logger, batchgc.New(getenv))
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	return root.ExecuteContext(ctx)
}

// rootCmd is kplan's command tree: every command and flag (docs/cli.md
// documents each, TestFlagsDocumented).
func rootCmd(logger *slog.Logger, gc plan.GC) *cobra.Command {
	root := &cobra.Command{
		Use:   "kplan",
		Short: "kplan shows what merging a change to kustomize overlays would do to a cluster",
		Long: "kplan shows what merging a change to kustomize overlays would do to a cluster,\n" +
			"and applies overlays through an inventory, as its GitHub Action and webhook do.",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodes + "\n")
	root.SetVersionTemplate("kplan {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, cmd.CommandPath())
	})
	root.AddCommand(diffCmd(logger, gc), mergeCmd(), renderCmd(), applyCmd(), initCmd(), migrateCmd(), demoCmd(logger), approvalCmd(), versionCmd())
	for _, c := range root.Commands() {
		completeOutput(c)
	}
	return root
}

// outputFlag registers -o/--output, kubectl's name, with --format, the
// name kplan had first, as an alias.
func outputFlag(cmd *cobra.Command, def, values string) *string {
	out := cmd.Flags().StringP("output", "o", def, values)
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "format" {
			name = "output"
		}
		return pflag.NormalizedName(name)
	})
	return out
}

// maxBytesFlag registers --max-bytes: the Markdown report is printed
// whole unless it says otherwise (the size budget is the comment's, and
// the Action keeps it; a terminal or a file has none).
func maxBytesFlag(cmd *cobra.Command) *int {
	return cmd.Flags().Int("max-bytes", 0, "fit the markdown report in this many bytes, as a PR comment is (65536), leaving out added objects' YAML, then field changes; 0 prints it whole")
}

// checkMaxBytes refuses --max-bytes where it bounds nothing.
func checkMaxBytes(cmd *cobra.Command, format string, n int) error {
	if !cmd.Flags().Changed("max-bytes") {
		return nil
	}
	if n < 0 {
		return fmt.Errorf("--max-bytes %d: want 0 (no limit) or a size in bytes", n)
	}
	if f, _ := report.LookupFormat(format); f.Name != "markdown" {
		return fmt.Errorf("--max-bytes fits the markdown report only: add -o markdown")
	}
	return nil
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kplan %s\n", version.String())
			return err
		},
	}
}

// renderFlags are the flags shared by every command that renders.
type renderFlags struct {
	loadRestrictor string
	enableHelm     bool
	helmCommand    string
	remoteHosts    []string
	maxReadBytes   int64
	maxPathDepth   int
	gitCache       string
}

func (r *renderFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.loadRestrictor, "load-restrictor", render.LoadRestrictionsRootOnly, render.LoadRestrictionsRootOnly+" or "+render.LoadRestrictionsNone+", as kustomize's flag")
	fs.BoolVar(&r.enableHelm, "enable-helm", false, "inflate helmCharts with the helm command")
	fs.StringVar(&r.helmCommand, "helm-command", "helm", "helm binary for --enable-helm")
	fs.StringSliceVar(&r.remoteHosts, "remote-hosts", nil, "hosts renders may fetch http(s) resources from (comma-separated or repeated): HOST, *.DOMAIN or *; "+
		"loopback, private, link-local and metadata addresses only for a host named exactly; default none")
	fs.Int64Var(&r.maxReadBytes, "max-render-bytes", render.DefaultMaxReadBytes, "bytes one overlay's render may read (its files, each time read, and fetched resources); -1 for no limit")
	fs.StringVar(&r.gitCache, "git-cache", "", "directory keeping the git repositories remote bases name, fetched from --remote-hosts (default: kplan/git in the user's cache directory); what no run used for 30 days is removed")
	fs.IntVar(&r.maxPathDepth, "max-path-depth", render.DefaultMaxPathDepth, "levels deep a path one render reads may be (at most "+strconv.Itoa(snapshot.MaxPathDepth)+"); -1 for no limit")
}

// options returns the render options the flags set, and what closes
// their git cache.
// gitCacheMaxAge is how long a git base no run used stays in --git-cache.
const gitCacheMaxAge = 30 * 24 * time.Hour

func (r *renderFlags) options() (render.Options, func(), error) {
	o := render.Options{EnableHelm: r.enableHelm, HelmCommand: r.helmCommand, MaxReadBytes: r.maxReadBytes, MaxPathDepth: r.maxPathDepth}
	var err error
	if o.LoadRestrictorNone, err = render.ParseLoadRestrictor(r.loadRestrictor); err != nil {
		return o, nil, fmt.Errorf("--load-restrictor %w", err)
	}
	if r.maxReadBytes == 0 || r.maxPathDepth == 0 {
		return o, nil, fmt.Errorf("--max-render-bytes and --max-path-depth: want a limit, or -1 for none")
	}
	policy, err := netpolicy.New(r.remoteHosts, "--remote-hosts %s")
	if err != nil {
		return o, nil, fmt.Errorf("--remote-hosts: %w", err)
	}
	o.Remote = policy
	// Charts from private registries and repositories: the credentials of
	// `helm registry login`, `docker login` and `helm repo add`.
	o.ChartAuth = charts.Standard(os.Getenv)
	dir := r.gitCache
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return o, nil, fmt.Errorf("--git-cache: no user cache directory (%w); name one", err)
		}
		dir = filepath.Join(c, "kplan", "git")
	}
	cache := gitbase.New(dir, policy)
	o.Git = cache
	done := func() {
		_ = cache.Close()
		// The cache lives in the user's cache directory across runs: what
		// no run used for a while goes (pruning needs no network).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = gitbase.New(dir, nil).Prune(ctx, gitCacheMaxAge)
	}
	return o, done, nil
}

func diffCmd(logger *slog.Logger, gc plan.GC) *cobra.Command {
	var (
		rf              renderFlags
		o               prflow.Options // the flags the CI front ends take as inputs too
		dir, base, head string
		exitCode        bool
		full            bool
		cacheDir        string
	)
	cmd := &cobra.Command{
		Use:   "diff --base REV [--head REV] [OVERLAY...]",
		Short: "Plan of head against base: what merging would add, change and prune",
		Long: "Plan of head against base: per overlay, the objects merging would add, change and prune.\n" +
			"OVERLAY arguments are globs of overlay directories to plan, as --overlays.\n" +
			"Head defaults to the working tree as it is on disk.",
		Example: "  kplan diff --base main\n  kplan diff --base main --head feature -o json\n  kplan diff --base main overlays/prod --exit-code",
	}
	f := cmd.Flags()
	f.StringVarP(&dir, "dir", "C", ".", "the repository's directory")
	f.StringVar(&base, "base", "", "base revision (branch, tag or commit), required")
	f.StringVar(&head, "head", "", "head revision; empty compares the working tree as it is on disk")
	format := outputFlag(cmd, report.Formats[0].Name, report.FormatNames())
	f.StringVar(&o.Overlays, "overlays", "", "comma-separated globs of overlay directories to plan (default all); a kustomization they match is planned even if another lists it")
	f.StringVar(&o.Exclude, "exclude", "", "comma-separated globs of overlay directories to skip")
	f.BoolVar(&o.FailOnError, "fail-on-error", true, "exit 1 when the change breaks an overlay (fails on head, not on base, or now shares an inventory)")
	f.BoolVar(&exitCode, "exit-code", false, "exit 2 when the plan has changes")
	f.BoolVar(&full, "full", false, "render every overlay on both sides, not only those the change can affect")
	f.StringVar(&cacheDir, "cache-dir", "", "keep renders in this directory between runs (ignored with --full)")
	fluxMode := f.Bool("flux", false, "plan the repository's Flux Kustomizations as Flux applies them, one target each (--flux=false: plan kustomize directories only; default: .kplan.yaml's flux:, else on when a Kustomization's source is the flux-system GitRepository)")
	argoMode := f.Bool("argocd", false, "plan the repository's Argo CD Applications as Argo CD syncs them, one target each (--argocd=false: off; default: .kplan.yaml's argocd:, else on when an Application's source is this repository, by its git remotes or .kplan.yaml's argocdRepoURLs)")
	f.StringVar(&o.DiffStyle, "diff-style", report.DiffFields, "how changes inside objects are shown: fields (each changed field, multi-line values as line diffs, added objects' YAML) or unified (every object's YAML as unified diffs, as kustomize build | diff -u)")
	f.StringSliceVar(&o.IgnoreFields, "ignore-field", nil, "leave out changes of fields matching this path pattern (repeatable; e.g. 'metadata.annotations.checksum/*', * matches any characters); the report says how many each hid; adds, prunes, dangers and Secret data are never hidden")
	f.StringSliceVar(&o.IgnoreKinds, "ignore-kind", nil, "leave out changes in place of objects of this kind (repeatable; their adds and prunes still show; Secret is refused)")
	maxBytes := maxBytesFlag(cmd)
	f.StringVar(&o.WebhookConfig, "webhook-config", "", "the webhook's configuration file: overlays its targets deploy to one cluster meet there, for the duplicate-object rule (as .kplan.yaml's environments)")
	f.StringVar(&o.Repository, "repository", "", "with --webhook-config naming several repositories: this repository's name in it (owner/name)")
	f.BoolVar(&o.NoDefaultIgnore, "no-default-ignore", false, "show the changes the default noise set hides (chart and version labels, checksum/* annotations, caBundle); the report counts what it hid")
	noReuse := f.Bool("no-render-reuse", false, "render both sides of an overlay even when they read the same content (for make bench's before/after)")
	_ = f.MarkHidden("no-render-reuse")
	warm := f.Bool("warm-cache", false, "render every overlay through --cache-dir, as the Action's plan of a push to the default branch does (for make bench: a pull request's first plan after it)")
	_ = f.MarkHidden("warm-cache")
	f.StringVar(&o.Shard, "shard", "", "plan share I of N of the overlays (e.g. 2/3) and write it as a part for kplan merge (with -o json); merge applies --exit-code and --fail-on-error")
	rf.register(f)
	completeRefs(cmd, "base", "head")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if base == "" {
			return errors.New("diff: --base is required (e.g. --base main)")
		}
		if f.Changed("argocd") {
			o.ArgoCD = argoMode
		}
		opts, err := o.Plan(diffWords)
		if err != nil {
			return err
		}
		share := opts.Shard
		if share.On() && *format != "json" {
			return fmt.Errorf("--shard %s writes a part for kplan merge: add -o json (kplan merge prints the plan in any format)", share)
		}
		ropts, closeGit, err := rf.options()
		if err != nil {
			return err
		}
		defer closeGit()
		if _, err := report.LookupFormat(*format); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		if err := checkMaxBytes(cmd, *format, *maxBytes); err != nil {
			return err
		}
		if f.Changed("flux") {
			opts.Flux = fluxMode
		}
		opts.RepoDir, opts.Base, opts.Head = dir, base, head
		opts.Filter.Include = append(opts.Filter.Include, args...)
		opts.Render, opts.Logger, opts.Full, opts.CacheDir = ropts, logger, full, cacheDir
		opts.Progress, opts.NoReuse, opts.GC, opts.Warm = progress(cmd.ErrOrStderr()), *noReuse, gc, *warm && cacheDir != ""
		reportKustomizeWarnings(cmd.Context())
		if share.On() {
			// The shards of one run must plan the same overlays alike:
			// the part carries opts.Fingerprint for kplan merge to compare.
			part, err := plan.Share(cmd.Context(), opts, version.String())
			if err != nil {
				return plan.NameFilter(err, patternName(cmd, dir, args))
			}
			return writePart(cmd.OutOrStdout(), part)
		}
		p, err := plan.Run(cmd.Context(), opts)
		if err != nil {
			return plan.NameFilter(err, patternName(cmd, dir, args))
		}
		if err := report.Write(cmd.OutOrStdout(), p, *format, report.Options{DiffStyle: o.DiffStyle, MaxBytes: *maxBytes}); err != nil {
			return err
		}
		return planExit(p, o.FailOnError, exitCode)
	}
	return cmd
}

// diffFlags are kplan diff's flags by the CI front ends' input names,
// where the two differ.
var diffFlags = map[string]string{"ignore-fields": "ignore-field", "ignore-kinds": "ignore-kind"}

// diffWords name prflow.Options' settings as kplan diff's flags.
var diffWords = prflow.Words{Name: func(input string) string { return "--" + cmp.Or(diffFlags[input], input) }}

// patternName names a filter pattern that matches nothing as kplan
// diff's user gave it: --exclude, --overlays, or an OVERLAY argument. An
// argument that is no path of the repository is most often a flag's
// value that came apart from its flag (`--fail-on-error false`): the
// name says which flag it may belong to.
func patternName(cmd *cobra.Command, dir string, args []string) func(string, bool) string {
	return func(pattern string, exclude bool) string {
		switch {
		case exclude:
			return fmt.Sprintf("--exclude %q", pattern)
		case !slices.Contains(args, pattern):
			return fmt.Sprintf("--overlays %q", pattern)
		}
		name := fmt.Sprintf("argument %q", pattern)
		if _, err := os.Stat(filepath.Join(dir, pattern)); err == nil || strings.ContainsAny(pattern, "*?[{") {
			return name
		}
		if _, err := strconv.ParseBool(pattern); err == nil {
			var set []string
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if f.Value.Type() == "bool" {
					set = append(set, "--"+f.Name+"="+pattern)
				}
			})
			if len(set) > 0 {
				return fmt.Sprintf("%s (a boolean flag takes its value after '=': did you mean %s?)", name, strings.Join(set, " or "))
			}
		}
		if report.CheckDiffStyle(pattern) == nil {
			return fmt.Sprintf("%s (did you mean --diff-style %s?)", name, pattern)
		}
		if _, err := report.LookupFormat(pattern); err == nil {
			return fmt.Sprintf("%s (did you mean -o %s?)", name, pattern)
		}
		return fmt.Sprintf("%s (not a directory of %s; OVERLAY arguments are overlay directories or globs, and flags' values follow their flag)", name, dir)
	}
}

// planExit is how a printed plan ends kplan: 1 when kplan crashed on an
// overlay (a bug: whatever the flags, never a plan that passes), 1 when
// the change breaks an overlay (failOnError), 2 when it has changes
// (exitCode).
func planExit(p *inventorydiff.Plan, failOnError, exitCode bool) error {
	if crashed := p.Crashed(); len(crashed) > 0 {
		return fmt.Errorf("planning %s crashed (a bug in kplan; the plan above shows the panic): please report it at %s", strings.Join(crashed, ", "), crash.ReportURL)
	}
	if failOnError && len(p.IntroducedFailures()) > 0 {
		return exitError(1)
	}
	if exitCode && p.Totals.ChangedOverlays > 0 {
		return exitError(2)
	}
	return nil
}

// checkFormat refuses an output format before any work is done.
func checkFormat(got string, want ...string) error {
	if slices.Contains(want, got) {
		return nil
	}
	return fmt.Errorf("--output %q: want %s", got, strings.Join(want, ", "))
}

func renderCmd() *cobra.Command {
	var rf renderFlags
	cmd := &cobra.Command{
		Use:   "render [DIR...]",
		Short: "Render overlays as kustomize build does, plus the seed inventory ConfigMap",
		Long: "Render overlays as kustomize build does, from the disk (ignored files included).\n" +
			"DIR is absolute or relative to the current directory; inside a git repository\n" +
			"its bases elsewhere in the repository are found, outside one the disk is read.",
	}
	rf.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, dirs []string) error {
		if len(dirs) == 0 {
			dirs = []string{"."}
		}
		ropts, closeGit, err := rf.options()
		if err != nil {
			return err
		}
		defer closeGit()
		stdout := cmd.OutOrStdout()
		var failed []error
		for i, dir := range dirs {
			r, err := renderDir(cmd.Context(), dir, ropts)
			if err != nil {
				return err
			}
			if r.Err != nil {
				failed = append(failed, r.Err)
				continue
			}
			objs := r.Objects
			if d := r.Inventory; d != nil {
				cm, err := inventoryConfigMap(r)
				if err != nil {
					return fmt.Errorf("inventory of %s: %w", dir, err)
				}
				objs = append(objs, cm)
			}
			out, err := render.YAML(objs)
			if err != nil {
				return fmt.Errorf("print %s: %w", dir, err)
			}
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			if _, err := stdout.Write(out); err != nil {
				return err
			}
		}
		return errors.Join(failed...)
	}
	return cmd
}

// renderDir renders one overlay directory given as the user typed it,
// absolute or relative, from wherever kplan runs: the repository that
// holds it is found from the directory itself.
func renderDir(ctx context.Context, dir string, opts render.Options) (render.Result, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return render.Result{}, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return render.Result{}, fmt.Errorf("%s is not a directory: name an overlay's directory", dir)
	}
	results, err := plan.RenderWorkingTree(ctx, abs, []string{"."}, opts)
	if err != nil {
		return render.Result{}, err
	}
	r := results[0]
	r.Path = dir
	return r, nil
}

// inventoryConfigMap is the ConfigMap the seed's inventory directive asks
// for (seeds/000_0a72809845e5c0c8.md).
func inventoryConfigMap(r render.Result) (*yaml.RNode, error) {
	if r.Inventory.Type != "" && r.Inventory.Type != "ConfigMap" {
		return nil, fmt.Errorf("inventory type %q: only ConfigMap is supported", r.Inventory.Type)
	}
	inv, err := inventory.New(r.Objects, inventory.Options{Namespace: repoconfig.DefaultNamespace, Scope: render.NamespaceScoped})
	if err != nil {
		return nil, err
	}
	return inv.ConfigMap(r.Inventory.ConfigMap.Name, r.Inventory.ConfigMap.Namespace)
}

func demoCmd(logger *slog.Logger) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Plan the kustomize components user story in a throwaway repository",
		Args:  cobra.NoArgs,
	}
	format := outputFlag(cmd, report.Formats[0].Name, report.FormatNames())
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the demo repository and print its path")
	maxBytes := maxBytesFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := report.LookupFormat(*format); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		if err := checkMaxBytes(cmd, *format, *maxBytes); err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "kplan-demo-")
		if err != nil {
			return err
		}
		if !keep {
			defer os.RemoveAll(dir)
		}
		repo, err := demo.NewRepo(cmd.Context(), filepath.Join(dir, "repo"))
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if keep {
			fmt.Fprintf(cmd.ErrOrStderr(), "demo repository: %s (base %s, head %s)\n", repo.Dir, repo.Base[:7], repo.Head[:7])
		}
		reportKustomizeWarnings(cmd.Context())
		p, err := plan.Run(cmd.Context(), plan.Options{RepoDir: repo.Dir, Base: repo.Base, Head: repo.Head, Logger: logger})
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		return report.Write(cmd.OutOrStdout(), p, *format, report.Options{MaxBytes: *maxBytes})
	}
	return cmd
}
