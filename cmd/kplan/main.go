// Command kplan is the command line for people: render overlays and show
// the plan between two revisions, as the GitHub Action does on a PR.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/batchgc"
	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/report"
)

func main() {
	batchgc.Tune(os.Getenv)
	stopProfile, err := startCPUProfile(os.Getenv("KPLAN_CPUPROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kplan:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err = run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	stopProfile()
	var exit exitError
	switch {
	case errors.As(err, &exit):
		os.Exit(int(exit))
	case err != nil:
		fmt.Fprintln(os.Stderr, "kplan:", err)
		os.Exit(1)
	}
}

// startCPUProfile writes a CPU profile to path (KPLAN_CPUPROFILE), for
// finding where a plan's time goes; "" profiles nothing.
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

const usage = `kplan shows what merging a change to kustomize overlays would do to a cluster.

Usage:
  kplan diff --base REV [--head REV] [flags]   plan of head against base (head: the working tree)
  kplan render [flags] DIR...                  render overlays as kustomize build does
  kplan apply [flags] DIR                      apply an overlay and prune through its inventory
  kplan init [DIR] [--name --namespace --inventory-id --rg-file]
                                               write the overlay's ResourceGroup file
  kplan migrate [DIR] [--rg-file]              turn a Kptfile inventory into a ResourceGroup file
  kplan demo [--format text|markdown|json]     plan the components user story in a throwaway repo

Run 'kplan COMMAND -h' for a command's flags.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError(2)
	}
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
	cmd, args := args[0], args[1:]
	switch cmd {
	case "diff":
		return runDiff(ctx, args, logger, stdout, stderr)
	case "render":
		return runRender(ctx, args, stdout, stderr)
	case "demo":
		return runDemo(ctx, args, logger, stdout, stderr)
	case "apply":
		return runApply(ctx, args, stdout, stderr)
	case "init":
		return runInit(args, stdout, stderr)
	case "migrate":
		return runMigrate(args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "kplan: unknown command %q\n\n%s", cmd, usage)
		return exitError(2)
	}
}

// renderFlags are the flags shared by every command that renders.
type renderFlags struct {
	loadRestrictor string
	enableHelm     bool
	helmCommand    string
}

func (r *renderFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.loadRestrictor, "load-restrictor", "LoadRestrictionsRootOnly", "LoadRestrictionsRootOnly or LoadRestrictionsNone, as kustomize's flag")
	fs.BoolVar(&r.enableHelm, "enable-helm", false, "inflate helmCharts with the helm command")
	fs.StringVar(&r.helmCommand, "helm-command", "helm", "helm binary for --enable-helm")
}

func (r *renderFlags) options() (render.Options, error) {
	o := render.Options{EnableHelm: r.enableHelm, HelmCommand: r.helmCommand}
	switch r.loadRestrictor {
	case "LoadRestrictionsRootOnly", "rootOnly", "":
	case "LoadRestrictionsNone", "none":
		o.LoadRestrictorNone = true
	default:
		return o, fmt.Errorf("--load-restrictor %q: want LoadRestrictionsRootOnly or LoadRestrictionsNone", r.loadRestrictor)
	}
	return o, nil
}

func runDiff(ctx context.Context, args []string, logger *slog.Logger, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rf          renderFlags
		dir         = fs.String("C", ".", "the repository's directory")
		base        = fs.String("base", "", "base revision (branch, tag or commit), required")
		head        = fs.String("head", "", "head revision; empty compares the working tree as it is on disk")
		format      = fs.String("format", "text", "text, markdown or json")
		overlays    = fs.String("overlays", "", "comma-separated globs of overlay directories to include (default all)")
		exclude     = fs.String("exclude", "", "comma-separated globs of overlay directories to skip")
		failOnError = fs.Bool("fail-on-error", true, "exit 1 when the change breaks an overlay (fails on head, not on base, or now shares an inventory)")
		exitCode    = fs.Bool("exit-code", false, "exit 2 when the plan has changes")
		full        = fs.Bool("full", false, "render every overlay on both sides, not only those the change can affect")
		cacheDir    = fs.String("cache-dir", "", "keep renders in this directory between runs (ignored with --full)")
	)
	rf.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	if *base == "" {
		return errors.New("diff: --base is required (e.g. --base main)")
	}
	ropts, err := rf.options()
	if err != nil {
		return err
	}
	p, err := plan.Run(ctx, plan.Options{
		RepoDir: *dir, Base: *base, Head: *head,
		Filter: render.Filter{Include: render.Patterns(*overlays), Exclude: render.Patterns(*exclude)},
		Render: ropts, Logger: logger, Full: *full, CacheDir: *cacheDir,
	})
	if err != nil {
		return err
	}
	if err := writeReport(stdout, p, *format); err != nil {
		return err
	}
	if *failOnError && len(p.IntroducedFailures()) > 0 {
		return exitError(1)
	}
	if *exitCode && p.Totals.ChangedOverlays > 0 {
		return exitError(2)
	}
	return nil
}

func writeReport(w io.Writer, p *inventorydiff.Plan, format string) error {
	switch format {
	case "text", "":
		return report.Text(w, p)
	case "markdown", "md":
		_, err := io.WriteString(w, report.Markdown(p, "", report.MaxCommentSize))
		return err
	case "json":
		data, err := report.JSON(p)
		if err != nil {
			return err
		}
		_, err = w.Write(append(data, '\n'))
		return err
	default:
		return fmt.Errorf("--format %q: want text, markdown or json", format)
	}
}

func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf renderFlags
	rf.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	ropts, err := rf.options()
	if err != nil {
		return err
	}
	results, err := plan.RenderWorkingTree(ctx, ".", dirs, ropts)
	if err != nil {
		return err
	}
	var failed []error
	for i, r := range results {
		if r.Err != nil {
			failed = append(failed, r.Err)
			continue
		}
		objs := r.Objects
		if d := r.Inventory; d != nil {
			cm, err := inventoryConfigMap(r)
			if err != nil {
				return fmt.Errorf("inventory of %s: %w", dirs[i], err)
			}
			objs = append(objs, cm)
		}
		out, err := render.YAML(objs)
		if err != nil {
			return fmt.Errorf("print %s: %w", dirs[i], err)
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

func runDemo(ctx context.Context, args []string, logger *slog.Logger, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "text", "text, markdown or json")
	keep := fs.Bool("keep", false, "keep the demo repository and print its path")
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	dir, err := os.MkdirTemp("", "kplan-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	repo, err := demo.NewRepo(ctx, filepath.Join(dir, "repo"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if *keep {
		fmt.Fprintf(stderr, "demo repository: %s (base %s, head %s)\n", repo.Dir, repo.Base[:7], repo.Head[:7])
	}
	p, err := plan.Run(ctx, plan.Options{RepoDir: repo.Dir, Base: repo.Base, Head: repo.Head, Logger: logger})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return writeReport(stdout, p, *format)
}
