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
	return runWith(ctx, forgeTable(), config.Load, args, getenv, stdout, stderr)
}

// runWith is run serving the forges of table, with the configuration
// load reads: a test serves a forge of its own through them.
func runWith(ctx context.Context, table []forgeRow, load func(string) (*config.Config, error), args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(ctx, table, args, stdout, stderr)
	if err != nil || o == nil {
		return err // --help printed, or a usage error
	}
	if o.showVersion {
		_, err := fmt.Fprintf(stdout, "kplan-webhook %s\n", version.String())
		return err
	}
	a, err := newApp(o, table, load, getenv, o.logger(stderr))
	if err != nil {
		return err
	}
	ls, err := a.listen(getenv)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kplan-webhook listening on http://%s with %d targets and %d branches that take theirs from the repository%s; %s\n", ls.public.Addr(), len(a.targets), len(a.sources), ls.replica, ls.metricsAt)
	return a.serve(ctx, ls)
}

// webhookFlags are kplan-webhook's flags, parsed.
type webhookFlags struct {
	configPath, listen, metricsListen string
	debug, showVersion                bool
	livePlans, driftChecks            bool
	le                                electionFlags
	// forges are the constructors of the forges of the table, configured
	// by their own flags.
	forges map[string]newForgeClient
}

// parseFlags parses args; nil flags and no error is --help printed.
func parseFlags(ctx context.Context, table []forgeRow, args []string, stdout, stderr io.Writer) (*webhookFlags, error) {
	parsed := false
	cmd := &cobra.Command{
		Use:   "kplan-webhook",
		Short: "kplan-webhook deploys on merge",
		Long: "kplan-webhook deploys on merge: GitHub calls it when a pull request merges (or a branch\n" +
			"is pushed), and it makes every configured target converge on that commit, then reports\n" +
			"back to GitHub (docs/webhook.md).\n\n" + environmentHelp(table),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags parsed, run goes on to wire the webhook: RunE only says so.
		RunE: func(*cobra.Command, []string) error { parsed = true; return nil },
	}
	o := &webhookFlags{forges: map[string]newForgeClient{}}
	fs := cmd.Flags()
	fs.StringVar(&o.configPath, "config", "/etc/kplan/webhook.yaml", "configuration file")
	fs.StringVar(&o.listen, "listen", ":8080", "address to serve /webhook, /healthz and /readyz on (the one GitHub reaches)")
	fs.StringVar(&o.metricsListen, "metrics-listen", "127.0.0.1:9090", "address to serve /metrics and /drift on, apart from --listen: they name targets and clusters; \"\" serves neither")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	for _, row := range table {
		o.forges[row.Forge] = row.Bind(fs)
	}
	fs.BoolVar(&o.livePlans, "live-plans", true, "dry-run each opened or pushed pull request against its targets' clusters and post what apply would do there now as a comment")
	fs.BoolVar(&o.driftChecks, "drift-checks", true, "dry-run each target's deployed commit at every resync interval and export what drifted (kplan_drift_objects, GET /drift)")
	o.le.bind(fs)
	cmd.SetArgs(singleDash(args, fs))
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun 'kplan-webhook --help' for usage", err)
	})
	if err := cmd.ExecuteContext(ctx); err != nil || !parsed {
		return nil, err
	}
	return o, nil
}

func (o *webhookFlags) logger(stderr io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// app is the webhook wired: what its phases (newApp, listen, serve)
// hand on to the next.
type app struct {
	flags   *webhookFlags
	cfg     *config.Config
	log     *slog.Logger
	reg     *prometheus.Registry
	secret  []byte
	forges  *forges
	targets []deployer.Target
	sources []deployer.Source
	mirrors *gitmirror.Mirrors
	// gitBases holds the git remote bases renders fetch: the deployer
	// prunes every cache under it, the live plans' and the drift
	// checks' included.
	gitBases      string
	deployMetrics *deployer.Prometheus
	drift         *liveplan.Drift
	handler       *webhook.Handler
	// fence, with --leader-elect, refuses the deployer's writes to the
	// clusters once this replica's hold on the Lease lapsed by its own
	// clock; nil without it.
	fence   *leader.Fence
	elector *leader.Elector // nil without --leader-elect
	// current is the deployer that takes deliveries: the only one
	// without --leader-elect, else the one of this replica's term while
	// it leads.
	current term
}

// newApp reads the configuration and the secrets and wires the forges,
// the deploys and the handler of deliveries.
func newApp(o *webhookFlags, table []forgeRow, load func(string) (*config.Config, error), getenv func(string) string, log *slog.Logger) (*app, error) {
	cfg, err := load(o.configPath)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	a := &app{flags: o, cfg: cfg, log: log}
	if a.secret, _, err = config.Secrets(getenv); err != nil {
		return nil, err
	}
	// Each repository's reports, comments, tokens and refs go to its own
	// forge.
	if a.forges, err = newForges(table, o.forges, forgeEnv{Config: cfg, Getenv: getenv, Logger: log}); err != nil {
		return nil, err
	}
	// Metrics on /metrics: a registry of this process, no globals.
	a.reg = prometheus.NewRegistry()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.wireDeploys(); err != nil {
		return nil, err
	}
	if err := a.wireHandler(); err != nil {
		return nil, err
	}
	return a, nil
}

// wireDeploys makes what the deploys, the live plans and the drift
// checks share: the targets, the git mirrors and their metrics.
func (a *app) wireDeploys() error {
	cfg := a.cfg
	for _, ref := range cfg.AllTargets() {
		a.targets = append(a.targets, deployer.TargetOf(ref))
	}
	for _, s := range cfg.Sources() {
		// The configuration's own targets of the repository reserve their
		// names.
		a.sources = append(a.sources, deployer.Source{Source: s, Reserved: cfg.TargetNames(s.Repo)})
	}
	repos := map[string]string{}
	for _, r := range cfg.Repositories {
		repos[cfg.CloneURL(r.Name)] = r.Name
	}
	a.mirrors = &gitmirror.Mirrors{Dir: filepath.Join(cfg.StateDir, "mirrors"), Tokens: a.forges, Repos: repos, ChangeRefs: a.forges.ChangeRefs(repos), Logger: a.log}
	var names []string
	for _, t := range a.targets {
		names = append(names, t.Key())
	}
	// Metrics are made once: a replica runs a deployer per leadership term.
	var err error
	if a.deployMetrics, err = deployer.NewPrometheus(a.reg, names...); err != nil {
		return err
	}
	a.gitBases = filepath.Join(cfg.StateDir, "git-bases")
	driftMetrics, err := liveplan.NewDriftMetrics(a.reg)
	if err != nil {
		return err
	}
	// One record of drift for every term: GET /drift shows the last checks.
	a.drift = &liveplan.Drift{Targets: cfg.AllTargets(), Mirrors: liveplan.GitMirror{Mirrors: a.mirrors}, Planner: planner,
		Interval: cfg.ResyncInterval, Metrics: driftMetrics, Logger: a.log.With("component", "drift"), GitBases: a.gitBases}
	if !a.flags.driftChecks {
		a.drift.Interval = 0
	}
	if !a.flags.le.enabled {
		a.current.set(a.newDeployer(), a.newLive())
	}
	return nil
}

func planner(t config.Target) liveplan.Planner {
	return liveplan.New(deploy.NewGetter(t.Kubeconfig, t.Context))
}

// newDeployer makes the deployer of a term.
func (a *app) newDeployer() *deployer.Deployer {
	dep := deployer.New(a.targets, deployer.GitMirror{Mirrors: a.mirrors}, a.forges, engines(a.fence), a.log, a.sources...)
	dep.Resync = a.cfg.ResyncInterval
	dep.Metrics = a.deployMetrics
	dep.Reviews = a.forges
	dep.GitBases = a.gitBases
	dep.GitBasesMaxAge = a.cfg.GitBasesMaxAge
	return dep
}

// newLive makes the live plans' runner of a term; nil with
// --live-plans=false.
func (a *app) newLive() *liveplan.Runner {
	if !a.flags.livePlans {
		return nil
	}
	return &liveplan.Runner{Mirrors: liveplan.GitMirror{Mirrors: a.mirrors}, Planner: planner, Post: liveplan.CommentPoster{Comments: a.forges, MaxChars: a.forges.maxCommentChars}, Logger: a.log.With("component", "liveplan"),
		GitBases: a.gitBases}
}

// wireHandler makes the handler of deliveries, which hands their intents
// to the current term.
func (a *app) wireHandler() error {
	hookMetrics, err := webhook.NewMetrics(a.reg)
	if err != nil {
		return err
	}
	a.handler, err = webhook.New(webhook.Options{
		Secret: a.secret, Config: a.cfg, Receiver: a.forges.receiver(), Logger: a.log, Observe: hookMetrics.Observe,
		Ready: a.ready, LivePlan: a.livePlan, Enqueue: a.enqueue,
	})
	return err
}

// ready is /readyz: the deployer's readiness, or a leader to forward to.
func (a *app) ready() error {
	if dep := a.current.get(); dep != nil {
		return dep.Ready()
	}
	if _, addr := a.elector.Route(); addr != "" {
		return nil // deliveries go to the leader
	}
	return errors.New("no replica leads yet")
}

// livePlan submits a change's live plan. Only the deployer's replica
// (the leader) plans: the others forward deliveries to it.
func (a *app) livePlan(i webhook.Intent) {
	live := a.current.live()
	if live == nil {
		a.log.Warn("live plan delivery received while no live plans run here (disabled, or leadership ended)", "delivery", i.DeliveryID, "pr", i.PR)
		return
	}
	live.Submit(liveplan.Request{Repo: i.Repo, CloneURL: i.CloneURL, Base: i.Branch, PR: i.PR, SHA: i.SHA, Delivery: i.DeliveryID, Targets: i.Targets})
}

// enqueue submits a delivery's deploys to the current term's deployer.
func (a *app) enqueue(i webhook.Intent) {
	dep := a.current.get()
	if dep == nil {
		// Leadership ended between routing and here: the next
		// leader's term starts with a resync of every target, which
		// deploys the branch, this commit or newer.
		a.log.Warn("delivery received as leadership ended; the next leader deploys the branch tip", "delivery", i.DeliveryID, "sha", i.SHA)
		return
	}
	for _, t := range i.Targets {
		if err := dep.Submit(t.Name, deployer.Request{SHA: i.SHA, PR: i.PR, Delivery: i.DeliveryID, Acknowledged: i.AcknowledgedBy}); err != nil {
			a.log.Error("submit", "target", t.Name, "err", err)
		}
	}
}

// listeners are what serve serves: the public listener (behind the
// forwarder to the leader with --leader-elect) and the metrics one.
type listeners struct {
	public    net.Listener
	front     http.Handler
	metrics   net.Listener // nil: --metrics-listen ""
	replica   string       // " as replica ...", or ""
	metricsAt string       // for the start-up line
}

// listen opens the listeners and, with --leader-elect, makes the elector
// and the forwarder in front of the handler.
func (a *app) listen(getenv func(string) string) (*listeners, error) {
	o := a.flags
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	ls := &listeners{public: ln, front: a.handler, metricsAt: `no /metrics or /drift (--metrics-listen is "")`}
	if o.le.enabled {
		if a.elector, ls.front, err = o.le.setup(getenv, ln.Addr(), a.secret, a.forges.receiver(), a.handler, a.reg, a.log); err != nil {
			ln.Close()
			return nil, err
		}
		a.fence = a.elector.Fence()
		ls.replica = fmt.Sprintf(" as replica %s, campaigning for Lease %s/%s", o.le.identity, o.le.namespace, o.le.name)
	}
	// /metrics and /drift name targets, clusters and drifted fields: they
	// are served on their own listener, which the deploy manifests'
	// Service exposes apart from the port an Ingress routes to GitHub.
	// The public listener answers 404 for them.
	if o.metricsListen != "" {
		if ls.metrics, err = net.Listen("tcp", o.metricsListen); err != nil {
			ln.Close()
			return nil, fmt.Errorf("--metrics-listen on %s: %w", o.metricsListen, err)
		}
		ls.metricsAt = fmt.Sprintf("/metrics and /drift on http://%s", ls.metrics.Addr())
	}
	return ls, nil
}

// serve serves the listeners and runs the deploys until ctx ends, a
// server fails or the deploys crash, then shuts down.
func (a *app) serve(ctx context.Context, ls *listeners) error {
	// The body is read at the client's pace: bound it.
	// Headers sit outside the webhook's body budget: keep them small.
	srv := &http.Server{Handler: ls.front, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	metricsMux.Handle("GET /drift", a.drift)
	metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// The deploys' goroutine: a kplan bug there (a panic a deploy or live
	// plan did not recover) ends run with an error, so the program exits
	// 1 asking for a report, never with Go's 2.
	termErr := make(chan error, 1)
	wg.Go(func() {
		if err := crash.Catch(func() error { a.runDeploys(runCtx); return nil }); err != nil {
			termErr <- err
		}
	})
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ls.public) }()
	if ls.metrics != nil {
		go func() { serveErr <- metricsSrv.Serve(ls.metrics) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-termErr:
	}
	shutdown, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	srv.Shutdown(shutdown)
	if ls.metrics != nil {
		metricsSrv.Shutdown(shutdown)
	}
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// runDeploys runs the terms of this replica until ctx ends: one without
// --leader-elect, else one per leadership.
func (a *app) runDeploys(ctx context.Context) {
	if a.elector == nil {
		runTerm(ctx, a.current.get(), a.current.live(), a.drift)
		return
	}
	// A fresh deployer per term: it resyncs every target against its
	// branch when it starts (what was deployed is recorded in the
	// cluster), and stops deploying the moment leadership is lost.
	a.elector.Run(ctx, func(ctx context.Context) {
		dep, live := a.newDeployer(), a.newLive()
		a.current.set(dep, live)
		defer a.current.set(nil, nil)
		runTerm(ctx, dep, live, a.drift)
	})
}

// environment is what kplan-webhook reads from its environment, listed
// in --help: secrets never go in flags or the configuration file. Each
// forge of the table lists its own.
func environment(table []forgeRow) [][2]string {
	env := [][2]string{
		{config.EnvWebhookSecret, "the secret GitHub signs deliveries with"},
		{config.EnvWebhookSecretFile, "... or a file holding it (a mounted Secret)"},
	}
	for _, row := range table {
		env = append(env, row.Env...)
	}
	return append(env, [][2]string{
		{"KUBECONFIG", "--leader-elect: the cluster holding the Lease (default: in-cluster)"},
		{"POD_NAME", "--leader-elect: this replica's name (default: the hostname)"},
		{"POD_NAMESPACE", "--leader-elect: default of --leader-election-namespace"},
		{"POD_IP", "--leader-elect: default host of --advertise-address"},
	}...)
}

func environmentHelp(table []forgeRow) string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, e := range environment(table) {
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

func (f *electionFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "leader-elect", false, "run as one of several replicas: the one holding a Kubernetes Lease deploys, the others forward deliveries to it")
	fs.StringVar(&f.name, "leader-election-id", "kplan-webhook", "name of the Lease")
	fs.StringVar(&f.namespace, "leader-election-namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the pod's service account namespace)")
	fs.StringVar(&f.advertise, "advertise-address", "", "host:port the other replicas forward deliveries to (default $POD_IP and the port of --listen)")
	fs.DurationVar(&f.lease, "leader-elect-lease-duration", 15*time.Second, "how long the other replicas wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops deploying")
	fs.DurationVar(&f.retry, "leader-elect-retry-period", 2*time.Second, "how often the replicas try to acquire or renew the Lease")
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
