// Command kplan-webhook deploys on merge: GitHub calls it when a pull
// request merges (or a branch is pushed), and it makes every configured
// target converge on that commit, then reports back to GitHub.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/ghreport"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/version"
	"github.com/kplan-dev/kplan/internal/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kplan-webhook:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan-webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "/etc/kplan/webhook.yaml", "configuration file")
	listen := fs.String("listen", ":8080", "address to serve /webhook, /healthz and /readyz on")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		_, err := fmt.Fprintf(stdout, "kplan-webhook %s\n", version.String())
		return err
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	secret, token, err := config.Secrets(getenv)
	if err != nil {
		return err
	}
	gh := github.NewClient(&http.Client{Timeout: 30 * time.Second})
	if len(token) > 0 {
		gh = gh.WithAuthToken(string(token))
	}
	if gh.BaseURL, err = url.Parse(cfg.APIBaseURL); err != nil {
		return fmt.Errorf("%s: apiBaseURL: %w", cfg.File, err)
	}

	var targets []deployer.Target
	for _, ref := range cfg.AllTargets() {
		targets = append(targets, targetOf(ref))
	}
	var sources []deployer.Source
	for _, s := range cfg.Sources() {
		sources = append(sources, sourceOf(cfg, s))
	}
	mirrors := &gitmirror.Mirrors{Dir: filepath.Join(cfg.StateDir, "mirrors"), Token: token, Logger: log}
	dep := deployer.New(targets, mirrors, ghreport.New(gh, log), engines(), log, sources...)
	dep.Resync = cfg.ResyncInterval

	h, err := webhook.New(webhook.Options{
		Secret: secret, Config: cfg, Ready: dep.Ready, Logger: log,
		Enqueue: func(i webhook.Intent) {
			for _, t := range i.Targets {
				if err := dep.Submit(t.Name, deployer.Request{SHA: i.SHA, PR: i.PR, Delivery: i.DeliveryID}); err != nil {
					log.Error("submit", "target", t.Name, "err", err)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	fmt.Fprintf(stdout, "kplan-webhook listening on http://%s with %d targets and %d branches that take theirs from the repository\n", ln.Addr(), len(targets), len(sources))
	// The body is read at the client's pace: bound it.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dep.Run(runCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shutdown, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	srv.Shutdown(shutdown)
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func targetOf(ref config.TargetRef) deployer.Target {
	t := ref.Target
	dt := deployer.Target{
		Name: t.Name, Repo: ref.Repo, Branch: ref.Branch, CloneURL: ref.CloneURL,
		Overlay: t.Overlay, Environment: t.Environment, Kubeconfig: t.Kubeconfig, Context: t.Context,
		Prune: t.Prune, ReconcileTimeout: t.ReconcileTimeout, InventoryPolicy: t.InventoryPolicy,
		AllowRemoteBases: t.AllowRemoteBases, AllowReplaceInventory: t.AllowReplaceInventory, Namespace: t.Namespace,
	}
	if i := t.Inventory; i != nil {
		dt.Inventory = &deployer.Inventory{Kind: i.Kind, Name: i.Name, Namespace: i.Namespace, ID: i.ID}
	}
	return dt
}

// sourceOf maps a branch that takes its targets from the repository; the
// configuration's own targets of that repository reserve their names.
func sourceOf(cfg *config.Config, s config.Source) deployer.Source {
	ds := deployer.Source{Name: s.Name, Repo: s.Repo, Branch: s.Branch, CloneURL: s.CloneURL, File: s.File,
		Environments: map[string]deployer.Settings{}}
	for _, e := range s.Environments {
		ds.Environments[e.Name] = deployer.Settings{
			Kubeconfig: e.Kubeconfig, Context: e.Context, Prune: e.Prune, ReconcileTimeout: e.ReconcileTimeout,
			InventoryPolicy: e.InventoryPolicy, AllowRemoteBases: e.AllowRemoteBases, AllowReplaceInventory: e.AllowReplaceInventory,
		}
	}
	for _, ref := range cfg.AllTargets() {
		if strings.EqualFold(ref.Repo, s.Repo) {
			ds.Reserved = append(ds.Reserved, ref.Target.Name)
		}
	}
	return ds
}

// engines makes a fresh engine per deploy: its discovery cache then sees
// CRDs that appeared in the cluster since the last deploy.
func engines() func(deployer.Target) *deploy.Engine {
	return func(t deployer.Target) *deploy.Engine {
		return deploy.New(deploy.NewGetter(t.Kubeconfig, t.Context))
	}
}
