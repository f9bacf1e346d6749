// Package deployer makes each target converge on its branch: "target T
// should now match branch B at SHA S". One worker per target runs one
// deploy at a time; merges that arrive meanwhile collapse into the newest
// commit. What was last deployed lives on the target's inventory object in
// the cluster, so a restarted deployer resyncs every target whose branch
// moved while it was down — including one it was killed in the middle of.
package deployer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/resourcegroup"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Annotations on the inventory object.
const (
	AnnotationSHA     = "kplan.dev/deployed-sha"
	AnnotationOutcome = "kplan.dev/outcome"
	AnnotationMessage = "kplan.dev/message"
	AnnotationTime    = "kplan.dev/deployed-at"
)

// Target is one overlay deployed to one cluster from one branch.
type Target struct {
	Name             string // unique; the commit status context is kplan/<Name>
	Repo             string // owner/name
	Branch           string
	CloneURL         string
	Overlay          string // repository-relative directory
	Environment      string // GitHub Deployment environment
	Kubeconfig       string // empty: in-cluster or default kubeconfig
	Context          string
	Prune            bool
	ReconcileTimeout time.Duration
	InventoryPolicy  string
	AllowRemoteBases bool
	// Inventory, if set, replaces the inventory the overlay renders.
	Inventory *Inventory
}

// Inventory names an inventory object: kind ResourceGroup or ConfigMap.
type Inventory struct {
	Kind, Name, Namespace, ID string
}

// Request asks a target to converge on SHA; an empty SHA means the
// branch's current tip (a resync).
type Request struct {
	SHA      string
	PR       int
	Delivery string
}

// Outcome of one deploy.
type Outcome struct {
	Target   Target
	SHA      string
	PR       int
	Result   *deploy.Result // nil when the deploy failed before applying
	Err      error
	Started  time.Time
	Finished time.Time
}

// Reporter tells the outside world (GitHub) about deploys.
type Reporter interface {
	Started(ctx context.Context, t Target, sha string, pr int)
	Finished(ctx context.Context, o Outcome)
}

// Deployer runs the targets' workers.
type Deployer struct {
	Mirrors *gitmirror.Mirrors
	Report  Reporter
	// Engine returns an apply engine for a target's cluster; it is called
	// once per deploy.
	Engine func(Target) *deploy.Engine
	Logger *slog.Logger
	// Resync is how often every target is checked against its branch.
	Resync time.Duration

	workers map[string]*worker
	started chan struct{}

	mu         sync.Mutex
	lastFailed map[string]string // target -> sha and error of its last failure before applying
}

type worker struct {
	t    Target
	mu   sync.Mutex
	next *Request // the newest request not yet taken
	wake chan struct{}
}

// New makes a deployer for targets; names must be unique.
func New(targets []Target, mirrors *gitmirror.Mirrors, report Reporter, engine func(Target) *deploy.Engine, logger *slog.Logger) *Deployer {
	d := &Deployer{Mirrors: mirrors, Report: report, Engine: engine, Logger: logger, Resync: 5 * time.Minute,
		workers: map[string]*worker{}, started: make(chan struct{}), lastFailed: map[string]string{}}
	for _, t := range targets {
		d.workers[t.Name] = &worker{t: t, wake: make(chan struct{}, 1)}
	}
	return d
}

// Submit asks a target to converge; it never blocks. A newer request
// replaces one still waiting, so a burst of merges deploys only the last.
func (d *Deployer) Submit(target string, r Request) error {
	w, ok := d.workers[target]
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
		w.next = &r
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
	var wg sync.WaitGroup
	for _, w := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(ctx, w)
		}()
	}
	close(d.started)
	d.resyncAll()
	tick := time.NewTicker(d.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
			d.resyncAll()
		}
	}
}

func (d *Deployer) resyncAll() {
	for name := range d.workers {
		d.Submit(name, Request{})
	}
}

func (d *Deployer) work(ctx context.Context, w *worker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for r := w.take(); r != nil; r = w.take() {
			d.converge(ctx, w.t, *r)
		}
	}
}

// converge deploys r to t unless t already runs that commit successfully.
func (d *Deployer) converge(ctx context.Context, t Target, r Request) {
	log := d.Logger.With("target", t.Name, "repo", t.Repo, "branch", t.Branch)
	dir, tip, err := d.Mirrors.Fetch(ctx, t.CloneURL, t.Branch, r.SHA)
	if err != nil {
		d.failedEarly(ctx, log, Outcome{Target: t, SHA: r.SHA, PR: r.PR, Err: err})
		return
	}
	sha := r.SHA
	switch {
	case sha == "":
		sha = tip
	case sha != tip && d.Mirrors.IsAncestor(ctx, dir, sha, tip):
		// GitHub does not deliver in order: an older merge's event must
		// not roll the target back. Converge on the branch instead.
		log.Info("the requested commit is behind the branch; deploying the branch", "requested", sha, "tip", tip)
		sha, r.PR = tip, 0
	}
	target, err := d.render(ctx, t, dir, sha)
	if err != nil {
		d.failedEarly(ctx, log, Outcome{Target: t, SHA: sha, PR: r.PR, Err: err})
		return
	}
	eng := d.Engine(t)
	ann, err := eng.Annotations(ctx, target.Inventory)
	if err != nil {
		log.Warn("cannot read the deployed state; deploying", "err", err)
	}
	if ann[AnnotationSHA] == sha && ann[AnnotationOutcome] == "success" {
		log.Debug("already deployed", "sha", sha)
		return
	}
	d.mu.Lock()
	delete(d.lastFailed, t.Name)
	d.mu.Unlock()
	log.Info("deploying", "sha", sha, "pr", r.PR, "delivery", r.Delivery)
	o := Outcome{Target: t, SHA: sha, PR: r.PR, Started: time.Now()}
	d.Report.Started(ctx, t, sha, r.PR)
	o.Result, o.Err = eng.Apply(ctx, target.Inventory, target.Objects, deploy.Options{
		InventoryPolicy: t.InventoryPolicy, ReconcileTimeout: t.ReconcileTimeout, NoPrune: !t.Prune,
	})
	if o.Err == nil && o.Result.Failed() {
		o.Err = errors.New("some objects failed, were skipped or did not reconcile")
	}
	o.Finished = time.Now()
	d.finish(ctx, log, o, eng, target)
}

// failedEarly reports a deploy that failed before applying (fetch,
// render), once: a resync that fails the same way again only logs.
func (d *Deployer) failedEarly(ctx context.Context, log *slog.Logger, o Outcome) {
	o.Started, o.Finished = time.Now(), time.Now()
	key := o.SHA + "\x00" + o.Err.Error()
	d.mu.Lock()
	repeated := d.lastFailed[o.Target.Name] == key
	d.lastFailed[o.Target.Name] = key
	d.mu.Unlock()
	if repeated {
		log.Error("deploy still failing", "sha", o.SHA, "err", o.Err)
		return
	}
	d.finish(ctx, log, o, nil, nil)
}

// finish records the outcome on the inventory object and reports it. The
// record comes first: GitHub may be down, the cluster's state is the truth.
func (d *Deployer) finish(ctx context.Context, log *slog.Logger, o Outcome, eng *deploy.Engine, target *deploy.Target) {
	outcome, msg := "success", "deployed"
	if o.Err != nil {
		outcome, msg = "failure", o.Err.Error()
		log.Error("deploy failed", "sha", o.SHA, "err", o.Err)
	} else {
		log.Info("deployed", "sha", o.SHA, "took", o.Finished.Sub(o.Started).Round(time.Millisecond))
	}
	if target != nil && o.Result != nil {
		ann := map[string]string{AnnotationOutcome: outcome, AnnotationMessage: truncate(msg, 1000),
			AnnotationTime: o.Finished.UTC().Format(time.RFC3339)}
		ann[AnnotationSHA] = o.SHA
		if err := eng.Annotate(ctx, target.Inventory, ann); err != nil {
			log.Error("cannot record the deploy on the inventory", "err", err)
		}
	}
	d.Report.Finished(ctx, o)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// render renders the target's overlay at sha from the mirror.
func (d *Deployer) render(ctx context.Context, t Target, dir, sha string) (*deploy.Target, error) {
	s, err := snapshot.FromCommit(ctx, dir, sha)
	if err != nil {
		return nil, err
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		return nil, err
	}
	if !t.AllowRemoteBases {
		// A deploy must not depend on what another server returns at that
		// moment unless the config allows it.
		c := closure.New(closure.SnapshotSource(ctx, s), closure.Options{}).Overlay(t.Overlay)
		if len(c.Remote) > 0 {
			r := c.Remote[0]
			return nil, fmt.Errorf("%s uses the remote %s %s (in %s); remote bases are off for target %s (set allowRemoteBases in the config)", t.Overlay, r.Field, r.Ref, r.File, t.Name)
		}
	}
	rs, err := render.Render(ctx, s.FS, tree, []string{t.Overlay}, render.Options{})
	if err != nil {
		return nil, err
	}
	if rs[0].Err != nil {
		return nil, rs[0].Err
	}
	if i := t.Inventory; i != nil {
		return deploy.TargetWithInventory(rs[0], deploy.InventoryObject(i.Kind, i.Name, i.Namespace, i.ID))
	}
	rg, err := s.FS.ReadFile(snapshot.Abs(path.Join(t.Overlay, resourcegroup.DefaultFile)))
	if err != nil {
		rg = nil // no file: the render must carry the inventory
	}
	return deploy.TargetOf(rs[0], deploy.Source{RGFile: rg})
}
