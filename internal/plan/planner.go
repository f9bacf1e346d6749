package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// planner is one plan's state.
type planner struct {
	opts  Options
	log   *slog.Logger
	kust  *render.Kustomizer
	cache *rendercache.Cache
	hosts hostCache
	stats Stats
	// version names the code in cache keys.
	version string

	mu          sync.Mutex
	overlays    []inventorydiff.Overlay
	totals      inventorydiff.Totals
	cacheFailed bool
}

// side is one revision, discovered.
type side struct {
	s        *snapshot.Snapshot
	tree     *render.Tree
	closures *closure.Builder
	overlays map[string]bool
}

// job is one overlay to build on one side.
type job struct {
	overlay string
	side    int // 0 base, 1 head
	c       *closure.Closure
	key     string // render cache key; "" when the build is not cacheable
	cost    int    // bytes of input, to start the longest builds first
	done    *inventorydiff.Side
	pair    *pair
}

// pair collects an overlay's sides until both are known.
type pair struct {
	present [2]bool
	sides   [2]inventorydiff.Side
	left    int
}

func (p *planner) run(ctx context.Context, base, head *snapshot.Snapshot) (*inventorydiff.Plan, error) {
	done := p.phases()
	snaps := [2]*snapshot.Snapshot{base, head}
	trees, err := render.DiscoverAll([]filesys.FileSystem{base.FS, head.FS}, p.opts.Filter)
	if err != nil {
		return nil, fmt.Errorf("discover overlays of %s and %s: %w", base.Rev, head.Rev, err)
	}
	copts := closure.Options{EnableHelm: p.opts.Render.EnableHelm, Memo: closure.NewMemo()}
	var sides [2]*side
	for i, s := range snaps {
		if err := render.Prepare(s.FS, trees[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Rev, err)
		}
		sd := &side{s: s, tree: trees[i], overlays: map[string]bool{}, closures: closure.New(closure.SnapshotSource(ctx, s), copts)}
		for _, o := range trees[i].Overlays {
			sd.overlays[o] = true
		}
		sides[i] = sd
	}
	done("discovered")
	var changed map[string]bool
	if !p.opts.Full {
		changed = snapshot.Changed(base.Index, head.Index)
		if p.opts.CacheDir != "" {
			c, err := rendercache.Open(p.opts.CacheDir)
			if err != nil {
				return nil, err
			}
			p.cache = c
		}
	}

	jobs := p.jobs(sides, changed)
	done("closures")
	p.settle(ctx, sides, jobs)
	done("settled")
	var todo []*job
	for _, j := range jobs {
		if j.done != nil {
			p.deliver(j, *j.done)
			j.done = nil
		} else {
			todo = append(todo, j)
		}
	}
	if err := p.load(ctx, sides, todo); err != nil {
		return nil, err
	}
	done("loaded")
	slices.SortStableFunc(todo, func(a, b *job) int { return cmp.Compare(b.cost, a.cost) })
	if err := p.build(ctx, sides, todo); err != nil {
		return nil, err
	}
	done("built")
	slices.SortFunc(p.overlays, func(a, b inventorydiff.Overlay) int { return cmp.Compare(a.Path, b.Path) })
	return &inventorydiff.Plan{Base: base.Rev, Head: head.Rev, BaseLabel: p.opts.BaseLabel, HeadLabel: p.opts.HeadLabel, Overlays: p.overlays, Totals: p.totals}, nil
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
func (p *planner) jobs(sides [2]*side, changed map[string]bool) []*job {
	all := map[string]bool{}
	for _, sd := range sides {
		for o := range sd.overlays {
			all[o] = true
		}
	}
	// Each side on its own core. The builders share their memo of parsed
	// kustomizations, so the head goes through its overlays backwards:
	// the sides then parse different files until they meet.
	var closures [2]map[string]*closure.Closure
	var wg sync.WaitGroup
	for i, sd := range sides {
		closures[i] = map[string]*closure.Closure{}
		overlays := slices.Clone(sd.tree.Overlays)
		if i == 1 {
			slices.Reverse(overlays)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, o := range overlays {
				closures[i][o] = sd.closures.Overlay(o)
			}
		}()
	}
	wg.Wait()
	var jobs []*job
	for _, o := range slices.Sorted(mapKeys(all)) {
		p.stats.Overlays++
		pr := &pair{}
		var cs [2]*closure.Closure
		for i, sd := range sides {
			if sd.overlays[o] {
				pr.present[i] = true
				cs[i] = closures[i][o]
			}
		}
		if !p.opts.Full && pr.present[0] && pr.present[1] && unaffected(cs[0], changed) && unaffected(cs[1], changed) {
			p.stats.Skipped++
			p.compare(o, pair{present: pr.present, sides: [2]inventorydiff.Side{unrendered(), unrendered()}})
			continue
		}
		for i, sd := range sides {
			if !pr.present[i] {
				continue
			}
			pr.left++
			j := &job{overlay: o, side: i, c: cs[i], pair: pr}
			if p.cache != nil && cs[i].Bounded() {
				j.key = p.cacheKey(sd.s, cs[i])
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// unaffected: the build reads only repository paths, and none changed,
// so it reads exactly what it read on the other side.
func unaffected(c *closure.Closure, changed map[string]bool) bool {
	return c.Bounded() && !c.Meets(changed)
}

// unrendered is the side of an overlay the change cannot affect: the plan
// reports it unchanged without knowing its objects.
func unrendered() inventorydiff.Side {
	return inventorydiff.Side{Inventory: &inventory.Inventory{Objects: map[string]*inventory.Object{}}}
}

// settle finishes the jobs that need no build: remote resources on hosts
// that do not resolve, and renders in the cache.
func (p *planner) settle(ctx context.Context, sides [2]*side, jobs []*job) {
	for _, j := range jobs {
		if err := p.remoteFailure(ctx, sides[j.side].s, j); err != nil {
			p.stats.FailFast++
			j.done = &inventorydiff.Side{Err: err}
		}
	}
	if p.cache == nil {
		return
	}
	var hits []*job
	for _, j := range jobs {
		if j.done == nil && j.key != "" {
			hits = append(hits, j)
		}
	}
	// Decoding entries is CPU work, as rendering is: spread it out.
	parallel(ctx, p.workers(), hits, func(j *job) {
		e, ok := p.cache.Get(j.key)
		if !ok {
			return
		}
		sd := toSide(j.overlay, e.Objects, e.Err)
		j.done = &sd
	})
	for _, j := range hits {
		if j.done != nil {
			p.stats.CacheHits++
		}
	}
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
			if all {
				errs[i] = sd.s.LoadAll(ctx)
			} else if len(set) > 0 {
				errs[i] = sd.s.Load(ctx, slices.Sorted(mapKeys(set)))
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
	parallel(ctx, p.workers(), todo, func(j *job) {
		sd := sides[j.side]
		objs, err := p.kust.Render(sd.s.FS, j.overlay, j.c.OpenAPI)
		if j.key != "" && ctx.Err() == nil {
			perr := p.cache.Put(j.key, rendercache.Entry{Objects: objs, Err: err})
			p.mu.Lock()
			if perr == nil {
				p.stats.Stored++
			} else if !p.cacheFailed {
				p.cacheFailed = true // once: every other write fails the same way
				p.log.Warn("cannot write the render cache; plans stay correct, only slower", "err", perr)
			}
			p.mu.Unlock()
		}
		p.deliver(j, toSide(j.overlay, objs, err))
	})
	p.stats.Rendered = len(todo)
	return ctx.Err()
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
	if pr.present[0] && pr.present[1] {
		thin(pr.sides[0].Inventory, pr.sides[1].Inventory)
	}
	var maps [2]map[string]inventorydiff.Side
	for i := range maps {
		maps[i] = map[string]inventorydiff.Side{}
		if pr.present[i] {
			maps[i][overlay] = pr.sides[i]
		}
	}
	one := inventorydiff.Compare("", "", maps[0], maps[1])
	p.mu.Lock()
	defer p.mu.Unlock()
	p.overlays = append(p.overlays, one.Overlays...)
	t, o := &p.totals, one.Totals
	t.Added += o.Added
	t.Changed += o.Changed
	t.Pruned += o.Pruned
	t.Detached += o.Detached
	t.Overlays += o.Overlays
	t.ChangedOverlays += o.ChangedOverlays
	t.Failed += o.Failed
	t.Dangerous += o.Dangerous
}

func toSide(overlay string, objs []*yaml.RNode, err error) inventorydiff.Side {
	if err != nil {
		return inventorydiff.Side{Err: err}
	}
	inv, err := inventory.New(objs)
	if err != nil {
		err = fmt.Errorf("inventory of %s: %w", overlay, err)
	}
	return inventorydiff.Side{Inventory: inv, Err: err}
}

// cacheKey names a build by everything it depends on: kplan's and
// kustomize's versions, the render options, the overlay, and the state
// of every path of its closure.
func (p *planner) cacheKey(s *snapshot.Snapshot, c *closure.Closure) string {
	if p.version == "" {
		p.version = buildVersion()
	}
	parts := []string{p.version,
		"restrictNone=" + strconv.FormatBool(p.opts.Render.LoadRestrictorNone),
		"helm=" + strconv.FormatBool(p.opts.Render.EnableHelm), c.Overlay}
	for _, path := range c.Paths {
		parts = append(parts, path+"="+s.Index.State(path))
	}
	return rendercache.Key(parts...)
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
// items not started when ctx ends are skipped.
func parallel[T any](ctx context.Context, n int, items []T, fn func(T)) {
	next := make(chan T)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				fn(it)
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
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
