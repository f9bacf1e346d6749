package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os/exec"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/overlap"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/shard"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// planner is one plan's state.
type planner struct {
	opts Options
	log  *slog.Logger
	kust *render.Kustomizer
	// kube is head's .kplan.yaml (nil: none), whose kubernetes: says what
	// each target's cluster runs, for the charts helm inflates; kusts
	// are the Kustomizers for each cluster's (kustFor).
	kube   *repoconfig.Config
	kustMu sync.Mutex
	kusts  map[string]*render.Kustomizer
	// warm parses krusty's schema in the background, once (warmer).
	warm  func()
	cache *rendercache.Cache
	hosts hostCache
	stats Stats
	// version names the code in cache keys.
	version string

	// closures of every overlay on each side, for the files none reads.
	closures [2]map[string]*closure.Closure
	// engines is the plan's registry (defaultEngines unless a test's);
	// modes are the engines planned, in its order.
	engines []engine
	modes   []*engineMode
	// prefetched is closed once the rows' prefetches of the base are
	// done (open).
	prefetched <-chan struct{}
	// near are the base's diffs with the commits plans before it read.
	near *nearby

	mu       sync.Mutex
	overlays []inventorydiff.Overlay
	lonely   map[string]pair // overlays on one side only, compared last (moves)
	// headKeys are the objects each rendered overlay has on head, for
	// the objects two overlays render (duplicates).
	headKeys    map[string][]string
	cacheFailed bool
	built       int // builds done, for Options.Progress
	// owned are the overlays this shard plans; nil: all of them.
	owned map[string]bool
	// elsewhere are the overlays other shards own that the change cannot
	// affect, sorted: like this shard's own, rendered on head when its
	// overlays call for the findings across overlays.
	elsewhere []string
	// unplanned are the overlays base planned by discovery that head's
	// new .kplan.yaml does not list (adopt), sorted.
	unplanned []string
	// facts are what the findings across overlays read besides the
	// overlays' plans; a shard's part carries them to kplan merge.
	facts overlap.Facts
	// met says, while jobs probes closures, whether an overlay's closure
	// on each side meets the change (closures then have no paths).
	met [2]map[string]bool
}

// side is one revision, discovered.
type side struct {
	s        *snapshot.Snapshot
	tree     *render.Tree
	closures *closure.Builder
	overlays map[string]bool
	targets  *repoconfig.Config // nil: no .kplan.yaml, or one without targets
	ignore   repoconfig.Ignore  // .kplan.yaml's noise filters
	// adopting are the targets head's .kplan.yaml declares, on a base
	// that has none: its overlays render into their namespaces (adopt).
	adopting *repoconfig.Config
	disabled []string      // .kplan.yaml's dangerous.disable
	filter   render.Filter // what discovery plans: the plan's filter, within the targets
}

// namespace is where the overlay's namespaced objects rendered without a
// namespace go: its target's namespace, or "default".
func (sd *side) namespace(overlay string) string {
	for _, cfg := range []*repoconfig.Config{sd.targets, sd.adopting} {
		if cfg != nil {
			if ts := cfg.TargetsOf(overlay); len(ts) > 0 {
				return ts[0].Namespace
			}
		}
	}
	return repoconfig.DefaultNamespace
}

// adopt makes the change that adds .kplan.yaml's targets (base has none)
// plan nothing but what the change itself does: head's targets are
// compared with what their overlays render on base, into the targets'
// namespaces, and the overlays base planned by discovery that head does
// not list are no longer planned — kplan never deployed them, so the
// merge leaves them as they are: neither rendered, nor pruned, nor
// dangerous.
func (p *planner) adopt(sides [2]*side) {
	base, head := sides[0], sides[1]
	if base.targets != nil || head.targets == nil {
		return
	}
	base.adopting = head.targets
	for o := range base.overlays {
		if !head.overlays[o] {
			delete(base.overlays, o)
			p.unplanned = append(p.unplanned, o)
		}
	}
	slices.Sort(p.unplanned)
}

// job is one overlay to build on one side.
type job struct {
	overlay string
	side    int // 0 base, 1 head
	c       *closure.Closure
	key     string // render cache key; "" when the build is not cacheable
	// content names what the build reads (the render cache's key, kept
	// with or without a cache); "" when the closure is not bounded.
	content string
	// twin: the other side's closure reads the same content, so this
	// build serves both sides (deliverRender).
	twin bool
	// entry is the build read from the cache (settle).
	entry *rendercache.Entry
	cost  int // bytes of input, to start the longest builds first
	done  *inventorydiff.Side
	pair  *pair
}

// pair collects an overlay's sides until both are known.
type pair struct {
	present [2]bool
	sides   [2]inventorydiff.Side
	left    int
}

// run is the plan of head against base, in named phases: open the
// sides (their .kplan.yaml, the changed paths, the render cache), detect
// the engines while the overlays are discovered, plan the engines'
// targets, build the overlays, decorate what was compared, run the rules
// across overlays and targets, then the noise filters.
func (p *planner) run(ctx context.Context, base, head *snapshot.Snapshot) (*inventorydiff.Plan, error) {
	done := p.phases()
	sides, c, err := p.open(ctx, base, head)
	if err != nil {
		return nil, err
	}
	dctx, stop := context.WithCancel(ctx)
	detected, wait := p.detect(dctx, c)
	defer func() {
		// A plan failing first ends the detections before its files
		// close.
		stop()
		wait()
	}()
	if err := p.discover(ctx, sides, c.changed); err != nil {
		return nil, err
	}
	done("discovered")
	if err := p.planEngines(ctx, sides, c, detected); err != nil {
		return nil, err
	}
	unread, err := p.buildOverlays(ctx, sides, c, done)
	if err != nil {
		return nil, err
	}
	done("built")
	p.decorate(ctx, sides)
	if err := p.acrossTargets(ctx, sides); err != nil {
		return nil, err
	}
	plan := &inventorydiff.Plan{Base: base.Rev, Head: head.Rev, BaseLabel: p.opts.BaseLabel, HeadLabel: p.opts.HeadLabel,
		Overlays: p.overlays, Totals: inventorydiff.Sum(p.overlays), Unread: unread, Settings: p.settings(), NoLongerPlanned: p.unplanned}
	for _, m := range p.modes {
		plan.NotPlanned = append(plan.NotPlanned, m.notPlanned...)
	}
	plan.Ignore(p.ignoreRules(sides[1])...)
	return plan, nil
}

// open reads each side's .kplan.yaml, lists the changed paths and opens
// the render cache: what an engine reads of the change (change), and the
// planner's sides before discovery.
func (p *planner) open(ctx context.Context, base, head *snapshot.Snapshot) ([2]*side, *change, error) {
	c := &change{opts: p.opts, log: p.log, snaps: [2]*snapshot.Snapshot{base, head}, near: p.near}
	var sides [2]*side
	for i, s := range c.snaps {
		cfg, err := readTargets(ctx, s)
		if err != nil && i == 0 {
			// A broken file on base must not stop the PR that mends it.
			p.log.Warn("the base commit's targets cannot be read; planning its overlays as discovered", "err", err)
			cfg = nil
		} else if err != nil {
			return sides, nil, err
		}
		if i == 0 {
			c.baseConfig = cfg
		}
		if cfg != nil && i == 1 {
			c.config = cfg
			for _, w := range cfg.Warnings {
				p.log.Warn(w, "commit", s.Rev)
			}
		}
		sides[i] = p.newSide(s, cfg)
	}
	// Every changed path, for the files no overlay reads; the changed-only
	// plan skips overlays by it too, and head's discovery reads only it.
	p.kube = c.config
	c.changed = snapshot.Changed(base.Index, head.Index)
	c.skip = c.changed
	if p.opts.Full || p.opts.Warm {
		c.skip = nil
	}
	if err := p.openCache(ctx); err != nil {
		return sides, nil, err
	}
	c.cache = p.cache
	if p.cache != nil {
		c.version = p.version
	}
	return sides, c, nil
}

// newSide is the side of s before discovery, with its .kplan.yaml cfg
// (nil: none).
func (p *planner) newSide(s *snapshot.Snapshot, cfg *repoconfig.Config) *side {
	sd := &side{s: s, overlays: map[string]bool{}, filter: p.opts.Filter}
	if cfg != nil {
		sd.ignore, sd.disabled = cfg.Ignore, cfg.Dangerous.Disable
	}
	if cfg.HasTargets() {
		// Without targets, only ignore rules: overlays are discovered.
		sd.targets = cfg
		sd.filter.Targets = cfg.Overlays()
	}
	return sd
}

// openCache opens the render cache, unless the plan is full; its keys
// name the code, and with helm, the helm that made them.
func (p *planner) openCache(ctx context.Context) error {
	if p.opts.Full || p.opts.CacheDir == "" {
		return nil
	}
	c, err := rendercache.Open(p.opts.CacheDir)
	if err != nil {
		return err
	}
	p.cache = c
	p.version = buildVersion()
	if p.opts.Render.EnableHelm {
		// Stored renders depend on the helm that made them.
		p.version += " " + helmVersion(ctx, p.opts.Render.HelmCommand)
	}
	return nil
}

// detection is one row's detection on the change, once done.
type detection struct {
	run engineRun // nil: the engine applies none of the change's targets
	err error
}

// detect starts detecting every row of the registry on the change, each
// on its own goroutine once the base is prefetched: their searches of
// the repository's YAML, mostly in git, run while discovery reads the
// kustomizations. The channels answer in the registry's order; wait
// returns once every detection is done.
func (p *planner) detect(ctx context.Context, c *change) (answers []<-chan detection, wait func()) {
	var wg sync.WaitGroup
	answers = make([]<-chan detection, len(p.engines))
	for i, e := range p.engines {
		ch := make(chan detection, 1)
		answers[i] = ch
		wg.Go(func() {
			select {
			case <-p.prefetched:
			case <-ctx.Done():
			}
			var d detection
			d.err = crash.Catch(func() (err error) {
				d.run, err = e.detect(ctx, c)
				return err
			})
			ch <- d
		})
	}
	return answers, wg.Wait
}

// discover finds each side's overlays, and the closures' builders that
// read them.
func (p *planner) discover(ctx context.Context, sides [2]*side, changed map[string]bool) error {
	base, head := sides[0].s, sides[1].s
	memo := closure.NewMemo()
	trees, err := render.DiscoverChange(base.FS, head.FS, changed, [2]render.Filter{sides[0].filter, sides[1].filter}, memo)
	if err != nil {
		return fmt.Errorf("discover overlays of %s and %s: %w", base.Rev, head.Rev, err)
	}
	copts := closure.Options{EnableHelm: p.opts.Render.EnableHelm, Memo: memo, Shared: closure.NewShared(changed)}
	for i, sd := range sides {
		if err := render.Prepare(sd.s.FS, trees[i]); err != nil {
			return fmt.Errorf("%s: %w", sd.s.Rev, err)
		}
		sd.tree = trees[i]
		sd.closures = closure.New(closure.SnapshotSource(ctx, sd.s), copts)
		for _, o := range trees[i].Overlays {
			sd.overlays[o] = true
		}
	}
	// Without .kplan.yaml, an overlay discovered on one side is planned on
	// the other while its kustomization is there: a new reference to it
	// does not make it look removed or new. With the file, a side deploys
	// exactly its targets.
	for i, sd := range sides {
		other := sides[1-i]
		for o := range sd.overlays {
			if other.targets == nil && !other.overlays[o] && other.tree.Renderable(o) {
				other.overlays[o] = true
			}
		}
	}
	p.adopt(sides)
	return nil
}

// planEngines plans the targets of each engine detected on the change,
// in the registry's order, and drops the overlays their builds read.
// An engine plans its targets in one run: a sharded plan is refused.
func (p *planner) planEngines(ctx context.Context, sides [2]*side, c *change, detected []<-chan detection) error {
	for _, ch := range detected {
		var d detection
		select {
		case d = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if d.err != nil {
			return d.err
		}
		if d.run == nil {
			continue
		}
		if p.opts.Shard.On() {
			return d.run.shardRefusal()
		}
		m, err := d.run.plan(ctx, c)
		if err != nil {
			return err
		}
		m.dropRead(sides)
		p.modes = append(p.modes, m)
	}
	return nil
}

// buildOverlays plans the overlays: their closures decide what to build
// (the engines' targets are compared meanwhile), then the builds run and
// the overlays on one side only are compared, as moves first. It returns
// the changed files no build reads.
func (p *planner) buildOverlays(ctx context.Context, sides [2]*side, c *change, done func(string)) ([]inventorydiff.UnreadFile, error) {
	if err := p.checkFilter(sides); err != nil {
		return nil, err
	}
	jobs, err := p.jobs(sides, c.skip)
	if err != nil {
		return nil, err
	}
	for _, m := range p.modes {
		m.addClosures(p.closures)
		m.compare(ctx, p)
	}
	unread := p.unread(sides, c.changed)
	done("closures")
	if err := p.runJobs(ctx, sides, jobs); err != nil {
		return nil, err
	}
	p.compareLonely(sides)
	return unread, nil
}

// decorate sorts the overlays' plans and names on each its targets and
// file, the notes of its kustomizations and those of the engine applying
// it. The rules across overlays come after: they add to these notes.
func (p *planner) decorate(ctx context.Context, sides [2]*side) {
	slices.SortFunc(p.overlays, func(a, b inventorydiff.Overlay) int { return cmp.Compare(a.Path, b.Path) })
	notes := newNotes(ctx, sides[1])
	for i := range p.overlays {
		o := &p.overlays[i]
		for _, sd := range []*side{sides[1], sides[0]} {
			if sd.targets != nil && len(o.Targets) == 0 {
				for _, t := range sd.targets.TargetsOf(o.Path) {
					o.Targets = append(o.Targets, t.Name)
				}
			}
			if k := sd.tree.Kustomizations[o.Path]; k != nil && o.File == "" {
				o.File = k.File
			}
		}
		if o.HeadErr == "" && sides[1].overlays[o.Path] && (o.Status != inventorydiff.Unchanged || o.HeadHash != "") {
			o.Notes = notes.overlay(o.Path)
		}
		if o.Status != inventorydiff.Unchanged {
			// How the webhook rolls the change out: its order and windows.
			for _, n := range p.opts.WebhookNotes[o.Path] {
				o.Notes = append(o.Notes, "webhook: "+n)
			}
		}
	}
	for _, m := range p.modes {
		m.decorate(p)
	}
}

// acrossTargets runs the rules across the overlays and targets: shared
// inventories and duplicate objects among those deploying to one
// cluster; then takes out the findings of the rules .kplan.yaml turns
// off.
func (p *planner) acrossTargets(ctx context.Context, sides [2]*side) error {
	off := disabledRules(sides)
	p.facts.Clusters, p.facts.NoDuplicates = p.clusters(sides[1]), off[danger.DuplicateObject]
	if err := p.checkSharedInventories(ctx, sides[1]); err != nil {
		return err
	}
	for _, m := range p.modes {
		m.keysForDuplicates(ctx, p)
	}
	if err := p.duplicates(ctx, sides[1]); err != nil {
		return err
	}
	if p.owned != nil {
		p.facts.Keys = p.headKeys
	}
	p.headKeys = nil
	for i := range p.overlays {
		p.overlays[i].Dangerous = danger.Without(p.overlays[i].Dangerous, off)
	}
	return nil
}

// ignoreRules are the plan's noise filters, in the order they count what
// they hide: the defaults, the caller's, head's .kplan.yaml's, then the
// engines'.
func (p *planner) ignoreRules(head *side) []inventorydiff.IgnoreRules {
	var rules []inventorydiff.IgnoreRules
	if !p.opts.NoDefaultIgnore && (head.ignore.Defaults == nil || *head.ignore.Defaults) {
		// First: a change a team's own rule also matches is counted as
		// the default's, which they can turn off to see it.
		rules = append(rules, inventorydiff.DefaultIgnore())
	}
	rules = append(rules, p.opts.Ignore)
	if ig := head.ignore; len(ig.Fields)+len(ig.Kinds) > 0 {
		// Head's rules: a pull request that adds one sees what it hides.
		rules = append(rules, inventorydiff.IgnoreRules{Fields: ig.Fields, Kinds: ig.Kinds, Source: repoconfig.File})
	}
	for _, m := range p.modes {
		if m.ignoreRules != nil {
			rules = append(rules, m.ignoreRules()...)
		}
	}
	return rules
}

// runJobs settles, loads and builds jobs, delivering each side.
func (p *planner) runJobs(ctx context.Context, sides [2]*side, jobs []*job) error {
	if err := p.settle(ctx, sides, jobs); err != nil {
		return err
	}
	var todo, cached []*job
	for _, j := range jobs {
		switch {
		case j.entry != nil:
			cached = append(cached, j)
		case j.done != nil:
			p.deliverFailed(j, *j.done)
			j.done = nil
		default:
			todo = append(todo, j)
		}
	}
	// Making inventories of the cached renders is CPU work too.
	if err := parallel(ctx, p.workers(), cached, func(j *job) {
		p.deliverRender(sides, j, j.entry.Objects, j.entry.Err)
		j.entry = nil
	}); err != nil {
		return err
	}
	if len(todo) > 0 {
		p.warm() // while the files load
	}
	if err := p.load(ctx, sides, todo); err != nil {
		return err
	}
	slices.SortStableFunc(todo, func(a, b *job) int { return cmp.Compare(b.cost, a.cost) })
	p.tuneGC(todo)
	return p.build(ctx, sides, todo)
}

// smallBuilds is the most input a plan's builds read for the plan to be
// small (Options.GC): a one-application change on kubeflow's manifests
// reads 0.2 MB, its full plan 18 MB.
const smallBuilds = 4 << 20

// tuneGC tells Options.GC when the builds to run read little.
func (p *planner) tuneGC(todo []*job) {
	total := 0
	for _, j := range todo {
		total += j.cost
	}
	p.log.Debug("building", "builds", len(todo), "inputBytes", total)
	if p.opts.GC != nil && len(todo) > 0 && total < smallBuilds {
		p.opts.GC.Small()
	}
}

// readTargets reads the snapshot's .kplan.yaml; nil when it has none.
func readTargets(ctx context.Context, s *snapshot.Snapshot) (*repoconfig.Config, error) {
	if _, ok := s.Index.ID(repoconfig.File); !ok {
		return nil, nil
	}
	data, err := s.ReadFile(ctx, repoconfig.File)
	if err != nil {
		return nil, err
	}
	cfg, err := repoconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", s.Rev, err)
	}
	return cfg, nil
}

// phases returns a function that logs, at debug level, how long the
// phase it names took: where a plan's time goes.
func (p *planner) phases() func(name string) {
	last := time.Now()
	return func(name string) {
		p.log.Debug(name, "took", time.Since(last).Round(time.Microsecond))
		last = time.Now()
	}
}

// jobs decides what to build: every overlay on each side it exists on,
// except overlays the change cannot affect.
func (p *planner) jobs(sides [2]*side, changed map[string]bool) ([]*job, error) {
	set := map[string]bool{}
	for _, sd := range sides {
		for o := range sd.overlays {
			set[o] = true
		}
	}
	all := slices.Sorted(maps.Keys(set))
	if err := p.findClosures(sides, all, changed); err != nil {
		return nil, err
	}
	if p.opts.Shard.On() {
		p.owned = p.share(sides, all, changed)
	}
	var jobs []*job
	for _, o := range all {
		jobs = append(jobs, p.overlayJobs(sides, o, changed)...)
	}
	return jobs, nil
}

// findClosures finds the closure of every overlay on each side
// (p.closures), each side on its own core. The builders share their memo
// of parsed kustomizations, so the head goes through its overlays
// backwards: the sides then parse different files until they meet.
// Unless the plan is full, an overlay is probed first — does its closure
// meet the change? — and only those the plan may build get their paths:
// the union of every overlay's paths costs more than the rest.
func (p *planner) findClosures(sides [2]*side, all []string, changed map[string]bool) error {
	var closures [2]map[string]*closure.Closure
	for i := range sides {
		closures[i], p.met[i] = map[string]*closure.Closure{}, map[string]bool{}
	}
	full := p.opts.Full || p.opts.Warm
	err := bySide(sides, func(i int, sd *side) {
		overlays := slices.Sorted(maps.Keys(sd.overlays))
		if i == 1 {
			slices.Reverse(overlays)
		}
		if full {
			for _, o := range overlays {
				closures[i][o] = sd.closures.Overlay(o)
			}
			return
		}
		probe := sd.closures.Probe(changed)
		for _, o := range overlays {
			p.met[i][o], closures[i][o] = probe.Overlay(o)
		}
	})
	if err != nil {
		return err
	}
	p.closures = closures
	if full {
		return nil
	}
	// Those the change may affect, or that fail on discovery, need
	// their paths: to load, to key the cache, to weigh the shards.
	var need []string
	for _, o := range all {
		present, cs := p.closuresOf(sides, o)
		if !p.skip(sides, o, present, cs, changed) {
			need = append(need, o)
		}
	}
	err = bySide(sides, func(i int, sd *side) {
		for _, o := range need {
			if sd.overlays[o] {
				closures[i][o] = sd.closures.Overlay(o)
			}
		}
	})
	p.met = [2]map[string]bool{}
	return err
}

// bySide runs fn for each side on its own goroutine. A panic reading a
// kustomization is its closure's Err; one here is the walk's own, and
// ends the plan.
func bySide(sides [2]*side, fn func(i int, sd *side)) error {
	var wg sync.WaitGroup
	var errs [2]error
	for i, sd := range sides {
		wg.Go(func() {
			defer crash.Recover(&errs[i])
			fn(i, sd)
		})
	}
	wg.Wait()
	return errors.Join(errs[:]...)
}

// closuresOf says on which sides the overlay is, with its closure there.
func (p *planner) closuresOf(sides [2]*side, o string) (present [2]bool, cs [2]*closure.Closure) {
	for i, sd := range sides {
		if sd.overlays[o] {
			present[i], cs[i] = true, p.closures[i][o]
		}
	}
	return present, cs
}

// overlayJobs are the builds of one overlay: none when another shard
// plans it, when it fails without a build, or when the change cannot
// affect it (it is compared at once); else one per side, or one serving
// both.
func (p *planner) overlayJobs(sides [2]*side, o string, changed map[string]bool) []*job {
	present, cs := p.closuresOf(sides, o)
	if p.owned != nil && !p.owned[o] {
		// Its shard plans it; merge checks it against this shard's.
		if sides[0].tree.Errors[o] == nil && sides[1].tree.Errors[o] == nil && p.skip(sides, o, present, cs, changed) {
			p.elsewhere = append(p.elsewhere, o)
		}
		return nil
	}
	p.stats.Overlays++
	if failed := p.failed(sides, o, cs); failed[0] != nil || failed[1] != nil {
		pr := pair{present: present}
		for i := range sides {
			pr.sides[i] = unrendered()
			if failed[i] != nil {
				pr.sides[i] = inventorydiff.Side{Err: failed[i]}
			}
		}
		p.compare(o, pr)
		return nil
	}
	if p.skip(sides, o, present, cs, changed) {
		p.stats.Skipped++
		p.compare(o, pair{present: present, sides: [2]inventorydiff.Side{unrendered(), unrendered()}})
		return nil
	}
	return p.builds(sides, o, present, cs)
}

// failed are the overlay's failures on each side before any build: its
// discovery's, or a closure that failed, which is a bug reading the
// overlay's kustomizations (closure.Closure.Err).
func (p *planner) failed(sides [2]*side, o string, cs [2]*closure.Closure) [2]error {
	var failed [2]error
	for i, sd := range sides {
		if failed[i] = sd.tree.Errors[o]; failed[i] == nil && cs[i] != nil && cs[i].Err != nil {
			p.logCrash(o, cs[i].Err)
			failed[i] = cs[i].Err
		}
	}
	return failed
}

// builds are the jobs building the overlay on the sides it is present
// on, keyed by the content their closures read.
func (p *planner) builds(sides [2]*side, o string, present [2]bool, cs [2]*closure.Closure) []*job {
	pr := &pair{present: present}
	var js [2]*job
	for i, sd := range sides {
		if !present[i] {
			continue
		}
		pr.left++
		js[i] = &job{overlay: o, side: i, c: cs[i], pair: pr}
		if cs[i].Bounded() {
			js[i].content = p.cacheKey(sd.s, cs[i])
			if p.cache != nil {
				js[i].key = js[i].content
			}
		}
	}
	// One render per distinct input: a side whose closure reads what
	// the other's reads renders the same objects (the closure is every
	// path the build reads), so one build serves both, with or without
	// a cache, in a full plan as in a changed-only one (an overlay whose
	// namespace or ResourceGroup file changes).
	if b, h := js[0], js[1]; b != nil && h != nil && b.content != "" && b.content == h.content && !p.opts.NoReuse {
		b.twin = true
		return []*job{b}
	}
	var out []*job
	for _, j := range js {
		if j != nil {
			out = append(out, j)
		}
	}
	return out
}

// deliverRender delivers a build's result to the job's side, and to the
// other side as well when the job is a twin: each side makes its own
// inventory (its namespace, its ResourceGroup file) from its own copy of
// the objects.
func (p *planner) deliverRender(sides [2]*side, j *job, objs []*yaml.RNode, err error) {
	if j.twin {
		other := 1 - j.side
		copied := make([]*yaml.RNode, len(objs))
		for i, n := range objs {
			copied[i] = n.Copy()
		}
		p.deliver(&job{overlay: j.overlay, side: other, pair: j.pair}, p.safely(sides[other], j.overlay, func() inventorydiff.Side {
			return p.toSide(sides[other], j.overlay, copied, err)
		}))
	}
	p.deliver(j, p.safely(sides[j.side], j.overlay, func() inventorydiff.Side { return p.toSide(sides[j.side], j.overlay, objs, err) }))
}

// deliverFailed delivers a side that failed without a build (a remote
// host that does not resolve, a crash) to the job's sides.
func (p *planner) deliverFailed(j *job, sd inventorydiff.Side) {
	if j.twin {
		p.deliver(&job{overlay: j.overlay, side: 1 - j.side, pair: j.pair}, sd)
	}
	p.deliver(j, sd)
}

// skip says the change cannot affect the overlay: the plan reports it
// unchanged without rendering it.
func (p *planner) skip(sides [2]*side, o string, present [2]bool, cs [2]*closure.Closure, changed map[string]bool) bool {
	return !p.opts.Full && !p.opts.Warm && present[0] && present[1] && p.unaffected(0, o, cs[0], changed) && p.unaffected(1, o, cs[1], changed) &&
		!changed[path.Join(o, inventory.ResourceGroupFile)] && sides[0].namespace(o) == sides[1].namespace(o)
}

// share picks the overlays this shard plans, the same way in every
// shard: each overlay weighs the paths its builds read (nothing when the
// plan skips it), and the overlays present on one side only go together,
// for a removed overlay and a new one may be one moved.
func (p *planner) share(sides [2]*side, all []string, changed map[string]bool) map[string]bool {
	var units []shard.Unit
	lonely := shard.Unit{}
	for _, o := range all {
		var present [2]bool
		var cs [2]*closure.Closure
		u := shard.Unit{Overlays: []string{o}}
		for i, sd := range sides {
			if present[i] = sd.overlays[o]; present[i] {
				cs[i] = p.closures[i][o]
				u.Cost += len(cs[i].Paths)
			}
		}
		if sides[0].tree.Errors[o] != nil || sides[1].tree.Errors[o] != nil || p.skip(sides, o, present, cs, changed) {
			u.Cost = 0
		}
		if present[0] != present[1] {
			lonely.Overlays = append(lonely.Overlays, o)
			lonely.Cost += u.Cost
			continue
		}
		units = append(units, u)
	}
	if len(lonely.Overlays) > 0 {
		units = append(units, lonely)
	}
	owned := map[string]bool{}
	for i, s := range shard.Assign(units, p.opts.Shard.Count) {
		if s == p.opts.Shard.Index {
			for _, o := range units[i].Overlays {
				owned[o] = true
			}
		}
	}
	return owned
}

// unaffected: the build reads only repository paths, and none changed,
// so it reads exactly what it read on the other side. A remote reference
// the network policy refuses reads nothing either: the build fails on it
// the same way on both sides, whatever the network does. A git base the
// render fetches reads the same tree on both sides: its URL and ref are
// in unchanged files, and one plan resolves a ref once (a tag or a SHA
// names one commit; a branch is asked for once per run).
func (p *planner) unaffected(side int, o string, c *closure.Closure, changed map[string]bool) bool {
	meets, probed := p.met[side][o]
	if !probed {
		meets = c.Meets(changed)
	}
	if c.Unbounded != "" || meets {
		return false
	}
	for _, r := range c.Remote {
		if !p.refused(r) && (p.opts.Render.Git == nil || !render.IsGitBase(r.Field, r.Ref)) {
			return false
		}
	}
	return true
}

// refused says whether the render surely refuses to fetch a remote
// reference: an http(s) URL whose host the policy does not allow (git
// bases over http(s), and helmCharts' oci:// registries, which
// internal/charts speaks to over https, follow the same rule). Other
// forms may be fetched.
func (p *planner) refused(r closure.Remote) bool {
	u, err := url.Parse(r.Ref)
	if err == nil && u.Scheme == "oci" {
		u.Scheme = "https"
	}
	if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return p.refusal(u) != nil
}

// refusal is the network policy's refusal of an http(s) URL, nil when it
// may be fetched.
func (p *planner) refusal(u *url.URL) error {
	if p.opts.Render.Remote == nil {
		return fmt.Errorf("fetch %s refused: this render fetches from no host (hosts are listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts)", u.Redacted())
	}
	if c, ok := p.opts.Render.Remote.(interface{ Check(*url.URL) error }); ok {
		return c.Check(u)
	}
	return nil
}

// settings are the render settings the plan used, recorded with it.
func (p *planner) settings() inventorydiff.Settings {
	s := inventorydiff.Settings{Helm: p.opts.Render.EnableHelm, LoadRestrictorNone: p.opts.Render.LoadRestrictorNone}
	for _, m := range p.modes {
		if m.settings != nil {
			m.settings(&s)
		}
	}
	if n, ok := p.opts.Render.Remote.(interface{ Names() []string }); ok {
		s.RemoteHosts = n.Names()
	}
	return s
}

// unrendered is the side of an overlay the change cannot affect: the plan
// reports it unchanged without knowing its objects.
func unrendered() inventorydiff.Side {
	return inventorydiff.Side{Inventory: &inventory.ObjectSet{Objects: map[string]*inventory.Object{}}, Skipped: true}
}

// settle finishes the jobs that need no build: remote resources on hosts
// that do not resolve, and renders in the cache.
func (p *planner) settle(ctx context.Context, sides [2]*side, jobs []*job) error {
	for _, j := range jobs {
		sd := p.safely(sides[j.side], j.overlay, func() inventorydiff.Side {
			return inventorydiff.Side{Err: p.remoteFailure(ctx, sides[j.side].s, j)}
		})
		if sd.Err != nil {
			if crash.As(sd.Err) == nil {
				p.stats.FailFast++
			}
			j.done = &sd
		}
	}
	if p.cache == nil {
		return nil
	}
	var hits []*job
	for _, j := range jobs {
		if j.done == nil && j.key != "" {
			hits = append(hits, j)
		}
		if j.done == nil && (j.key == "" || !p.cache.Has(j.key)) {
			p.warm() // a build will run: parse the schema while hits decode
		}
	}
	// Decoding entries is CPU work, as rendering is: spread it out.
	err := parallel(ctx, p.workers(), hits, func(j *job) {
		sd := p.safely(sides[j.side], j.overlay, func() inventorydiff.Side {
			if e, ok := p.cache.Get(j.key); ok {
				j.entry = &e
			}
			return inventorydiff.Side{}
		})
		if sd.Err != nil {
			j.done = &sd
		}
	})
	for _, j := range hits {
		if j.entry != nil {
			p.stats.CacheHits++
		}
	}
	return err
}

// load reads into each side's FS what its builds can read: the union of
// their closures, or everything when a build is unbounded.
func (p *planner) load(ctx context.Context, sides [2]*side, todo []*job) error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, sd := range sides {
		all := p.opts.Full
		set := map[string]bool{}
		for _, j := range todo {
			if j.side != i {
				continue
			}
			if j.c.Unbounded != "" {
				all = true
			}
			for _, path := range j.c.Paths {
				set[path] = true
			}
		}
		// The sides share what git reads; each fills its own FS.
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer crash.Recover(&errs[i])
			if all {
				errs[i] = sd.s.LoadAll(ctx)
			} else if len(set) > 0 {
				errs[i] = sd.s.Load(ctx, slices.Sorted(maps.Keys(set)))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	for _, j := range todo {
		for _, path := range j.c.Paths {
			j.cost += sides[j.side].s.Size(path)
		}
	}
	// The FS hold copies now; builds need the memory more.
	for _, sd := range sides {
		sd.s.Blobs().Drop()
	}
	return nil
}

// build runs krusty for the jobs, longest first, on every core.
func (p *planner) build(ctx context.Context, sides [2]*side, todo []*job) error {
	err := parallel(ctx, p.workers(), todo, func(j *job) {
		sd := sides[j.side]
		var objs []*yaml.RNode
		var rerr error
		built := false
		failed := p.safely(sd, j.overlay, func() inventorydiff.Side {
			objs, rerr = p.kustFor(j.overlay).Render(sd.s.FS, j.overlay, j.c.OpenAPI)
			// A render past its time budget depends on the machine's load,
			// not on the commit: never cache it.
			var timeout *render.TimeoutError
			if j.key != "" && ctx.Err() == nil && !errors.As(rerr, &timeout) {
				perr := p.cache.Put(j.key, rendercache.Entry{Objects: objs, Err: rerr})
				p.mu.Lock()
				if perr == nil {
					p.stats.Stored++
				} else if !p.cacheFailed {
					p.cacheFailed = true // once: every other write fails the same way
					p.log.Warn("cannot write the render cache; plans stay correct, only slower", "err", perr)
				}
				p.mu.Unlock()
			}
			built = true
			return inventorydiff.Side{}
		})
		if built {
			p.deliverRender(sides, j, objs, rerr)
		} else {
			p.deliverFailed(j, failed)
		}
		if p.opts.Progress != nil {
			p.mu.Lock()
			p.built++
			p.opts.Progress(p.built, len(todo))
			p.mu.Unlock()
		}
	})
	p.stats.Rendered = len(todo)
	return cmp.Or(err, ctx.Err())
}

// safely runs fn, one overlay's work on one side: a panic in it fails
// that overlay alone, with its kustomization file named as a render
// error names it, and the rest of the plan goes on.
func (p *planner) safely(sd *side, overlay string, fn func() inventorydiff.Side) (out inventorydiff.Side) {
	err := crash.Catch(func() error {
		out = fn()
		return nil
	})
	if err != nil {
		p.logCrash(overlay, err)
		where := overlay
		if sd != nil && sd.tree != nil && sd.tree.Kustomizations[overlay] != nil {
			where = sd.tree.Kustomizations[overlay].File
		}
		out = inventorydiff.Side{Err: fmt.Errorf("%s: %w", where, err)}
	}
	return out
}

// logCrash logs a panic planning overlay with its stack, for the bug
// report the overlay's error asks for.
func (p *planner) logCrash(overlay string, err error) {
	if c := crash.As(err); c != nil {
		p.log.Error("kplan bug: panic planning an overlay; the overlay fails, the rest is planned", "overlay", overlay, "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
	}
}

func (p *planner) workers() int {
	if n := p.opts.Render.Parallelism; n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// deliver records one side of an overlay and compares the overlay once
// both are in, so that rendered objects are dropped as soon as possible.
func (p *planner) deliver(j *job, sd inventorydiff.Side) {
	p.mu.Lock()
	pr := j.pair
	pr.sides[j.side] = sd
	pr.left--
	ready := pr.left == 0
	p.mu.Unlock()
	if ready {
		p.compare(j.overlay, *pr)
		*pr = pair{} // release the inventories
	}
}

func (p *planner) compare(overlay string, pr pair) {
	if pr.present[0] != pr.present[1] {
		// New or removed: it may be the other half of a move.
		p.mu.Lock()
		if p.lonely == nil {
			p.lonely = map[string]pair{}
		}
		p.lonely[overlay] = pr
		p.mu.Unlock()
		return
	}
	o := p.compareOne(overlay, pr.sides[0], true, pr.sides[1], true)
	p.mu.Lock()
	p.overlays = append(p.overlays, o)
	p.keepHeadKeys(overlay, pr.sides[1])
	p.mu.Unlock()
}

// compareLonely compares the overlays present on one side only. A removed
// overlay and a new one with the same inventory-id, or with no inventory
// and the same objects, are one overlay moved: compared with each other,
// so that only what really changes is planned.
func (p *planner) compareLonely(sides [2]*side) {
	var removed, added []string
	for _, o := range slices.Sorted(maps.Keys(p.lonely)) {
		if p.lonely[o].present[0] {
			removed = append(removed, o)
		} else {
			added = append(added, o)
		}
	}
	same := func(b, h *inventory.ObjectSet) bool {
		if b == nil || h == nil || len(b.Refs) == 0 {
			return false
		}
		bi, hi := b.Identity(), h.Identity()
		if bi != nil || hi != nil {
			return bi != nil && hi != nil && bi.ID == hi.ID
		}
		return len(b.Inventories) == 0 && len(h.Inventories) == 0 && slices.Equal(b.Refs, h.Refs)
	}
	for _, r := range removed {
		b := p.lonely[r].sides[0]
		for i, a := range added {
			h := p.lonely[a].sides[1]
			if a == "" || b.Err != nil || h.Err != nil || !same(b.Inventory, h.Inventory) {
				continue
			}
			o := p.compareOne(a, b, true, h, true)
			if o.BaseErr == "" && o.HeadErr == "" {
				o.Status, o.MovedFrom = inventorydiff.Moved, r
			}
			p.overlays = append(p.overlays, o)
			p.keepHeadKeys(a, h)
			delete(p.lonely, r)
			delete(p.lonely, a)
			added[i] = ""
			break
		}
	}
	for _, o := range slices.Sorted(maps.Keys(p.lonely)) {
		pr := p.lonely[o]
		ov := p.compareOne(o, pr.sides[0], pr.present[0], pr.sides[1], pr.present[1])
		if pr.present[1] {
			p.keepHeadKeys(o, pr.sides[1])
		}
		if pr.present[0] && sides[0].targets != nil {
			// A target taken out of .kplan.yaml is no longer deployed;
			// nothing prunes what it applied.
			ov.Detached, ov.Pruned, ov.Dangerous = append(ov.Detached, ov.Pruned...), nil, nil
		}
		p.overlays = append(p.overlays, ov)
	}
	p.lonely = nil
}

// compareOne compares an overlay's sides, with the digest of head's
// render. A panic comparing them fails the overlay alone.
func (p *planner) compareOne(overlay string, b inventorydiff.Side, inBase bool, h inventorydiff.Side, inHead bool) (o inventorydiff.Overlay) {
	err := crash.Catch(func() error {
		digest := ""
		if inHead {
			digest = headDigest(h)
		}
		if inBase && inHead {
			// Marked after the digest, which holds no mark, and before
			// thin, which would take fields masked alike for unchanged.
			inventorydiff.MarkMaskedChanges(b, h)
			thin(b.Inventory, h.Inventory)
		}
		if b.Kubernetes == nil && h.Kubernetes == nil && p.inflates(overlay) {
			caps := p.kubernetes(overlay)
			h.Kubernetes = &caps
		}
		o = inventorydiff.CompareOne(overlay, b, inBase, h, inHead)
		o.HeadDigest = digest
		return nil
	})
	if err != nil {
		p.logCrash(overlay, err)
		err = fmt.Errorf("compare %s: %w", overlay, err)
		o = inventorydiff.CompareOne(overlay, inventorydiff.Side{Err: err}, inBase, inventorydiff.Side{Err: err}, inHead)
	}
	return o
}

// headDigest is the digest of a head render, taken before thin empties
// the objects both sides share; "" for a render that failed (or whose
// objects cannot be read back, which the plan then shows as not
// reviewed), and for a side not rendered: the empty render's digest
// would be "reviewed as empty" (a deploy of it would differ).
func headDigest(h inventorydiff.Side) string {
	if h.Err != nil || h.Inventory == nil || h.Skipped {
		return ""
	}
	d, err := h.Inventory.Digest()
	if err != nil {
		return ""
	}
	return d
}

func (p *planner) toSide(sd *side, overlay string, objs []*yaml.RNode, err error) inventorydiff.Side {
	if err != nil {
		return inventorydiff.Side{Err: err}
	}
	ns := sd.namespace(overlay)
	var dir *render.InventoryDirective
	if k := sd.tree.Kustomizations[overlay]; k != nil {
		dir = k.Inventory
	}
	files := func(name string) ([]byte, error) {
		return sd.s.ReadFile(context.Background(), path.Join(overlay, name))
	}
	inv, err := declared.Planned(render.Result{Path: overlay, Objects: objs, Inventory: dir}, files, ns)
	if err != nil {
		return inventorydiff.Side{Err: fmt.Errorf("inventory of %s: %w", overlay, err)}
	}
	if len(inv.Inventories) > 1 {
		return inventorydiff.Side{Inventory: inv, Err: fmt.Errorf("%s renders %d inventory objects (%s): an apply records its objects in exactly one; remove all but one",
			overlay, len(inv.Inventories), joinIdentities(inv.Inventories))}
	}
	return inventorydiff.Side{Inventory: inv}
}

func joinIdentities(ids []inventory.Identity) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, "; ")
}

// cacheKey names a build by everything it depends on: kplan's and
// kustomize's versions (and helm's, when enabled), the render options, the
// overlay, and the state of every path of its closure.
func (p *planner) cacheKey(s *snapshot.Snapshot, c *closure.Closure) string {
	if p.version == "" {
		p.version = buildVersion()
	}
	k := rendercache.NewKeyWriter()
	for _, part := range []string{p.version,
		"restrictNone=" + strconv.FormatBool(p.opts.Render.LoadRestrictorNone),
		"helm=" + strconv.FormatBool(p.opts.Render.EnableHelm), c.Overlay} {
		k.Add(part)
	}
	if p.opts.Render.EnableHelm {
		// Charts render for the cluster's Kubernetes.
		k.Add("kube=" + p.kubernetes(c.Overlay).Key())
	}
	for _, path := range c.Paths {
		k.AddPair(path, s.Index.State(path))
	}
	return k.Sum()
}

// helmVersion names the helm a render with charts runs, as `helm version`
// prints it. A helm that cannot say gets a name no other run shares: its
// renders are stored, and never reused.
func helmVersion(ctx context.Context, command string) string {
	if command == "" {
		command = "helm"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, command, "version").Output()
	if err != nil {
		return fmt.Sprintf("helm=%s unknown (%v) %d", command, err, time.Now().UnixNano())
	}
	return "helm=" + strings.TrimSpace(string(out))
}

// buildVersion names the code a render comes from: the kplan build and
// the modules that parse and build.
func buildVersion() string {
	v := []string{"kplan-render/1"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v[0] + " unknown build"
	}
	v = append(v, bi.Main.Path+"@"+bi.Main.Version)
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
			v = append(v, s.Key+"="+s.Value)
		}
	}
	for _, m := range bi.Deps {
		switch m.Path {
		case "sigs.k8s.io/kustomize/api", "sigs.k8s.io/kustomize/kyaml", "go.yaml.in/yaml/v3", "sigs.k8s.io/yaml":
			if m.Replace != nil {
				m = m.Replace
			}
			v = append(v, m.Path+"@"+m.Version+" "+m.Sum)
		}
	}
	return strings.Join(v, " ")
}

// parallel runs fn on every item with n goroutines, in order of items;
// items not started when ctx ends are skipped. fn recovers what it can
// fail alone; a panic past it ends the run with that crash.
func parallel[T any](ctx context.Context, n int, items []T, fn func(T)) error {
	next := make(chan T)
	var wg sync.WaitGroup
	errs := make([]error, min(n, len(items)))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := crash.Catch(func() error { fn(it); return nil }); err != nil {
					errs[w] = cmp.Or(errs[w], err)
				}
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		next <- it
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// identities renders overlays on one side for their inventory alone;
// keys, when not nil, gets each rendered overlay's object keys.
func (p *planner) identities(ctx context.Context, sd *side, overlays []string, keys map[string][]string) (map[string]*inventory.Identity, error) {
	if len(overlays) == 0 {
		return nil, nil
	}
	out := make(map[string]*inventory.Identity, len(overlays))
	var mu sync.Mutex
	record := func(o string, side inventorydiff.Side) {
		mu.Lock()
		defer mu.Unlock()
		out[o] = side.Inventory.Identity()
		if keys != nil && side.Err == nil && side.Inventory != nil {
			keys[o] = side.Inventory.Keys
		}
	}
	// The render cache first, as for the plan's own builds: unaffected
	// overlays render on head as they did on earlier plans.
	var paths []string
	var todo []string
	all := false
	cs := map[string]*closure.Closure{}
	cacheKeys := map[string]string{}
	for _, o := range overlays {
		c := sd.closures.Overlay(o)
		cs[o] = c
		if p.cache != nil && c.Bounded() {
			cacheKeys[o] = p.cacheKey(sd.s, c)
			if e, ok := p.cache.Get(cacheKeys[o]); ok {
				record(o, p.safely(sd, o, func() inventorydiff.Side { return p.toSide(sd, o, e.Objects, e.Err) }))
				p.stats.CacheHits++
				continue
			}
		}
		todo = append(todo, o)
		all = all || c.Unbounded != ""
		paths = append(paths, c.Paths...)
	}
	if len(todo) == 0 {
		return out, nil
	}
	var err error
	if all {
		err = sd.s.LoadAll(ctx)
	} else {
		err = sd.s.Load(ctx, paths)
	}
	if err != nil {
		return nil, err
	}
	perr := parallel(ctx, p.workers(), todo, func(o string) {
		record(o, p.safely(sd, o, func() inventorydiff.Side {
			objs, err := p.kustFor(o).Render(sd.s.FS, o, cs[o].OpenAPI)
			var timeout *render.TimeoutError
			if key := cacheKeys[o]; key != "" && ctx.Err() == nil && !errors.As(err, &timeout) {
				if perr := p.cache.Put(key, rendercache.Entry{Objects: objs, Err: err}); perr == nil {
					mu.Lock()
					p.stats.Stored++
					mu.Unlock()
				}
			}
			return p.toSide(sd, o, objs, err)
		}))
	})
	p.stats.Rendered += len(todo)
	return out, cmp.Or(perr, ctx.Err())
}

// kubernetes is what the cluster of overlay's targets runs, as head's
// .kplan.yaml declares it (both sides, as every setting of an engine):
// what its charts see.
func (p *planner) kubernetes(overlay string) kubeversion.Capabilities {
	return p.kube.TargetCapabilities(overlay)
}

// kustFor is the Kustomizer that builds overlay: with helm, one per
// cluster's Kubernetes (kubernetes), made once.
func (p *planner) kustFor(overlay string) *render.Kustomizer {
	if !p.opts.Render.EnableHelm {
		return p.kust
	}
	caps := p.kubernetes(overlay)
	if caps.Equal(kubeversion.Capabilities{Version: p.opts.Render.KubeVersion, APIVersions: p.opts.Render.APIVersions}) {
		return p.kust
	}
	p.kustMu.Lock()
	defer p.kustMu.Unlock()
	if k := p.kusts[caps.Key()]; k != nil {
		return k
	}
	if p.kusts == nil {
		p.kusts = map[string]*render.Kustomizer{}
	}
	k := render.NewKustomizer(p.opts.Render.WithKubernetes(caps))
	p.kusts[caps.Key()] = k
	return k
}

// inflates says whether overlay's build, on either side, inflates Helm
// charts (with helm on): the plan says which Kubernetes they saw.
func (p *planner) inflates(overlay string) bool {
	if !p.opts.Render.EnableHelm {
		return false
	}
	for _, cs := range p.closures {
		if c := cs[overlay]; c != nil && c.Helm {
			return true
		}
	}
	return false
}
