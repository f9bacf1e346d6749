// Package deployer makes each target converge on its branch: "target T
// should now match branch B at SHA S". One worker per target runs one
// deploy at a time; merges that arrive meanwhile collapse into the newest
// commit. At most a limit of deploys run at once, across targets, in the
// order they asked (Slots). What was last deployed lives on the target's
// inventory object in the cluster, so a restarted deployer resyncs every target whose branch
// moved while it was down — including one it was killed in the middle of.
//
// A branch may take its targets from the repository (.kplan.yaml at the
// deployed commit): its source worker reads the file and hands the commit
// to one worker per target it lists, created and retired as the file
// changes. No two targets of one cluster may apply through the same
// inventory: each would prune the other's objects, so both are refused.
package deployer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/keylock"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Target is one overlay deployed to one cluster from one branch: a target
// of the webhook's configuration, or one a repository declares, with the
// branch it deploys from.
type Target struct {
	config.Target
	Repo     string // owner/name
	Branch   string
	CloneURL string
	// Forge is where the repository is (config.GitHub, config.GitLab):
	// how the reports name its changes (#12, !12).
	Forge string
	// Source is the name of the Source that declared the target; "" for a
	// target of the webhook's configuration.
	Source string
}

// TargetOf is a target of the webhook's configuration.
func TargetOf(ref config.TargetRef) Target {
	return Target{Target: ref.Target, Repo: ref.Repo, Branch: ref.Branch, CloneURL: ref.CloneURL, Forge: ref.Forge}
}

// Key is the target's worker name: its Name for a configured target,
// "<source>/<name>" for one a repository declares (names are unique only
// within each).
func (t Target) Key() string {
	if t.Source == "" {
		return t.Name
	}
	return t.Source + "/" + t.Name
}

// Source is a branch whose targets a file of the repository declares
// (.kplan.yaml, internal/repoconfig), read at every deployed commit. Its
// Environments map the environments the file names to clusters; a target
// whose environment is missing is reported and not deployed.
type Source struct {
	config.Source
	// Reserved are target names the webhook's configuration already uses
	// for this repository: a repository target of the same name would
	// report on the same commit status.
	Reserved []string
}

// target is the stand-in target a source reports its own failures on
// (reading its file): the file stands for overlay and environment.
func (s Source) target() Target {
	return Target{Target: config.Target{Name: s.Name, Overlay: s.File, Environment: s.File}, Repo: s.Repo, Branch: s.Branch, CloneURL: s.CloneURL, Forge: s.Forge}
}

// Request asks a target to converge on SHA; an empty SHA means the
// branch's current tip (a resync).
type Request struct {
	SHA      string
	PR       int
	Delivery string
	// Acknowledged is who added config.ApplyUnreviewedLabel to PR: the
	// commit applies once without requireReviewedPlan's check, if it is
	// still the branch's tip.
	Acknowledged string
	// DeployNow is who added the deploy-now label (config.DeployNowLabel)
	// to PR: the commit deploys outside the target's windows and freeze,
	// if that user may write and it is still the branch's tip.
	DeployNow string
}

// Outcome of one deploy.
type Outcome struct {
	Target Target
	SHA    string
	PR     int
	Result *deploy.Result // nil when the deploy failed before applying
	Err    error
	Reason Reason  // why it ended so; ReasonDeployed when Err is nil
	Review *Review // the comparison with the plan reviewed; nil when not made
	// Waiting, when set, says the commit is not applied yet and why (a
	// dependency, a deploy window): not a failure, nothing was applied.
	Waiting string
	// Override says who deployed it outside its deploy windows or freeze
	// (the deploy-now label); "" when no one did.
	Override string
	// Superseded, when set, is the branch's newer commit that deployed
	// in place of this one, which waited (a dependency, a window):
	// nothing was applied at SHA itself, its changes are in Superseded.
	Superseded string
	Started    time.Time
	Finished   time.Time
}

// Reporter tells the outside world (GitHub) about deploys
// (internal/forge/github/deploys).
type Reporter interface {
	Started(ctx context.Context, t Target, sha string, pr int)
	Finished(ctx context.Context, o Outcome)
	// Interrupted finishes t's reports that a previous run started and
	// never finished (a killed webhook, a lost leadership), and says
	// whether there were any: a deploy of t was cut short, so the next one
	// must run even at the commit the cluster records. Each target asks
	// once per Run, before its first deploy.
	Interrupted(ctx context.Context, t Target) (bool, error)
	// Flush sends again the reports GitHub refused (rate limits,
	// outages); Run calls it every FlushInterval and once more when it
	// ends.
	Flush(ctx context.Context)
}

// Mirror fetches branches and reads their commits (GitMirror).
type Mirror interface {
	// Fetch returns the mirror's directory and the branch's tip as the
	// server has it now.
	Fetch(ctx context.Context, cloneURL, branch string) (dir, tip string, err error)
	// IsAncestor reports whether a is b or an ancestor of b.
	IsAncestor(ctx context.Context, dir, a, b string) bool
	// Snapshot reads the tree of commit sha in the mirror at dir.
	Snapshot(ctx context.Context, dir, sha string) (*snapshot.Snapshot, error)
	// FetchCommit brings commit sha into the mirror (by SHA, else through
	// pull request pr's refs) and returns the mirror's directory: the
	// commit a plan reviewed, which no branch may reach any more.
	FetchCommit(ctx context.Context, cloneURL, sha string, pr int) (dir string, err error)
	// FirstParent is the first parent of commit sha: the branch as a
	// merge found it.
	FirstParent(ctx context.Context, dir, sha string) (string, error)
	// Merge makes the commit merging head into base (no conflicts) and
	// returns it with its tree.
	Merge(ctx context.Context, dir, base, head string) (commit, tree string, err error)
	// Tree is the tree of commit sha.
	Tree(ctx context.Context, dir, sha string) (string, error)
	// Git reads the history of the mirror at dir for the approval rule,
	// and writes the commits of the trees it merges there.
	Git(dir string) approval.CLI
}

// GitMirror is the Mirror of git mirrors fetched over HTTP.
type GitMirror struct{ *gitmirror.Mirrors }

// Git implements Mirror.
func (GitMirror) Git(dir string) approval.CLI { return approval.CLI{Repo: gitcli.Repo{Dir: dir}} }

// Snapshot implements Mirror.
func (GitMirror) Snapshot(ctx context.Context, dir, sha string) (*snapshot.Snapshot, error) {
	return snapshot.FromCommit(ctx, dir, sha)
}

// Engine applies to one target's cluster (deploy.Engine) and keeps the
// record of what was deployed on the inventory object.
type Engine interface {
	// State reads what the last deploy recorded on the live inventory
	// object; the zero State when it does not exist yet.
	State(ctx context.Context, inv *unstructured.Unstructured) (deploy.State, error)
	Apply(ctx context.Context, inv *unstructured.Unstructured, objs []*unstructured.Unstructured, opts deploy.Options) (*deploy.Result, error)
	// SetState records a deploy on the live inventory object.
	SetState(ctx context.Context, inv *unstructured.Unstructured, s deploy.State) error
}

// Deployer runs the targets' workers.
type Deployer struct {
	Mirrors Mirror
	Report  Reporter
	// Engine returns an apply engine for a target's cluster; it is called
	// once per deploy.
	Engine func(Target) Engine
	Logger *slog.Logger
	// Resync is how often every target is checked against its branch.
	Resync time.Duration
	// Metrics, if set, records every deploy attempt (metrics.go).
	Metrics Metrics
	// FlushInterval is how often the Reporter's held reports are sent again.
	FlushInterval time.Duration
	// Reviews, if set, finds the plan each merge's PR reviewed, to report
	// whether the deploy applies it (and, with requireReviewedPlan, to
	// refuse one that does not).
	Reviews Reviews
	// GitBases is the directory git remote bases are fetched into, one
	// cache per target (targets fetch under their own remoteHosts); ""
	// is a directory under the system's temporary directory.
	GitBases string
	// GitBasesMaxAge is how long a git base no deploy uses stays under
	// GitBases: at start and every Resync, the caches (of every target,
	// configured or not any more) are pruned of older ones. 0 keeps them.
	GitBasesMaxAge time.Duration
	// Owns, if set, says which targets this deployer deploys, when
	// several share the targets (one per shard a webhook replica holds):
	// a source's worker then runs in each, keeps only the declared
	// targets it owns, and reports the source's own failures only where
	// it owns the source's stand-in target. nil owns every target.
	Owns func(Target) bool
	// Slots are the slots its deploys take, shared by the deployers of
	// one process. New gives a deployer DefaultMaxParallel slots of its
	// own, which its Metrics observe. A target's request waiting for a
	// slot is still replaced by a newer one.
	Slots *Slots
	// Clock is the time deploy windows are read on; nil is the system's.
	Clock Clock
	// DeployNowLabel names the label that deploys outside the windows
	// (config.Config.DeployNowLabel), for the reports; "" is
	// config.DefaultDeployNowLabel.
	DeployNowLabel string
	// Status, if set, is told what each target does and did (the status
	// page, internal/status).
	Status Status

	started chan struct{}

	mu         sync.Mutex
	workers    map[string]*worker
	runCtx     context.Context // set by Run: workers added later run under it
	wg         sync.WaitGroup
	lastFailed map[string]string // target key -> sha and error of its last failure before applying
	rendered   map[string]inventory.Identity
	conflicts  map[string]string // target key -> the conflict last reported for it
	invLocks   keylock.Map
	// initial counts the configured targets whose first render is still
	// to come; firstRenders closes when none is: no target applies before
	// every configured target has rendered once, so two of them sharing
	// an inventory are both refused before either applies.
	initial      sync.WaitGroup
	firstRenders chan struct{}
	// What each target waits for and last did (rollout.go): states by
	// target key, the request parked while it waits, what was last
	// reported of the wait, and the timer of the window it waits for.
	states       map[string]*TargetState
	parked       map[string]Request
	waitReported map[string]string
	timers       map[string]func() bool
	waited       map[string][]Request // the commits reported waiting, by target key
}

type worker struct {
	src  *Source // set for a source's worker, which deploys no overlay itself
	quit chan struct{}
	wake chan struct{}
	// first marks the first render of a configured target (initial).
	first func()
	// resumed is set once the reports an interrupted run left open are
	// finished (Reporter.Interrupted); redeploy, when there were some, so that the next
	// deploy runs even at the commit the cluster records. Only the
	// worker's goroutine touches them, and slot: whether it holds one of
	// the deployer's slots.
	resumed, redeploy, slot bool

	mu   sync.Mutex
	t    Target
	next *Request // the newest request not yet taken
	busy bool     // a request is taken and running
}

// New makes a deployer for targets and sources; their names must be
// unique.
func New(targets []Target, mirrors Mirror, report Reporter, engine func(Target) Engine, logger *slog.Logger, sources ...Source) *Deployer {
	d := &Deployer{Mirrors: mirrors, Report: report, Engine: engine, Logger: logger, Resync: 5 * time.Minute, FlushInterval: 15 * time.Second,
		workers: map[string]*worker{}, started: make(chan struct{}), lastFailed: map[string]string{},
		rendered: map[string]inventory.Identity{}, conflicts: map[string]string{},
		firstRenders: make(chan struct{}), states: map[string]*TargetState{}, parked: map[string]Request{},
		waitReported: map[string]string{}, timers: map[string]func() bool{}, waited: map[string][]Request{}}
	d.Slots = NewSlots(DefaultMaxParallel, d.observeSlots)
	for _, t := range targets {
		w := newWorker(t, nil)
		d.initial.Add(1)
		w.first = sync.OnceFunc(d.initial.Done)
		d.workers[t.Key()] = w
	}
	go func() {
		d.initial.Wait()
		close(d.firstRenders)
	}()
	for _, s := range sources {
		d.workers[s.Name] = newWorker(s.target(), &s)
	}
	return d
}

func newWorker(t Target, src *Source) *worker {
	return &worker{t: t, src: src, quit: make(chan struct{}), wake: make(chan struct{}, 1), first: func() {}}
}

func (w *worker) target() Target {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t
}

// Submit asks a target (or a source) to converge; it never blocks. A
// newer request replaces one still waiting, so a burst of merges deploys
// only the last.
func (d *Deployer) Submit(target string, r Request) error {
	d.mu.Lock()
	w, ok := d.workers[target]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("unknown target %q", target)
	}
	w.mu.Lock()
	switch {
	case w.next == nil, w.next.SHA == "":
		w.next = &r
	case r.SHA == "":
		// A resync must not replace a concrete pending commit.
	case r.SHA == w.next.SHA && r.PR == 0:
		// A merge sends a push and a pull_request for the same commit:
		// keep the one that knows the PR.
	default:
		if r.SHA == w.next.SHA && r.Acknowledged == "" {
			// The merge's delivery after the label's: still acknowledged.
			r.Acknowledged = w.next.Acknowledged
		}
		if r.SHA == w.next.SHA && r.DeployNow == "" {
			r.DeployNow = w.next.DeployNow
		}
		w.next = &r
	}
	if w.src == nil && !w.busy {
		d.tell(w.t, Queued, describe(w.t, *w.next)+" waits for a deploy slot")
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

func (w *worker) take() *Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.next
	w.next = nil
	return r
}

// taken marks the worker running r (the Status is told so, with w.mu
// held so that a Submit meanwhile does not tell it queued).
func (d *Deployer) taken(w *worker, r *Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = true
	if w.src == nil {
		d.tell(w.t, Deploying, describe(w.t, *r))
	}
}

// done marks the worker's request ended: it is queued again when a newer
// one waits, else idle.
func (d *Deployer) done(w *worker) {
	// Read before w.mu: d.mu is never taken under a worker's lock.
	waiting := d.waitingWhy(w.target().Key())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	switch {
	case w.src != nil:
	case w.next != nil:
		d.tell(w.t, Queued, describe(w.t, *w.next)+" waits for a deploy slot")
	case waiting != "":
		// Held back by a dependency or a window (rollout.go).
		d.tell(w.t, Waiting, waiting)
	default:
		d.tell(w.t, Idle, "")
	}
}

func (w *worker) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next != nil
}

// Ready reports whether the workers run.
func (d *Deployer) Ready() error {
	select {
	case <-d.started:
		return nil
	default:
		return errors.New("deployer not started")
	}
}

// Run runs the workers and the resync loop until ctx ends. It resyncs
// every target at once on start.
func (d *Deployer) Run(ctx context.Context) {
	d.mu.Lock()
	d.runCtx = ctx
	for _, w := range d.workers {
		d.start(w)
	}
	d.mu.Unlock()
	close(d.started)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.flush(ctx)
	}()
	if d.GitBasesMaxAge > 0 {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.pruneLoop(ctx)
		}()
	}
	d.resyncAll()
	tick := time.NewTicker(d.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.stopTimers()
			d.wg.Wait()
			// The reports still held get one more chance, bounded, after
			// the run's context has ended.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			d.Report.Flush(fctx)
			cancel()
			return
		case <-tick.C:
			d.resyncAll()
		}
	}
}

// flush retries the reports the Reporter holds until ctx ends.
func (d *Deployer) flush(ctx context.Context) {
	every := d.FlushInterval
	if every <= 0 {
		every = 15 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.Report.Flush(ctx)
		}
	}
}

// pruneLoop prunes the git-base caches now and every Resync until ctx
// ends, beside the workers: a deploy never waits for it.
func (d *Deployer) pruneLoop(ctx context.Context) {
	tick := time.NewTicker(d.Resync)
	defer tick.Stop()
	for {
		d.pruneGitBases(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pruneGitBases removes from every cache under GitBases what no deploy
// used for longer than GitBasesMaxAge. A cache in use is safe (gitbase
// locks what a render holds); failures are logged, never a deploy's.
func (d *Deployer) pruneGitBases(ctx context.Context) {
	root := d.gitBases()
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		d.Logger.Warn("cannot prune the git bases", "dir", root, "err", err)
		return
	}
	// The caches are named by target: say whose, where still configured.
	names := map[string]string{}
	d.mu.Lock()
	for _, w := range d.workers {
		t := w.target()
		names[gitBasesName(t)] = t.Name
	}
	d.mu.Unlock()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		log := d.Logger.With("dir", dir)
		if name, ok := names[e.Name()]; ok {
			log = log.With("target", name)
		}
		n, err := gitbase.New(dir, nil).Prune(ctx, d.GitBasesMaxAge)
		if n > 0 {
			log.Info("removed git bases no deploy used", "removed", n, "maxAge", d.GitBasesMaxAge)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("cannot prune git bases", "err", err)
		}
	}
}

func (d *Deployer) gitBases() string {
	return cmp.Or(d.GitBases, filepath.Join(os.TempDir(), "kplan-git-bases"))
}

// gitBasesName names a target's git-base cache under GitBases.
func gitBasesName(t Target) string {
	sum := sha256.Sum256([]byte(t.Key()))
	return hex.EncodeToString(sum[:8])
}

// start runs a worker's goroutine; d.mu is held.
func (d *Deployer) start(w *worker) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.work(d.runCtx, w)
	}()
}

func (d *Deployer) resyncAll() {
	d.mu.Lock()
	names := make([]string, 0, len(d.workers))
	for name := range d.workers {
		names = append(names, name)
	}
	d.mu.Unlock()
	for _, name := range names {
		d.Submit(name, Request{})
	}
}

func (d *Deployer) work(ctx context.Context, w *worker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.quit:
			return
		case <-w.wake:
		}
		d.drain(ctx, w)
	}
}

// drain runs w's requests until none is waiting: a request that arrives
// meanwhile replaces the one waiting (Submit), so a burst runs once. A
// target's deploy waits for a slot first and only then takes its request,
// so that a newer commit arriving while it waits replaces the older one.
// A source's worker takes none: it reads one file and hands the commit
// to its targets, whose deploys wait for theirs.
func (d *Deployer) drain(ctx context.Context, w *worker) {
	for w.pending() {
		if w.src == nil {
			if !d.Slots.acquire(ctx, w.quit) {
				return // ended, or retired, while waiting
			}
			w.slot = true
		}
		if r := w.take(); r != nil {
			d.taken(w, r)
			d.run(ctx, w, *r)
			d.done(w)
		}
		d.releaseSlot(w)
	}
}

// run runs one request of w: a bug of kplan in it (a recovered panic)
// fails that request only.
func (d *Deployer) run(ctx context.Context, w *worker, r Request) {
	err := crash.Catch(func() error {
		if w.src != nil {
			d.expand(ctx, *w.src, r)
		} else {
			d.converge(ctx, w, r)
		}
		return nil
	})
	if c := crash.As(err); c != nil {
		d.crashed(ctx, w, r, c)
	}
}

func (d *Deployer) releaseSlot(w *worker) {
	if w.slot {
		w.slot = false
		d.Slots.release()
	}
}

// awaitFirstRenders waits until every configured target has rendered
// once and reports whether ctx ended first. The deploy gives its slot
// back meanwhile, as the targets still to render need slots of their
// own, and asks for one again after.
func (d *Deployer) awaitFirstRenders(ctx context.Context, w *worker) bool {
	select {
	case <-d.firstRenders:
		return true
	default:
	}
	held := w.slot
	d.releaseSlot(w)
	select {
	case <-d.firstRenders:
	case <-ctx.Done():
		return false
	}
	if held {
		if !d.Slots.acquire(ctx, w.quit) {
			return false
		}
		w.slot = true
	}
	return true
}

// crashed reports a deploy a kplan bug ended (a recovered panic): that
// request fails, with a request for a report, and the webhook goes on
// serving every other target (a panic nobody recovers would end the
// process with Go's status 2).
func (d *Deployer) crashed(ctx context.Context, w *worker, r Request, c *crash.Error) {
	t := w.target()
	w.first() // the other targets' first renders must not wait for this one
	log := d.Logger.With("target", t.Key(), "repo", t.Repo, "branch", t.Branch)
	log.Error("kplan bug: panic deploying; this deploy fails, the others go on", "sha", r.SHA, "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
	d.failedEarly(ctx, log, Outcome{Target: t, SHA: r.SHA, PR: r.PR, Err: c, Reason: ReasonApplyFailed})
}

// resolve fetches the branch and turns a request into one for the tip
// just fetched: only what the branch holds now is deployed. A request for
// a commit the branch has moved past (GitHub does not deliver in order)
// deploys the tip, and so does one for a commit the tip does not reach (a
// late delivery of a merge that a force-push removed): deploying that
// commit would prune the branch's newer objects.
func (d *Deployer) resolve(ctx context.Context, log *slog.Logger, t Target, r *Request) (dir string, err error) {
	dir, tip, err := d.Mirrors.Fetch(ctx, t.CloneURL, t.Branch)
	if err != nil {
		return "", err
	}
	switch {
	case r.SHA == "" || r.SHA == tip:
	case d.Mirrors.IsAncestor(ctx, dir, r.SHA, tip):
		log.Info("the requested commit is behind the branch; deploying the branch", "requested", r.SHA, "tip", tip)
	default:
		log.Warn("the requested commit is not on the branch (force-pushed away, or never merged); deploying the branch's tip instead",
			"requested", r.SHA, "tip", tip, "delivery", r.Delivery)
	}
	if r.SHA != tip {
		if r.Acknowledged != "" {
			log.Warn("the commit acknowledged with the label is no longer the branch's tip; the tip is checked against its own plan",
				"label", config.ApplyUnreviewedLabel, "by", r.Acknowledged, "acknowledged", r.SHA, "tip", tip)
		}
		if r.DeployNow != "" {
			log.Warn("the commit the deploy-now label is on is no longer the branch's tip; the tip waits for its window",
				"by", r.DeployNow, "labelled", r.SHA, "tip", tip)
		}
		r.SHA, r.PR, r.Acknowledged, r.DeployNow = tip, 0, "", ""
	}
	return dir, nil
}

// rollsBack reports whether deploying sha would take a target back from
// the commit the cluster records: sha is a strict ancestor of it. That
// holds for a branch reset to an ancestor too (the tip cannot tell it from
// a replica serving an old tip): a new commit deploys then.
func (d *Deployer) rollsBack(ctx context.Context, dir, sha, deployed string) bool {
	return deployed != "" && deployed != sha && d.Mirrors.IsAncestor(ctx, dir, sha, deployed)
}

// resume finishes, once per run of each target, the reports an
// interrupted run left open.
func (d *Deployer) resume(ctx context.Context, log *slog.Logger, w *worker, t Target) {
	if w.resumed {
		return
	}
	found, err := d.Report.Interrupted(ctx, t)
	if err != nil {
		// Tried again before the next deploy of this target.
		log.Warn("cannot finish the reports of an interrupted deploy yet", "err", err)
		return
	}
	w.resumed = true
	if found {
		log.Info("a deploy of this target was interrupted; deploying again")
		w.redeploy = true
	}
}

// converge deploys r to w's target unless it already runs that commit
// successfully.
func (d *Deployer) converge(ctx context.Context, w *worker, r Request) {
	t := w.target()
	log := d.Logger.With("target", t.Key(), "repo", t.Repo, "branch", t.Branch)
	begun := time.Now()
	d.resume(ctx, log, w, t)
	dir, err := d.resolve(ctx, log, t, &r)
	reason := ReasonFetchFailed
	var (
		target *deploy.Prepared
		m      = merged{dir: dir, sha: r.SHA}
	)
	if err == nil {
		reason = ReasonRenderFailed
		target, m.s, err = d.renderAt(ctx, t, dir, r.SHA)
	}
	if err == nil {
		m.planned = target.Planned
	}
	if err == nil {
		// Recorded before the first renders are awaited, so that the other
		// targets see it.
		d.record(t, deploy.InventoryOf(target.Inventory))
	}
	w.first()
	sha := r.SHA
	if err != nil {
		d.failedEarly(ctx, log, Outcome{Target: t, SHA: sha, PR: r.PR, Err: err, Reason: reason, Started: begun})
		return
	}
	if !d.awaitFirstRenders(ctx, w) {
		return
	}
	inv := deploy.InventoryOf(target.Inventory)
	// One deploy at a time per inventory of a cluster: the check below and
	// the record finish leaves on the inventory must not interleave with
	// another target's.
	unlock := d.lockInventory(t, inv)
	defer unlock()
	if err := d.claim(t, inv); err != nil {
		d.failedEarly(ctx, log, Outcome{Target: t, SHA: sha, PR: r.PR, Err: err, Reason: ReasonInventoryConflict})
		return
	}
	eng := d.Engine(t)
	state, err := eng.State(ctx, target.Inventory)
	if err != nil {
		log.Warn("cannot read the deployed state; deploying", "err", err)
	} else if d.Status != nil && (state.Target == "" || state.Target == t.Key()) {
		// What another target deployed through this inventory is not
		// what this one runs (lastDeployedBy refuses it below).
		d.Status.Runs(t, state)
	}
	if err := d.lastDeployedBy(t, inv, state.Target); err != nil {
		d.failedEarly(ctx, log, Outcome{Target: t, SHA: sha, PR: r.PR, Err: err, Reason: ReasonInventoryConflict})
		return
	}
	d.mu.Lock()
	_, failedBefore := d.lastFailed[t.Key()]
	d.mu.Unlock()
	// A target whose last attempt failed before applying deploys again even
	// at the same commit, so its reported failure is replaced; so does one
	// whose last deploy was interrupted, whose reports said a new one
	// follows.
	if state.SHA == sha && state.Outcome == deploy.OutcomeSuccess && state.Target == t.Key() && !failedBefore && !w.redeploy {
		if r.Delivery != "" {
			// A delivery that changes nothing says so: whoever sent it
			// (and a test) sees that it was handled, not lost.
			log.Info("nothing to deploy: the target already runs the branch's tip", "sha", sha, "delivery", r.Delivery)
		} else {
			log.Debug("already deployed", "sha", sha)
		}
		d.settle(t, sha, true, "")
		return
	}
	// Never roll back: the tip is older than what the cluster runs only
	// when the branch was reset to an ancestor, and GitHub's replicas may
	// briefly serve an older tip too.
	if d.rollsBack(ctx, dir, sha, state.SHA) {
		log.Info("not deploying: the branch's tip is older than the commit the cluster runs; push a new commit to deploy", "tip", sha, "deployed", state.SHA, "delivery", r.Delivery)
		return
	}
	override, ok := d.gate(ctx, log, t, r)
	if !ok {
		return
	}
	if state.Target == t.Key() {
		m.deployed = state.SHA
	}
	checked := time.Now()
	review := d.review(ctx, log, t, m, r.PR)
	if t.RequireReviewedPlan && !review.Ok() {
		if review == nil {
			review = &Review{Verdict: Unknown, Err: "the webhook has no access to the forge's reviews", Forge: t.Forge}
		}
		var ackErr error
		if r.Acknowledged != "" {
			ackErr = d.acknowledged(ctx, t, r.Acknowledged)
		}
		if r.Acknowledged == "" || ackErr != nil {
			d.failedEarly(ctx, log, Outcome{Target: t, SHA: sha, PR: r.PR, Err: refusal(t, review, ackErr, r.PR), Reason: ReasonRefused, Review: review, Started: checked})
			return
		}
		review.Acknowledged = r.Acknowledged
		log.Warn("applying what requireReviewedPlan refuses, acknowledged with the label", "label", config.ApplyUnreviewedLabel,
			"by", r.Acknowledged, "sha", sha, "pr", r.PR, "review", review.Describe())
	}
	d.mu.Lock()
	delete(d.lastFailed, t.Key())
	d.mu.Unlock()
	w.redeploy = false
	log.Info("deploying", "sha", sha, "pr", r.PR, "delivery", r.Delivery)
	o := Outcome{Target: t, SHA: sha, PR: r.PR, Started: time.Now(), Review: review, Override: override}
	d.Report.Started(ctx, t, sha, r.PR)
	o.Result, o.Err = eng.Apply(ctx, target.Inventory, target.Objects, deploy.OptionsOf(t.Target))
	o.Reason = applyReason(ctx, o.Result, o.Err)
	if o.Reason == ReasonObjectsFailed {
		msg := "some objects failed, were skipped or did not reconcile"
		for _, w := range o.Result.Warnings {
			msg += "; " + w
		}
		o.Err = errors.New(msg)
	}
	o.Finished = time.Now()
	d.observe(o, true)
	d.finish(ctx, log, o, eng, &target.Target)
}

// failedEarly reports a deploy that failed before applying (fetch,
// render), once: a resync that fails the same way again only logs. It
// ended now, having started when o says (now, if o does not say).
func (d *Deployer) failedEarly(ctx context.Context, log *slog.Logger, o Outcome) {
	o.Finished = time.Now()
	if o.Started.IsZero() {
		o.Started = o.Finished
	}
	d.observe(o, false)
	key := o.SHA + "\x00" + o.Err.Error()
	d.mu.Lock()
	repeated := d.lastFailed[o.Target.Key()] == key
	d.lastFailed[o.Target.Key()] = key
	d.mu.Unlock()
	if repeated {
		log.Error("deploy still failing", "sha", o.SHA, "err", o.Err)
		return
	}
	d.finish(ctx, log, o, nil, nil)
}

// finish records the outcome on the inventory object and reports it. The
// record comes first: GitHub may be down, the cluster's state is the truth.
func (d *Deployer) finish(ctx context.Context, log *slog.Logger, o Outcome, eng Engine, target *deploy.Target) {
	outcome, msg := OutcomeSuccess, "deployed"
	if o.Reason == "" {
		o.Reason = ReasonDeployed
	}
	if o.Err != nil {
		outcome, msg = OutcomeFailure, o.Err.Error()
		log.Error("deploy failed", "sha", o.SHA, "reason", o.Reason, "err", o.Err)
		if o.Result != nil {
			// GitHub is shown a summary of these (no cluster addresses):
			// the logs keep them whole.
			for _, obj := range o.Result.Objects {
				if obj.Error != "" {
					log.Error("object failed", "sha", o.SHA, "object", obj.Key, "action", obj.Action, "err", obj.Error)
				}
			}
		}
	} else {
		log.Info("deployed", "sha", o.SHA, "took", o.Finished.Sub(o.Started).Round(time.Millisecond))
	}
	if target != nil && o.Result != nil {
		if o.Override != "" {
			msg += "; " + o.Override
		}
		st := deploy.State{SHA: o.SHA, Target: o.Target.Key(), Outcome: outcome, Reason: string(o.Reason), Message: msg, Time: o.Finished}
		if err := eng.SetState(ctx, target.Inventory, st); err != nil {
			log.Error("cannot record the deploy on the inventory", "err", err)
		}
	}
	d.settle(o.Target, o.SHA, o.Err == nil, o.Override)
	if d.Status != nil {
		d.Status.Finished(o)
	}
	d.Report.Finished(ctx, o)
}

// render renders the target's overlay at sha from the mirror, as every
// deploy does (deploy.Prepare). With Reviews, it also computes the object
// set a plan computes of the render, whose digest is compared with the
// plan reviewed.
func (d *Deployer) render(ctx context.Context, t Target, dir, sha string) (*deploy.Prepared, error) {
	p, _, err := d.renderAt(ctx, t, dir, sha)
	return p, err
}

// renderAt is render, also returning the commit's snapshot.
func (d *Deployer) renderAt(ctx context.Context, t Target, dir, sha string) (*deploy.Prepared, *snapshot.Snapshot, error) {
	s, err := d.Mirrors.Snapshot(ctx, dir, sha)
	if err != nil {
		return nil, nil, err
	}
	settings := deploy.SettingsOf(t.Target)
	// A cache per target, as one target's deploys never overlap.
	settings.GitBases = filepath.Join(d.gitBases(), gitBasesName(t))
	settings.Plan = d.Reviews != nil
	p, err := deploy.Prepare(ctx, deploy.FromSnapshot(s), settings, deploy.Online)
	return p, s, err
}

// inventoryKey identifies an inventory in a cluster. Two targets clash
// when they share either the inventory object or its inventory-id: the
// object holds the list that prunes, the id owns the objects.
func inventoryKeys(t Target, inv inventory.Identity) [2]string {
	return [2]string{t.Cluster() + "\x00object\x00" + inv.Kind + "\x00" + inv.Namespace + "\x00" + inv.Name, t.Cluster() + "\x00id\x00" + inv.ID}
}

// lockInventory serializes the deploys through one inventory of a cluster.
func (d *Deployer) lockInventory(t Target, inv inventory.Identity) func() {
	return d.invLocks.Lock(inventoryKeys(t, inv)[1])
}

// ConflictError refuses targets of one cluster that apply through the
// same inventory: each apply would prune the other's objects.
type ConflictError struct {
	Targets   []string // every target involved, sorted
	Inventory inventory.Identity
}

func (e *ConflictError) Error() string {
	// The consequence first: a commit status shows 140 characters.
	return fmt.Sprintf("targets %s share an inventory in one cluster, so applying one would prune the other's objects: none is deployed. The inventory: %s. Give each overlay its own (delete the copied resourcegroup.yaml and run kplan init in the overlay)",
		strings.Join(e.Targets, " and "), e.Inventory)
}

// claim records the inventory t rendered and refuses it when another
// target of the same cluster last rendered the same one. A conflict
// found for the first time wakes the other targets, so that they are
// refused and reported too; targets refused earlier because of t are
// woken when t's inventory changes, so they deploy again.
func (d *Deployer) claim(t Target, inv inventory.Identity) error {
	mine := inventoryKeys(t, inv)
	d.mu.Lock()
	var others []string
	for k, other := range d.rendered {
		if k == t.Key() {
			continue
		}
		w := d.workers[k]
		if w == nil {
			continue
		}
		theirs := inventoryKeys(w.target(), other)
		if theirs[0] == mine[0] || theirs[1] == mine[1] {
			others = append(others, k)
		}
	}
	var wake []string
	var err error
	if len(others) > 0 {
		all := append(slices.Clone(others), t.Key())
		slices.Sort(all)
		sig := "\x00" + strings.Join(all, "\x00") + "\x00"
		if d.conflicts[t.Key()] != sig {
			wake = append(wake, others...)
		}
		for _, k := range all {
			d.conflicts[k] = sig
		}
		err = &ConflictError{Targets: all, Inventory: inv}
	} else {
		delete(d.conflicts, t.Key())
	}
	d.mu.Unlock()
	for _, k := range wake {
		d.Submit(k, Request{})
	}
	return err
}

// record notes the inventory t rendered. When t moved to another
// inventory, whoever was refused because of the old one is woken: it may
// deploy now.
func (d *Deployer) record(t Target, inv inventory.Identity) {
	d.mu.Lock()
	prev, had := d.rendered[t.Key()]
	d.rendered[t.Key()] = inv
	var wake []string
	if had && prev != inv {
		for k, c := range d.conflicts {
			if k != t.Key() && strings.Contains(c, "\x00"+t.Key()+"\x00") {
				wake = append(wake, k)
			}
		}
	}
	d.mu.Unlock()
	for _, k := range wake {
		d.Submit(k, Request{})
	}
}

// lastDeployedBy refuses t when the inventory says another configured
// target of the same cluster deployed through it last and that target
// has not rendered another inventory since: after a restart the other
// may not have rendered yet, and t's apply would prune its objects.
func (d *Deployer) lastDeployedBy(t Target, inv inventory.Identity, by string) error {
	if by == "" || by == t.Key() {
		return nil
	}
	d.mu.Lock()
	w := d.workers[by]
	other, rendered := d.rendered[by]
	d.mu.Unlock()
	if w == nil || w.src != nil || w.target().Cluster() != t.Cluster() {
		return nil // not a target of this cluster any more: the inventory is handed over
	}
	if rendered && inventoryKeys(w.target(), other) != inventoryKeys(t, inv) {
		return nil // it moved to its own inventory
	}
	all := []string{by, t.Key()}
	slices.Sort(all)
	d.mu.Lock()
	d.conflicts[t.Key()] = "\x00" + strings.Join(all, "\x00") + "\x00"
	d.mu.Unlock()
	if !rendered {
		d.Submit(by, Request{}) // its render settles whether t may deploy
	}
	return &ConflictError{Targets: all, Inventory: inv}
}

// expand reads the targets a source's file declares at the requested
// commit, makes sure each has a worker with the environment's settings,
// retires the workers of targets the file no longer lists, and hands the
// commit to every target. A target whose environment is not mapped is
// reported and not deployed.
func (d *Deployer) expand(ctx context.Context, s Source, r Request) {
	st := s.target()
	log := d.Logger.With("source", s.Name, "repo", s.Repo, "branch", s.Branch)
	// The source's own failures, and those of targets that name no
	// cluster, are reported once: by the deployer owning its stand-in.
	failed := d.failedEarly
	if !d.owns(st) {
		failed = func(_ context.Context, log *slog.Logger, o Outcome) {
			log.Debug("not deploying; reported by the deployer owning the source", "sha", o.SHA, "err", o.Err)
		}
	}
	dir, err := d.resolve(ctx, log, st, &r)
	if err != nil {
		failed(ctx, log, Outcome{Target: st, SHA: r.SHA, PR: r.PR, Err: err, Reason: ReasonFetchFailed})
		return
	}
	declared, err := d.readTargets(ctx, dir, r.SHA, s.File)
	if err != nil {
		failed(ctx, log, Outcome{Target: st, SHA: r.SHA, PR: r.PR, Err: err, Reason: ReasonTargetsInvalid})
		return
	}
	d.mu.Lock()
	delete(d.lastFailed, st.Key())
	d.mu.Unlock()
	keep, elsewhere := map[string]bool{}, map[string]bool{}
	for _, rt := range declared {
		t := Target{Target: config.Target{Name: rt.Name, Overlay: rt.Overlay, Environment: rt.Environment, Namespace: rt.Namespace},
			Repo: s.Repo, Branch: s.Branch, CloneURL: s.CloneURL, Forge: s.Forge, Source: s.Name}
		tlog := log.With("target", t.Key())
		if slices.ContainsFunc(s.Reserved, func(n string) bool { return strings.EqualFold(n, rt.Name) }) {
			failed(ctx, tlog, Outcome{Target: t, SHA: r.SHA, PR: r.PR, Reason: ReasonTargetsInvalid, Err: fmt.Errorf(
				"%s declares target %s, but the webhook's configuration has a target of that name for %s; rename one (both would report as kplan/%s)", s.File, rt.Name, s.Repo, rt.Name)})
			continue
		}
		env, ok := s.Environment(rt.Environment)
		if !ok {
			failed(ctx, tlog, Outcome{Target: t, SHA: r.SHA, PR: r.PR, Reason: ReasonTargetsInvalid, Err: fmt.Errorf(
				"%s declares target %s with environment %q, which the webhook's configuration does not map to a cluster (branch %s of %s: environments); not deployed",
				s.File, rt.Name, rt.Environment, s.Branch, s.Repo)})
			continue
		}
		t.Settings = env.Settings
		if !d.owns(t) {
			elsewhere[t.Key()] = true
			continue
		}
		keep[t.Key()] = true
		d.mu.Lock()
		w := d.workers[t.Key()]
		if w == nil {
			w = newWorker(t, nil)
			d.workers[t.Key()] = w
			if d.runCtx != nil {
				d.start(w)
			}
			tlog.Info("target declared", "file", s.File, "sha", r.SHA)
		} else {
			w.mu.Lock()
			w.t = t
			w.mu.Unlock()
		}
		d.mu.Unlock()
	}
	// Every worker exists before any is asked to deploy, so that each
	// sees its siblings when it checks for a shared inventory.
	for k := range keep {
		d.Submit(k, Request{SHA: r.SHA, PR: r.PR, Delivery: r.Delivery})
	}
	// Targets the file no longer lists are no longer deployed. Nothing is
	// pruned for them: their objects stay until someone removes them.
	d.mu.Lock()
	for k, w := range d.workers {
		if w.src == nil && w.target().Source == s.Name && !keep[k] {
			close(w.quit)
			if d.Status != nil {
				d.Status.Retired(w.target())
			}
			delete(d.workers, k)
			delete(d.rendered, k)
			delete(d.conflicts, k)
			if elsewhere[k] {
				log.Info("target moved to a cluster another deployer owns", "target", k, "file", s.File, "sha", r.SHA)
			} else {
				log.Info("target no longer declared", "target", k, "file", s.File, "sha", r.SHA)
			}
		}
	}
	d.mu.Unlock()
}

func (d *Deployer) owns(t Target) bool { return d.Owns == nil || d.Owns(t) }

// readTargets reads the targets a repository file declares at sha.
func (d *Deployer) readTargets(ctx context.Context, dir, sha, file string) ([]repoconfig.Target, error) {
	s, err := d.Mirrors.Snapshot(ctx, dir, sha)
	if err != nil {
		return nil, err
	}
	data, err := s.FS.ReadFile(snapshot.Abs(file))
	if err != nil {
		return nil, fmt.Errorf("the branch deploys the targets of %s, but commit %s has no %s: add it, or list targets in the webhook's configuration", file, short(sha), file)
	}
	c, err := repoconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", short(sha), err)
	}
	for _, w := range c.Warnings {
		d.Logger.Warn(w, "sha", short(sha))
	}
	if !c.HasTargets() {
		// Only ignore rules: taking that as "deploy nothing" would
		// silently stop every deploy of the branch.
		return nil, fmt.Errorf("the branch deploys the targets of %s, but at %s it declares none (only plan settings): add targets to it, or list targets in the webhook's configuration", file, short(sha))
	}
	return c.Targets, nil
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
