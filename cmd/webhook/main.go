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
	"slices"
	"strconv"
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
	"github.com/kplan-dev/kplan/internal/status"
	"github.com/kplan-dev/kplan/internal/version"
	"github.com/kplan-dev/kplan/internal/webhook"
	_ "time/tzdata" // deployWindows' time zones, in an image without /usr/share/zoneinfo
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
	maxParallelDeploys                int
	statusDeploys                     int
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
	fs.StringVar(&o.metricsListen, "metrics-listen", "127.0.0.1:9090", "address to serve /metrics, /drift and the status page (/, /status.json) on, apart from --listen: they name targets and clusters; \"\" serves none of them")
	fs.IntVar(&o.statusDeploys, "status-deploys", status.DefaultKeep, "how many deploys the status page keeps per target (in memory)")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	for _, row := range table {
		o.forges[row.Forge] = row.Bind(fs)
	}
	fs.BoolVar(&o.livePlans, "live-plans", true, "dry-run each opened or pushed pull request against its targets' clusters and post what apply would do there now as a comment")
	fs.BoolVar(&o.driftChecks, "drift-checks", true, "dry-run each target's deployed commit at every resync interval and export what drifted (kplan_drift_objects, GET /drift)")
	fs.IntVar(&o.maxParallelDeploys, "max-parallel-deploys", deployer.DefaultMaxParallel, "how many deploys (render, apply, wait for the objects) run at once across targets; the others wait their turn (kplan_deploys_queued); 0: no limit")
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
	if err := o.le.check(); err != nil {
		return nil, err
	}
	if o.statusDeploys < 1 {
		return nil, fmt.Errorf("--status-deploys %d: want 1 or more\nRun 'kplan-webhook --help' for usage", o.statusDeploys)
	}
	if o.maxParallelDeploys < 0 {
		return nil, fmt.Errorf("--max-parallel-deploys %d: want 0 (no limit) or more\nRun 'kplan-webhook --help' for usage", o.maxParallelDeploys)
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
	flags  *webhookFlags
	cfg    *config.Config
	log    *slog.Logger
	reg    *prometheus.Registry
	secret []byte
	// adminToken, if set, guards the status page and /drift
	// (KPLAN_ADMIN_TOKEN).
	adminToken []byte
	// board is the status page's record, fed by the deployer of every
	// term and shard.
	board   *status.Board
	forges  *forges
	targets []deployer.Target
	sources []deployer.Source
	mirrors *gitmirror.Mirrors
	// gitBases holds the git remote bases renders fetch: the deployer
	// prunes every cache under it, the live plans' and the drift
	// checks' included. With shards, each shard's deployer has and
	// prunes a directory of its own under it (shardGitBases).
	gitBases      string
	deployMetrics *deployer.Prometheus
	// slots bound the deploys running at once in this process
	// (--max-parallel-deploys), shared by the deployer of every term and
	// shard.
	slots   *deployer.Slots
	drift   *liveplan.Drift
	handler *webhook.Handler
	// fence, with --leader-elect, refuses the deployer's writes to the
	// clusters once this replica's hold on the Lease lapsed by its own
	// clock; nil without it.
	fence   *leader.Fence
	elector *leader.Elector // nil without --leader-elect or with --shards
	// shards and dispatch, with --shards above 1, hold this replica's
	// share of the shards and route each delivery's part to the replica
	// holding its shards.
	shards   *leader.Shards
	dispatch *leader.Dispatcher
	// terms are the deployers that take deliveries, by shard: the only
	// one (shard 0) without --leader-elect, else that of this replica's
	// term while it leads, else one per shard this replica holds.
	terms terms
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
	if a.adminToken, err = config.AdminToken(getenv); err != nil {
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
	a.slots = deployer.NewSlots(a.flags.maxParallelDeploys, a.deployMetrics.Slots)
	a.board = &status.Board{Keep: a.flags.statusDeploys, Links: a.forges.Links, Slots: a.slots}
	a.board.Declare(a.targets...)
	a.gitBases = filepath.Join(cfg.StateDir, "git-bases")
	driftMetrics, err := liveplan.NewDriftMetrics(a.reg)
	if err != nil {
		return err
	}
	// One record of drift for every term: GET /drift shows the last checks.
	a.drift = &liveplan.Drift{Targets: cfg.AllTargets(), Mirrors: liveplan.GitMirror{Mirrors: a.mirrors}, Planner: planner,
		Interval: cfg.ResyncInterval, Metrics: driftMetrics, Logger: a.log.With("component", "drift"), GitBases: a.planGitBases()}
	if !a.flags.driftChecks {
		a.drift.Interval = 0
	} else {
		a.board.Drift = a.drift.Status
	}
	if !a.flags.le.enabled {
		a.terms.set(0, a.newDeployer(a.targets, nil, a.gitBases), a.newLive())
	}
	return nil
}

func planner(t config.Target) liveplan.Planner {
	return liveplan.New(deploy.NewGetter(t.Kubeconfig, t.Context))
}

// newDeployer makes the deployer of a term: of targets, writing through
// fence (nil: unfenced), its git bases under gitBases.
func (a *app) newDeployer(targets []deployer.Target, fence *leader.Fence, gitBases string) *deployer.Deployer {
	dep := deployer.New(targets, deployer.GitMirror{Mirrors: a.mirrors}, a.forges, engines(fence), a.log, a.sources...)
	dep.Resync = a.cfg.ResyncInterval
	dep.Metrics = a.deployMetrics
	dep.Reviews = a.forges
	dep.GitBases = gitBases
	dep.GitBasesMaxAge = a.cfg.GitBasesMaxAge
	dep.Slots = a.slots
	dep.DeployNowLabel = a.cfg.DeployNowLabel
	dep.Status = a.board
	return dep
}

// newLive makes the live plans' runner of a term; nil with
// --live-plans=false.
func (a *app) newLive() *liveplan.Runner {
	if !a.flags.livePlans {
		return nil
	}
	return &liveplan.Runner{Mirrors: liveplan.GitMirror{Mirrors: a.mirrors}, Planner: planner, Post: liveplan.CommentPoster{Comments: a.forges, MaxChars: a.forges.maxCommentChars}, Logger: a.log.With("component", "liveplan"),
		GitBases: a.planGitBases()}
}

// planGitBases is the git-base cache of the live plans and drift checks:
// the deployer's, pruned by it. With shards they run with shard 0 and
// share its deployer's.
func (a *app) planGitBases() string {
	if a.flags.le.sharded() {
		return shardGitBases(a.gitBases, 0)
	}
	return a.gitBases
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

// ready is /readyz: the deployer's readiness, or a leader to forward to,
// or with shards the holders known.
func (a *app) ready() error {
	if a.shards != nil {
		return a.shards.Ready()
	}
	if dep, _ := a.terms.get(0); dep != nil {
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
	if a.dispatch != nil {
		// With shards, shard 0's holder plans, as the leader does.
		a.dispatch.Dispatch(leader.ShardDelivery{Delivery: i.DeliveryID, Repo: i.Repo, Branch: i.Branch, SHA: i.SHA, PR: i.PR, LivePlan: true, Shards: []int{0}})
		return
	}
	_, live := a.terms.get(0)
	if live == nil {
		a.log.Warn("live plan delivery received while no live plans run here (disabled, or leadership ended)", "delivery", i.DeliveryID, "pr", i.PR)
		return
	}
	live.Submit(liveplan.Request{Repo: i.Repo, CloneURL: i.CloneURL, Base: i.Branch, PR: i.PR, SHA: i.SHA, Delivery: i.DeliveryID, Targets: i.Targets})
}

// enqueue submits a delivery's deploys to the current term's deployer,
// or with shards routes them to the holders of the targets' shards.
func (a *app) enqueue(i webhook.Intent) {
	if a.dispatch != nil {
		a.dispatch.Dispatch(leader.ShardDelivery{Delivery: i.DeliveryID, Repo: i.Repo, Branch: i.Branch, SHA: i.SHA, PR: i.PR, Acknowledged: i.AcknowledgedBy,
			DeployNow: i.DeployNowBy, Shards: a.shardsOf(i.Targets)})
		return
	}
	dep, _ := a.terms.get(0)
	if dep == nil {
		// Leadership ended between routing and here: the next
		// leader's term starts with a resync of every target, which
		// deploys the branch, this commit or newer.
		a.log.Warn("delivery received as leadership ended; the next leader deploys the branch tip", "delivery", i.DeliveryID, "sha", i.SHA)
		return
	}
	for _, t := range i.Targets {
		if err := dep.Submit(t.Name, deployer.Request{SHA: i.SHA, PR: i.PR, Delivery: i.DeliveryID, Acknowledged: i.AcknowledgedBy, DeployNow: i.DeployNowBy}); err != nil {
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
	ls := &listeners{public: ln, front: a.handler, metricsAt: `no /metrics, /drift or status page (--metrics-listen is "")`}
	switch {
	case o.le.sharded():
		if err := a.setupShards(getenv, ln.Addr()); err != nil {
			ln.Close()
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("POST "+leader.ShardDeliveryPath, a.dispatch)
		mux.Handle("/", a.handler)
		ls.front = mux
		ls.replica = fmt.Sprintf(" as replica %s, holding its share of %d shards on Leases %s/%s-shard-0…%d", o.le.identity, o.le.shards, o.le.namespace, o.le.name, o.le.shards-1)
	case o.le.enabled:
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
		ls.metricsAt = fmt.Sprintf("the status page, /metrics and /drift on http://%s", ls.metrics.Addr())
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
	// The status page and /drift show what each target runs and what
	// drifted: KPLAN_ADMIN_TOKEN, when set, guards them (Prometheus
	// scrapes /metrics as before).
	page := status.Handler{Board: a.board, Logger: a.log}
	metricsMux.Handle("GET /drift", status.Guard(a.adminToken, a.drift))
	metricsMux.Handle("GET /{$}", status.Guard(a.adminToken, page))
	metricsMux.Handle("GET /status.json", status.Guard(a.adminToken, page))
	metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.dispatch != nil {
		defer a.dispatch.Close()
	}
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
	switch {
	case a.shards != nil:
		a.shards.Run(ctx, a.runShard)
	case a.elector != nil:
		// A fresh deployer per term: it resyncs every target against its
		// branch when it starts (what was deployed is recorded in the
		// cluster), and stops deploying the moment leadership is lost.
		a.elector.Run(ctx, func(ctx context.Context) {
			dep, live := a.newDeployer(a.targets, a.fence, a.gitBases), a.newLive()
			a.terms.set(0, dep, live)
			defer a.terms.set(0, nil, nil)
			runTerm(ctx, dep, live, a.drift)
		})
	default:
		dep, live := a.terms.get(0)
		runTerm(ctx, dep, live, a.drift)
	}
}

// environment is what kplan-webhook reads from its environment, listed
// in --help: secrets never go in flags or the configuration file. Each
// forge of the table lists its own.
func environment(table []forgeRow) [][2]string {
	env := [][2]string{
		{config.EnvWebhookSecret, "the secret GitHub signs deliveries with"},
		{config.EnvWebhookSecretFile, "... or a file holding it (a mounted Secret)"},
		{config.EnvAdminToken, "optional: a token the status page and /drift ask for (bearer, or basic auth's password)"},
		{config.EnvAdminTokenFile, "... or a file holding it"},
	}
	for _, row := range table {
		env = append(env, row.Env...)
	}
	return append(env, [][2]string{
		{"KUBECONFIG", "--leader-elect: the cluster holding the Lease (default: in-cluster)"},
		{"POD_NAME", "--leader-elect: this replica's name (default: the hostname)"},
		{"POD_NAMESPACE", "--leader-elect: default of --leader-election-namespace"},
		{"POD_IP", "--leader-elect: default host of --advertise-address"},
		// Read at each deploy, by internal/charts (charts.Standard).
		{"HELM_REGISTRY_CONFIG", "credentials of OCI chart registries, a Docker config.json (docs/charts.md; default: helm's)"},
		{"HELM_REPOSITORY_CONFIG", "credentials of HTTP chart repositories, Helm's repositories.yaml (default: helm's)"},
		{"DOCKER_CONFIG", "the directory of the Docker config.json also read for registries (default: ~/.docker)"},
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
	if drift != nil {
		wg.Go(func() { drift.Run(ctx) })
	}
	dep.Run(ctx)
	wg.Wait()
}

// terms hold, by shard, the deployer that takes deliveries and the
// runner of live plans beside it (nil when it runs none).
type terms struct {
	mu sync.Mutex
	m  map[int]term
}

type term struct {
	dep  *deployer.Deployer
	live *liveplan.Runner
}

func (t *terms) get(shard int) (*deployer.Deployer, *liveplan.Runner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tm := t.m[shard]
	return tm.dep, tm.live
}

// set records shard's term; a nil deployer removes it.
func (t *terms) set(shard int, d *deployer.Deployer, live *liveplan.Runner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d == nil {
		delete(t.m, shard)
		return
	}
	if t.m == nil {
		t.m = map[int]term{}
	}
	t.m[shard] = term{d, live}
}

// electionFlags are the --leader-elect flags; setup fills identity.
type electionFlags struct {
	enabled             bool
	name, namespace     string
	advertise, identity string
	lease, renew, retry time.Duration
	shards              int
}

// sharded: --shards above 1, the replicas share the targets.
func (f *electionFlags) sharded() bool { return f.enabled && f.shards > 1 }

// check refuses --shards that cannot work, before anything starts.
func (f *electionFlags) check() error {
	switch {
	case f.shards < 1:
		return fmt.Errorf("--shards %d: want 1 (one leader deploys everything) or more", f.shards)
	case f.shards > maxShards:
		return fmt.Errorf("--shards %d: at most %d (a Lease each, renewed every --leader-elect-retry-period)", f.shards, maxShards)
	case f.shards > 1 && !f.enabled:
		return fmt.Errorf("--shards %d needs --leader-elect: the replicas hold the shards on Leases", f.shards)
	}
	return nil
}

// maxShards bounds --shards: each held shard's Lease is written every
// retry period.
const maxShards = 256

func (f *electionFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "leader-elect", false, "run as one of several replicas: the one holding a Kubernetes Lease deploys, the others forward deliveries to it")
	fs.StringVar(&f.name, "leader-election-id", "kplan-webhook", "name of the Lease")
	fs.StringVar(&f.namespace, "leader-election-namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the pod's service account namespace)")
	fs.StringVar(&f.advertise, "advertise-address", "", "host:port the other replicas forward deliveries to (default $POD_IP and the port of --listen)")
	fs.DurationVar(&f.lease, "leader-elect-lease-duration", 15*time.Second, "how long the other replicas wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops deploying")
	fs.DurationVar(&f.retry, "leader-elect-retry-period", 2*time.Second, "how often the replicas try to acquire or renew the Lease")
	fs.IntVar(&f.shards, "shards", 1, "with --leader-elect: spread the targets over this many shards, by cluster, each held by one replica on a Lease of its own (<leader-election-id>-shard-<i>), so that the replicas deploy at once; 1 elects one leader that deploys everything")
}

// replica sets the Lease's namespace and this replica's identity, and
// makes what every kind of election needs: the Lease client and the
// metrics.
func (f *electionFlags) replica(getenv func(string) string, listener net.Addr, reg prometheus.Registerer) (coordinationv1client.LeasesGetter, *leader.Metrics, error) {
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
	return leases, m, nil
}

// setup makes the elector and the front that forwards deliveries to the
// leader while this replica does not lead.
func (f *electionFlags) setup(getenv func(string) string, listener net.Addr, secret []byte, receiver forge.Receiver, local http.Handler, reg prometheus.Registerer, log *slog.Logger) (*leader.Elector, http.Handler, error) {
	leases, m, err := f.replica(getenv, listener, reg)
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

// setupShards makes, with --shards, the holder of this replica's share
// of the shards and the dispatcher that routes each delivery's part to
// the replica holding its shards.
func (a *app) setupShards(getenv func(string) string, listener net.Addr) error {
	f := &a.flags.le
	if err := a.dependenciesInOneShard(); err != nil {
		return err
	}
	leases, m, err := f.replica(getenv, listener, a.reg)
	if err != nil {
		return err
	}
	if a.shards, err = leader.NewShards(leader.ShardsConfig{Leases: leases, Namespace: f.namespace, Name: f.name, Shards: f.shards, Identity: f.identity,
		LeaseDuration: f.lease, RenewDeadline: f.renew, RetryPeriod: f.retry, Logger: a.log, Metrics: m}); err != nil {
		return err
	}
	// A part waits for its shard's holder as long as a killed holder's
	// shards take to move, twice over.
	a.dispatch, err = leader.NewDispatcher(leader.DispatcherOptions{Router: a.shards, Take: a.take, Secret: a.secret, Identity: f.identity,
		Wait: 2*f.lease + 4*f.retry, Retry: min(f.retry, time.Second), Logger: a.log, Metrics: m})
	return err
}

// dependenciesInOneShard refuses a dependsOn between targets of
// different shards: each shard's deployer runs apart, and one cannot
// wait for another's deploy.
func (a *app) dependenciesInOneShard() error {
	for _, ref := range a.cfg.AllTargets() {
		for _, dep := range ref.Target.DependsOn {
			for _, other := range a.cfg.Targets(ref.Repo, ref.Branch) {
				s1, _ := a.shardOf(ref.Target)
				s2, _ := a.shardOf(other)
				if other.Name == dep && s1 != s2 {
					return fmt.Errorf("%s: target %s dependsOn %s, but with --shards=%d their clusters are on different shards (%d and %d), whose deployers cannot wait for each other: run without --shards, or drop the dependency",
						a.cfg.File, ref.Target.Name, dep, a.flags.le.shards, s1, s2)
				}
			}
		}
	}
	return nil
}

// shardOf is the shard of a configured target: by its cluster, so that
// the targets of one cluster are deployed by one deployer, which refuses
// two of them sharing an inventory there. A branch that takes its
// targets from the repository (FromFile) is on every shard: each
// holder's deployer reads the file and keeps the targets it owns.
func (a *app) shardOf(t config.Target) (shard int, all bool) {
	if t.FromFile != "" {
		return 0, true
	}
	return leader.ShardOf(t.Cluster(), a.flags.le.shards), false
}

// shardsOf lists the shards a delivery's targets are on.
func (a *app) shardsOf(targets []config.Target) []int {
	on := map[int]bool{}
	for _, t := range targets {
		s, all := a.shardOf(t)
		if all {
			on = map[int]bool{}
			for i := range a.flags.le.shards {
				on[i] = true
			}
			break
		}
		on[s] = true
	}
	out := make([]int, 0, len(on))
	for s := range on {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// take hands a delivery's part for shard to the shard's term here; false
// when this replica holds no term of it (any more).
func (a *app) take(shard int, d leader.ShardDelivery) bool {
	dep, live := a.terms.get(shard)
	if dep == nil {
		return false
	}
	targets := a.cfg.Targets(d.Repo, d.Branch)
	if d.LivePlan {
		if live == nil {
			a.log.Warn("live plan delivery received while no live plans run here (disabled)", "delivery", d.Delivery, "pr", d.PR)
			return true
		}
		live.Submit(liveplan.Request{Repo: d.Repo, CloneURL: a.cfg.CloneURL(d.Repo), Base: d.Branch, PR: d.PR, SHA: d.SHA, Delivery: d.Delivery, Targets: targets})
		return true
	}
	for _, t := range targets {
		if s, all := a.shardOf(t); !all && s != shard {
			continue
		}
		if err := dep.Submit(t.Name, deployer.Request{SHA: d.SHA, PR: d.PR, Delivery: d.Delivery, Acknowledged: d.Acknowledged, DeployNow: d.DeployNow}); err != nil {
			a.log.Error("submit", "target", t.Name, "shard", shard, "err", err)
		}
	}
	return true
}

// runShard is the term of a shard this replica holds: a fresh deployer of
// the shard's targets, writing through the shard's fence, which starts by
// deploying each target's branch tip (what its last holder deployed, or
// left half done, is on the inventory objects). Shard 0's term also runs
// the live plans and drift checks, as the leader's does.
func (a *app) runShard(ctx context.Context, st leader.ShardTerm) {
	var targets []deployer.Target
	for _, t := range a.targets {
		if s, _ := a.shardOf(t.Target); s == st.Shard {
			targets = append(targets, t)
		}
	}
	dep := a.newDeployer(targets, st.Fence, shardGitBases(a.gitBases, st.Shard))
	dep.Owns = func(t deployer.Target) bool { s, _ := a.shardOf(t.Target); return s == st.Shard }
	var (
		live  *liveplan.Runner
		drift *liveplan.Drift
	)
	if st.Shard == 0 {
		live, drift = a.newLive(), a.drift
	}
	a.terms.set(st.Shard, dep, live)
	// Deliveries stop coming here the moment the term ends, not when its
	// deploys have wound down: they are routed to the next holder.
	context.AfterFunc(ctx, func() { a.terms.set(st.Shard, nil, nil) })
	defer a.terms.set(st.Shard, nil, nil)
	runTerm(ctx, dep, live, drift)
}

// shardGitBases is the git-base cache of shard's deployer under root:
// each prunes its own.
func shardGitBases(root string, shard int) string {
	return filepath.Join(root, "shard-"+strconv.Itoa(shard))
}
