// Package plan is kplan's façade over the planning pipeline:
// snapshot → discover → closure → render → inventory → diff, for two
// revisions of a repository.
//
// By default a plan renders only what the change can affect: an overlay
// whose input closure (internal/closure) meets no changed path on either
// side cannot render differently, so it is reported unchanged without
// rendering it. Options.Full renders everything.
package plan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/shard"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// GC is what a batch process's collector settings offer a plan.
type GC interface {
	// Small says the plan's builds read little (smallBuilds).
	Small()
}

// Options say what to compare and how to render.
type Options struct {
	// The tag fingerprint:"-" leaves an option out of Fingerprint: shards
	// of one run may differ in it.
	RepoDir string `fingerprint:"-"` // the repository's work tree
	Base    string `fingerprint:"-"` // a revision; required (parts compare their commits)
	Head    string `fingerprint:"-"` // a revision; "" means the work tree as it is on disk
	Filter  render.Filter
	Render  render.Options
	Logger  *slog.Logger `fingerprint:"-"`
	// GC is the batch process's collector settings (internal/batchgc),
	// which a plan whose builds read little tightens; nil in a server,
	// whose settings are its own.
	GC GC `fingerprint:"-"`
	// DeployedTo are the clusters the webhook's configuration deploys
	// each overlay of this repository to (config.Config.ClustersOf): with
	// .kplan.yaml's targets and Flux's clusters, what tells the
	// duplicate-object rule which overlays meet in one cluster.
	DeployedTo map[string][]string
	// WebhookNotes say, by overlay, how the webhook's configuration rolls
	// a change of it out (config.Config.RolloutNotes: the targets it
	// waits for, its deploy windows); each changed overlay's plan shows
	// them.
	WebhookNotes map[string][]string
	// Full renders every overlay on both sides, even those the change
	// cannot affect, and ignores CacheDir: the reference plan.
	Full bool
	// Warm renders every overlay on both sides, as Full, but through
	// CacheDir: a run on the default branch fills the cache pull requests
	// read their base side from, rendering only what is not there yet.
	Warm bool
	// CacheDir keeps renders between runs, keyed by the content of their
	// closure; "" keeps none.
	CacheDir string `fingerprint:"-"`
	// Resolver looks up the hosts of remote resources; nil is the system's.
	Resolver Resolver `fingerprint:"-"`
	// BaseLabel and HeadLabel say in reports which commits were planned
	// ("main at def5678", "head abc1234"); default: the revisions.
	BaseLabel, HeadLabel string `fingerprint:"-"`
	// Ignore are noise filters given by the caller (flags, Action
	// inputs); the head commit's .kplan.yaml may add its own. The plan
	// lists each with what it hid.
	Ignore inventorydiff.IgnoreRules
	// NoDefaultIgnore leaves out the default noise set
	// (inventorydiff.DefaultIgnore), which head's .kplan.yaml can also
	// turn off (ignore.defaults: false).
	NoDefaultIgnore bool
	// Progress, when set, is told how many of the builds to run are done
	// (rendered or read from the cache): for a progress line on a
	// terminal. It is called from the building goroutines, one at a time.
	Progress func(done, total int) `fingerprint:"-"`
	// Flux turns Flux mode on or off (internal/flux: the repository's
	// Flux Kustomizations become the plan's targets); nil leaves it to
	// head's .kplan.yaml, then to whether the repository has any.
	Flux *bool
	// NoReuse renders each side of an overlay even when both read the
	// same content (a build serves both otherwise): the plan is the
	// same, only slower; for `make bench`'s before/after.
	NoReuse bool
	// ArgoCD turns Argo CD mode on or off (internal/argocd: the
	// repository's Argo CD Applications become the plan's targets); nil
	// leaves it to head's .kplan.yaml, then to whether the repository
	// has an Application with a source in it.
	ArgoCD *bool
	// Shard is the share of the overlays Share plans (the rest are left
	// out of its part); kplan merge joins the shares. Run plans them all.
	Shard shard.Shard `fingerprint:"-"`
}

// cacheMaxAge is how long an unused render cache entry is kept.
const cacheMaxAge = 7 * 24 * time.Hour

// Stats count the work a plan did.
type Stats struct {
	Overlays  int // overlays on either side
	Skipped   int // overlays the change cannot affect, not rendered
	Rendered  int // krusty builds run (an overlay on one side is one)
	CacheHits int // builds read from the cache instead
	Stored    int // builds written to the cache
	FailFast  int // builds failed without running: a remote host does not resolve
	Took      time.Duration
}

// Run computes the plan of Head against Base.
func Run(ctx context.Context, opts Options) (*inventorydiff.Plan, error) {
	p, _, err := Execute(ctx, opts)
	return p, err
}

// Execute computes the plan of Head against Base and says how.
func Execute(ctx context.Context, opts Options) (*inventorydiff.Plan, Stats, error) {
	if opts.Shard.On() {
		return nil, Stats{}, fmt.Errorf("shard %s: a share of a plan is planned with Share, for kplan merge", opts.Shard)
	}
	p, plan, err := execute(ctx, opts, defaultEngines())
	if err != nil {
		return nil, Stats{}, err
	}
	return plan, p.stats, nil
}

// Share plans the share opts.Shard of the overlays as a part for kplan
// merge, with what merge needs to find what they collide on with the
// other shares' overlays. version names the kplan, and opts.Fingerprint
// the options, every shard of the run must share.
func Share(ctx context.Context, opts Options, version string) (shard.Part, error) {
	if !opts.Shard.On() {
		return shard.Part{}, errors.New("no shard to plan: say which share (e.g. 2/3)")
	}
	p, plan, err := execute(ctx, opts, defaultEngines())
	if err != nil {
		return shard.Part{}, err
	}
	return shard.NewPart(plan, p.facts, opts.Shard, version, opts.Fingerprint()), nil
}

// execute plans with the registry engines (defaultEngines; a test
// passes its own rows: toyengine_test.go).
func execute(ctx context.Context, opts Options, engines []engine) (*planner, *inventorydiff.Plan, error) {
	start := time.Now()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Base == "" {
		return nil, nil, fmt.Errorf("no base revision: say which commit to compare against (e.g. --base main)")
	}
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	top, err := gitcli.Repo{Dir: opts.RepoDir}.TopLevel(ctx)
	if err != nil {
		return nil, nil, err
	}
	opts.RepoDir = top
	if opts.Render.Charts == nil {
		// One chart fetcher for the plan: kustomize helmCharts, Flux
		// HelmReleases and Argo CD Applications share its cache (the
		// render cache's charts/, but for the reference plan).
		dir := opts.CacheDir
		if opts.Full {
			dir = ""
		}
		opts.Render.Charts = opts.Render.NewCharts(dir)
	}
	kust := render.NewKustomizer(opts.Render)
	warm := warmer(kust)
	if opts.CacheDir == "" || opts.Full {
		warm() // every build runs: CPU work while git reads the commits
	}
	o, err := open(ctx, opts, engines)
	if err != nil {
		return nil, nil, err
	}
	base, head := o.base, o.head
	defer base.Blobs().Close() // both sides share it
	opts.Logger.Debug("opened", "took", time.Since(start).Round(time.Microsecond))
	p := &planner{opts: opts, log: opts.Logger, kust: kust, warm: warm, engines: engines, prefetched: o.prefetched, near: o.near}
	plan, err := p.run(ctx, base, head)
	if err != nil {
		return nil, nil, err
	}
	if err := o.scans.save(ctx, detectNeedles(opts, engines), base, head); err != nil {
		opts.Logger.Debug("detection's searches not kept", "err", err)
	}
	if p.cache != nil {
		// Entries no plan used for a while belong to revisions gone by.
		n, err := p.cache.Prune(cacheMaxAge)
		opts.Logger.Debug("render cache pruned", "removed", n, "err", err)
	}
	p.stats.Took = time.Since(start)
	plan.Work = &inventorydiff.Work{Overlays: p.stats.Overlays, Skipped: p.stats.Skipped,
		Rendered: p.stats.Rendered, CacheHits: p.stats.CacheHits, Took: p.stats.Took}
	opts.Logger.Info("planned", "base", base.Rev, "head", head.Rev, "files", head.Files,
		"overlays", p.stats.Overlays, "skipped", p.stats.Skipped, "rendered", p.stats.Rendered,
		"cacheHits", p.stats.CacheHits, "stored", p.stats.Stored, "failFast", p.stats.FailFast, "took", p.stats.Took.Round(time.Millisecond))
	return p, plan, nil
}

// warmer returns what parses kust's schema in the background, once: a
// plan that builds nothing (every build in the render cache) needs no
// schema, and parsing it was a fifth of such a plan.
func warmer(kust *render.Kustomizer) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			go func() {
				var err error
				defer crash.Recover(&err) // a render that needs the schema meets the same panic, in its overlay
				kust.Warm()
			}()
		})
	}
}

// opened are a plan's sides, opened.
type opened struct {
	base, head *snapshot.Snapshot
	// prefetched is closed once the rows' prefetches of the base are
	// done.
	prefetched <-chan struct{}
	scans      *scanStore
	near       *nearby
}

// open reads both sides lazily (only the files the plan needs are read
// later), sharing the contents they have in common: a commit head is
// listed from the base's listing and their diff; a work tree head takes
// the files git sees unmodified from the index.
//
// Meanwhile the engines that detect themselves from the base's files
// search them (scanner: the longest read of a plan without a render
// cache, mostly git unpacking; with one, only the files of the diff with
// a commit a plan before read, or the contents no plan searched before)
// and read what they found (prefetcher): prefetched is closed when they
// are done.
func open(ctx context.Context, opts Options, engines []engine) (*opened, error) {
	blobs := snapshot.NewBlobs(opts.RepoDir)
	o := &opened{scans: loadScans(opts)}
	var wg sync.WaitGroup
	var herr error
	if opts.Head == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer crash.Recover(&herr)
			o.head, herr = snapshot.OpenWorkingTree(ctx, opts.RepoDir, blobs)
		}()
	}
	var err error
	o.base, err = snapshot.Open(ctx, opts.RepoDir, opts.Base, blobs)
	if err == nil {
		o.near = newNearby(o.base)
		o.prefetched = prefetch(ctx, opts, engines, o)
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("load base: %w", err)
	}
	if opts.Head != "" {
		o.head, herr = snapshot.OpenFrom(ctx, o.base, opts.Head)
	}
	if herr != nil {
		return nil, fmt.Errorf("load head: %w", herr)
	}
	return o, nil
}

// prefetch searches the base for every scanner row's needles, then runs
// the prefetches of the rows that have one on the base; the channel is
// closed once all are done.
func prefetch(ctx context.Context, opts Options, engines []engine, o *opened) <-chan struct{} {
	done := make(chan struct{})
	base := o.base
	go func() {
		defer close(done)
		// A crash here is met again by the rows' detections, which fail
		// the plan with it.
		_ = crash.Catch(func() error {
			scanBase(ctx, opts.Logger, base, detectNeedles(opts, engines), o.scans, o.near)
			return nil
		})
		var wg sync.WaitGroup
		for _, e := range engines {
			if pf, ok := e.(prefetcher); ok {
				wg.Go(func() {
					_ = crash.Catch(func() error { pf.prefetch(ctx, opts, base); return nil })
				})
			}
		}
		wg.Wait()
	}()
	return done
}

// RenderWorkingTree renders overlays (paths relative to dir) as they are
// on disk, ignored files included (a local secret.env a generator reads),
// as `kustomize build` would. Overlays can use bases anywhere in the
// repository holding dir, and nothing outside it; outside git, dir is
// the root.
func RenderWorkingTree(ctx context.Context, dir string, overlays []string, opts render.Options) ([]render.Result, error) {
	fSys, rel, err := OpenWorkingTree(ctx, dir, overlays)
	if err != nil {
		return nil, err
	}
	tree, err := render.Discover(fSys, render.Filter{})
	if err != nil {
		return nil, err
	}
	return render.Render(ctx, fSys, tree, rel, opts)
}

// OpenWorkingTree opens the repository holding dir as RenderWorkingTree
// renders it, and returns overlays (relative to dir) relative to its
// root.
func OpenWorkingTree(ctx context.Context, dir string, overlays []string) (*snapshot.FS, []string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	root := dir
	if top, err := (gitcli.Repo{Dir: dir}).TopLevel(ctx); err == nil {
		root = top
	}
	rel := make([]string, len(overlays))
	for i, o := range overlays {
		r, err := filepath.Rel(root, filepath.Join(dir, o))
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return nil, nil, fmt.Errorf("overlay %s is outside the repository %s", o, root)
		}
		rel[i] = filepath.ToSlash(r)
	}
	fSys, err := snapshot.OpenDisk(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	return fSys, rel, nil
}
