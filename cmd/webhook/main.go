// Command kplan-webhook deploys on merge: GitHub (or GitLab) calls it
// when a pull request (merge request) merges or a branch is pushed, and
// it makes every configured target converge on that commit, then
// reports back to the forge.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/github/deploys"
	"github.com/kplan-dev/kplan/internal/ghauth"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/leader"
	"github.com/kplan-dev/kplan/internal/liveplan"
	_ "github.com/kplan-dev/kplan/internal/noi18n" // before kubectl's packages start
	"github.com/kplan-dev/kplan/internal/version"
	"github.com/kplan-dev/kplan/internal/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain runs kplan-webhook and returns the status it ends with, having
// reported why: 1 for any error, a crash (a panic in run, recovered)
// included, which is written with its stack and a request for a report.
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return crash.Exit(stderr, "kplan-webhook", func() error { return run(ctx, args, getenv, stdout, stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	parsed := false
	cmd := &cobra.Command{
		Use:   "kplan-webhook",
		Short: "kplan-webhook deploys on merge",
		Long: "kplan-webhook deploys on merge: GitHub calls it when a pull request merges (or a branch\n" +
			"is pushed), and it makes every configured target converge on that commit, then reports\n" +
			"back to GitHub (docs/webhook.md).\n\n" + environmentHelp(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags parsed, run goes on to wire the webhook: RunE only says so.
		RunE: func(*cobra.Command, []string) error { parsed = true; return nil },
	}
	fs := cmd.Flags()
	configPath := fs.String("config", "/etc/kplan/webhook.yaml", "configuration file")
	listen := fs.String("listen", ":8080", "address to serve /webhook, /healthz and /readyz on (the one GitHub reaches)")
	metricsListen := fs.String("metrics-listen", "127.0.0.1:9090", "address to serve /metrics and /drift on, apart from --listen: they name targets and clusters; \"\" serves neither")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	planAuthor := fs.String("plan-author", "github-actions[bot]", "login whose kplan plan comment a merge is compared with (the Action's token's user)")
	gitLabPlanAuthor := fs.String("gitlab-plan-author", "", "GitLab username whose kplan plan note a merge is compared with (the CI job's access token's user); default: KPLAN_GITLAB_TOKEN's own user")
	livePlans := fs.Bool("live-plans", true, "dry-run each opened or pushed pull request against its targets' clusters and post what apply would do there now as a comment")
	driftChecks := fs.Bool("drift-checks", true, "dry-run each target's deployed commit at every resync interval and export what drifted (kplan_drift_objects, GET /drift)")
	var le electionFlags
	fs.BoolVar(&le.enabled, "leader-elect", false, "run as one of several replicas: the one holding a Kubernetes Lease deploys, the others forward deliveries to it")
	fs.StringVar(&le.name, "leader-election-id", "kplan-webhook", "name of the Lease")
	fs.StringVar(&le.namespace, "leader-election-namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the pod's service account namespace)")
	fs.StringVar(&le.advertise, "advertise-address", "", "host:port the other replicas forward deliveries to (default $POD_IP and the port of --listen)")
	fs.DurationVar(&le.lease, "leader-elect-lease-duration", 15*time.Second, "how long the other replicas wait after the leader's last renewal before taking over")
	fs.DurationVar(&le.renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops deploying")
	fs.DurationVar(&le.retry, "leader-elect-retry-period", 2*time.Second, "how often the replicas try to acquire or renew the Lease")
	cmd.SetArgs(singleDash(args, fs))
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun 'kplan-webhook --help' for usage", err)
	})
	if err := cmd.ExecuteContext(ctx); err != nil || !parsed {
		return err // --help printed, or a usage error
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
	for _, w := range cfg.Warnings {
		log.Warn(w)
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
	gh, err := github.NewClient(cfg.APIBaseURL, ghauth.Transport(tokens, nil))
	if err != nil {
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
		targets = append(targets, deployer.TargetOf(ref))
	}
	var sources []deployer.Source
	for _, s := range cfg.Sources() {
		// The configuration's own targets of the repository reserve their
		// names.
		sources = append(sources, deployer.Source{Source: s, Reserved: cfg.TargetNames(s.Repo)})
	}
	repos := map[string]string{}
	for _, r := range cfg.Repositories {
		repos[cfg.CloneURL(r.Name)] = r.Name
	}
	ghReporter := deploys.NewReporter(gh, log)
	ghReporter.PlanAuthor = *planAuthor
	// Each repository's reports, comments, tokens and refs go to its own
	// forge: GitHub's, or GitLab's for repositories configured on it.
	reporter, err := newForges(cfg, getenv, ghReporter, tokens, *gitLabPlanAuthor, log)
	if err != nil {
		return err
	}
	mirrors := &gitmirror.Mirrors{Dir: filepath.Join(cfg.StateDir, "mirrors"), Tokens: reporter, Repos: repos, ChangeRefs: reporter.ChangeRefs(repos), Logger: log}
	var names []string
	for _, t := range targets {
		names = append(names, t.Key())
	}
	// Metrics are made once: a replica runs a deployer per leadership term.
	deployMetrics, err := deployer.NewPrometheus(reg, names...)
	if err != nil {
		return err
	}
	// The git remote bases renders fetch: the deployer prunes every cache
	// under it, the live plans' and the drift checks' included.
	gitBases := filepath.Join(cfg.StateDir, "git-bases")
	planner := func(t config.Target) liveplan.Planner {
		return liveplan.New(deploy.NewGetter(t.Kubeconfig, t.Context))
	}
	newLive := func() *liveplan.Runner {
		if !*livePlans {
			return nil
		}
		return &liveplan.Runner{Mirrors: liveplan.GitMirror{Mirrors: mirrors}, Planner: planner, Post: liveplan.CommentPoster{Comments: reporter, MaxChars: reporter.maxCommentChars}, Logger: log.With("component", "liveplan"),
			GitBases: gitBases}
	}
	driftMetrics, err := liveplan.NewDriftMetrics(reg)
	if err != nil {
		return err
	}
	// One record of drift for every term: GET /drift shows the last checks.
	drift := &liveplan.Drift{Targets: cfg.AllTargets(), Mirrors: liveplan.GitMirror{Mirrors: mirrors}, Planner: planner,
		Interval: cfg.ResyncInterval, Metrics: driftMetrics, Logger: log.With("component", "drift"), GitBases: gitBases}
	if !*driftChecks {
		drift.Interval = 0
	}
	// fence, with --leader-elect, refuses the deployer's writes to the
	// clusters once this replica's hold on the Lease lapsed by its own
	// clock; nil without it.
	var fence *leader.Fence
	newDeployer := func() *deployer.Deployer {
		dep := deployer.New(targets, deployer.GitMirror{Mirrors: mirrors}, reporter, engines(fence), log, sources...)
		dep.Resync = cfg.ResyncInterval
		dep.Metrics = deployMetrics
		dep.Reviews = reporter
		dep.GitBases = gitBases
		dep.GitBasesMaxAge = cfg.GitBasesMaxAge
		return dep
	}

	// current is the deployer that takes deliveries: the only one without
	// --leader-elect, else the one of this replica's term while it leads.
	var current term
	var elector *leader.Elector
	if !le.enabled {
		current.set(newDeployer(), newLive())
	}
	h, err := webhook.New(webhook.Options{
		Secret: secret, Config: cfg, Receiver: reporter.receiver(), Logger: log, Observe: hookMetrics.Observe,
		Ready: func() error {
			if dep := current.get(); dep != nil {
				return dep.Ready()
			}
			if _, addr := elector.Route(); addr != "" {
				return nil // deliveries go to the leader
			}
			return errors.New("no replica leads yet")
		},
		LivePlan: func(i webhook.Intent) {
			// Only the deployer's replica (the leader) plans: the others
			// forward deliveries to it.
			live := current.live()
			if live == nil {
				log.Warn("live plan delivery received while no live plans run here (disabled, or leadership ended)", "delivery", i.DeliveryID, "pr", i.PR)
				return
			}
			live.Submit(liveplan.Request{Repo: i.Repo, CloneURL: i.CloneURL, Base: i.Branch, PR: i.PR, SHA: i.SHA, Delivery: i.DeliveryID, Targets: i.Targets})
		},
		Enqueue: func(i webhook.Intent) {
			dep := current.get()
			if dep == nil {
				// Leadership ended between routing and here: the next
				// leader's term starts with a resync of every target, which
				// deploys the branch, this commit or newer.
				log.Warn("delivery received as leadership ended; the next leader deploys the branch tip", "delivery", i.DeliveryID, "sha", i.SHA)
				return
			}
			for _, t := range i.Targets {
				if err := dep.Submit(t.Name, deployer.Request{SHA: i.SHA, PR: i.PR, Delivery: i.DeliveryID, Acknowledged: i.AcknowledgedBy}); err != nil {
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
	var front http.Handler = h
	replica := ""
	if le.enabled {
		if elector, front, err = le.setup(getenv, ln.Addr(), secret, reporter.receiver(), h, reg, log); err != nil {
			ln.Close()
			return err
		}
		fence = elector.Fence()
		replica = fmt.Sprintf(" as replica %s, campaigning for Lease %s/%s", le.identity, le.namespace, le.name)
	}
	// /metrics and /drift name targets, clusters and drifted fields: they
	// are served on their own listener, which the deploy manifests'
	// Service exposes apart from the port an Ingress routes to GitHub.
	// The public listener answers 404 for them.
	var metricsLn net.Listener
	metricsAt := `no /metrics or /drift (--metrics-listen is "")`
	if *metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", *metricsListen); err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen on %s: %w", *metricsListen, err)
		}
		metricsAt = fmt.Sprintf("/metrics and /drift on http://%s", metricsLn.Addr())
	}
	fmt.Fprintf(stdout, "kplan-webhook listening on http://%s with %d targets and %d branches that take theirs from the repository%s; %s\n", ln.Addr(), len(targets), len(sources), replica, metricsAt)
	// The body is read at the client's pace: bound it.
	// Headers sit outside the webhook's body budget: keep them small.
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	metricsMux.Handle("GET /drift", drift)
	metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	runDeploys := func() {
		if elector == nil {
			runTerm(runCtx, current.get(), current.live(), drift)
			return
		}
		// A fresh deployer per term: it resyncs every target against its
		// branch when it starts (what was deployed is recorded in the
		// cluster), and stops deploying the moment leadership is lost.
		elector.Run(runCtx, func(ctx context.Context) {
			dep, live := newDeployer(), newLive()
			current.set(dep, live)
			defer current.set(nil, nil)
			runTerm(ctx, dep, live, drift)
		})
	}
	// The deploys' goroutine: a kplan bug there (a panic a deploy or live
	// plan did not recover) ends run with an error, so the program exits
	// 1 asking for a report, never with Go's 2.
	termErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := crash.Catch(func() error { runDeploys(); return nil }); err != nil {
			termErr <- err
		}
	}()
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	if metricsLn != nil {
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
	}
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-termErr:
	}
	shutdown, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	srv.Shutdown(shutdown)
	if metricsLn != nil {
		metricsSrv.Shutdown(shutdown)
	}
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// environment is what kplan-webhook reads from its environment, listed
// in --help: secrets never go in flags or the configuration file.
var environment = [][2]string{
	{config.EnvWebhookSecret, "the secret GitHub signs deliveries with"},
	{config.EnvWebhookSecretFile, "... or a file holding it (a mounted Secret)"},
	{config.EnvGitHubToken, "a token for GitHub's API and git"},
	{config.EnvGitHubTokenFile, "... or a file holding it, re-read when it changes"},
	{config.EnvGitHubAppID, "a GitHub App instead of a token: its ID,"},
	{config.EnvGitHubAppPrivateKey, "its private key (PEM)"},
	{config.EnvGitHubAppPrivateKeyFile, "... or the key's file"},
	{config.EnvGitHubAppInstallationID, "the installation to act as (default: looked up per repository)"},
	{config.EnvGitLabToken, "forge: gitlab repositories: an access token (api scope) for GitLab's API and git"},
	{config.EnvGitLabTokenFile, "... or a file holding it, re-read when it changes"},
	{config.EnvGitLabWebhookSecret, "the GitLab webhook's secret token (default: the webhook secret)"},
	{config.EnvGitLabWebhookSecretFile, "... or a file holding it"},
	{"KUBECONFIG", "--leader-elect: the cluster holding the Lease (default: in-cluster)"},
	{"POD_NAME", "--leader-elect: this replica's name (default: the hostname)"},
	{"POD_NAMESPACE", "--leader-elect: default of --leader-election-namespace"},
	{"POD_IP", "--leader-elect: default host of --advertise-address"},
}

func environmentHelp() string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, e := range environment {
		fmt.Fprintf(&b, "  %-34s %s\n", e[0], e[1])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// singleDash rewrites the single-dash long flags Go's flag package took
// (-config), which kplan-webhook parsed before it moved to cobra, to
// their double-dash form, so a manifest written for it keeps working.
func singleDash(args []string, fs *pflag.FlagSet) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if fs.Lookup(name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// engines makes a fresh engine per deploy: its discovery cache then sees
// CRDs that appeared in the cluster since the last deploy. With a fence
// (--leader-elect), every write the engine sends (each apply, prune,
// inventory update and record of the outcome) is checked against it as
// it leaves: a replica paused or cut off past its renew deadline writes
// nothing more, whichever goroutine runs first when it resumes, and the
// objects its interrupted apply created stay in the inventory cli-utils
// added them to before applying, for the next deploy to prune or adopt.
func engines(fence *leader.Fence) func(deployer.Target) deployer.Engine {
	return func(t deployer.Target) deployer.Engine {
		if fence == nil {
			return deploy.New(deploy.NewGetter(t.Kubeconfig, t.Context))
		}
		return deploy.New(deploy.NewGetter(t.Kubeconfig, t.Context, fence.Transport))
	}
}

// runTerm runs what the replica that deploys runs, until ctx ends: the
// deployer, the live plans of pull requests (nil: off) and the drift
// checks, which only read the clusters but are done once, not by every
// replica.
func runTerm(ctx context.Context, dep *deployer.Deployer, live *liveplan.Runner, drift *liveplan.Drift) {
	var wg sync.WaitGroup
	if live != nil {
		wg.Go(func() { live.Run(ctx) })
	}
	wg.Go(func() { drift.Run(ctx) })
	dep.Run(ctx)
	wg.Wait()
}

// term holds the deployer that takes deliveries, if any, and the runner
// of live plans beside it.
type term struct {
	mu   sync.Mutex
	dep  *deployer.Deployer
	plan *liveplan.Runner
}

func (t *term) get() *deployer.Deployer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dep
}

func (t *term) live() *liveplan.Runner {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.plan
}

func (t *term) set(d *deployer.Deployer, live *liveplan.Runner) {
	t.mu.Lock()
	t.dep, t.plan = d, live
	t.mu.Unlock()
}

// electionFlags are the --leader-elect flags; setup fills identity.
type electionFlags struct {
	enabled             bool
	name, namespace     string
	advertise, identity string
	lease, renew, retry time.Duration
}

// setup makes the elector and the front that forwards deliveries to the
// leader while this replica does not lead.
func (f *electionFlags) setup(getenv func(string) string, listener net.Addr, secret []byte, receiver forge.Receiver, local http.Handler, reg prometheus.Registerer, log *slog.Logger) (*leader.Elector, http.Handler, error) {
	var err error
	if f.namespace, err = leader.Namespace(f.namespace, getenv, leader.ServiceAccountNamespace); err != nil {
		return nil, nil, err
	}
	addr, err := leader.AdvertiseAddress(f.advertise, getenv, listener)
	if err != nil {
		return nil, nil, err
	}
	name := getenv("POD_NAME")
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return nil, nil, fmt.Errorf("--leader-elect: no POD_NAME and no hostname to name this replica: %w", err)
		}
	}
	f.identity = leader.Identity(name, addr)
	leases, err := leaseClient(getenv, f.renew)
	if err != nil {
		return nil, nil, err
	}
	m, err := leader.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	el, err := leader.New(leader.Config{Leases: leases, Namespace: f.namespace, Name: f.name, Identity: f.identity,
		LeaseDuration: f.lease, RenewDeadline: f.renew, RetryPeriod: f.retry, Logger: log, Metrics: m})
	if err != nil {
		return nil, nil, err
	}
	front, err := leader.NewForwarder(leader.ForwarderOptions{Router: el, Local: local, Secret: secret, Receiver: receiver, Identity: f.identity, Logger: log, Metrics: m})
	if err != nil {
		return nil, nil, err
	}
	return el, front, nil
}

// leaseClient reaches the Lease through KUBECONFIG when it is set, else
// the pod's in-cluster configuration.
func leaseClient(getenv func(string) string, renew time.Duration) (coordinationv1client.LeasesGetter, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kc := getenv("KUBECONFIG"); kc != "" {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kc)}
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			return nil, fmt.Errorf("--leader-elect: KUBECONFIG=%s: %w", kc, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("--leader-elect: no cluster to hold the Lease (not in a pod, and KUBECONFIG is not set): %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	// A request that hangs must not outlast the renew deadline.
	cfg.Timeout = renew / 2
	cfg.UserAgent = "kplan-webhook/leader-election"
	return coordinationv1client.NewForConfig(cfg)
}
