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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/ghauth"
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
	listen := fs.String("listen", ":8080", "address to serve /webhook, /healthz, /readyz and /metrics on")
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
	secret, _, err := config.Secrets(getenv)
	if err != nil {
		return err
	}
	// One source of GitHub tokens for the API client and the git mirror:
	// a token, a token file re-read when it changes, or a GitHub App whose
	// installation tokens are minted and refreshed (internal/ghauth).
	auth, err := config.GitHubAuthFrom(getenv)
	if err != nil {
		return err
	}
	tokens, err := ghauth.New(auth, cfg.APIBaseURL, nil)
	if err != nil {
		return err
	}
	gh := github.NewClient(&http.Client{Timeout: 30 * time.Second, Transport: ghauth.Transport(tokens, nil)})
	if gh.BaseURL, err = url.Parse(cfg.APIBaseURL); err != nil {
		return fmt.Errorf("%s: apiBaseURL: %w", cfg.File, err)
	}
	// Metrics on /metrics: a registry of this process, no globals.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hookMetrics, err := webhook.NewMetrics(reg)
	if err != nil {
		return err
	}

	var targets []deployer.Target
	for _, ref := range cfg.AllTargets() {
		targets = append(targets, targetOf(ref))
	}
	var sources []deployer.Source
	for _, s := range cfg.Sources() {
		sources = append(sources, sourceOf(cfg, s))
	}
	repos := map[string]string{}
	for _, r := range cfg.Repositories {
		repos[cfg.CloneURL(r.Name)] = r.Name
	}
	mirrors := &gitmirror.Mirrors{Dir: filepath.Join(cfg.StateDir, "mirrors"), Tokens: tokens, Repos: repos, Logger: log}
	dep := deployer.New(targets, mirrors, ghreport.New(gh, log), engines(), log, sources...)
	dep.Resync = cfg.ResyncInterval
	var names []string
	for _, t := range targets {
		names = append(names, t.Key())
	}
	if dep.Metrics, err = deployer.NewPrometheus(reg, names...); err != nil {
		return err
	}

	h, err := webhook.New(webhook.Options{
		Secret: secret, Config: cfg, Ready: dep.Ready, Logger: log, Observe: hookMetrics.Observe,
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
	log.Info("GitHub credentials", "kind", ghauth.Describe(tokens))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/", h)
	fmt.Fprintf(stdout, "kplan-webhook listening on http://%s with %d targets and %d branches that take theirs from the repository\n", ln.Addr(), len(targets), len(sources))
	// The body is read at the client's pace: bound it.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}

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
