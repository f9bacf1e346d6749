package plan

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/overlap"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// engine is a row of the plan's registry of engines (defaultEngines, or
// the rows a test passes to execute): another engine applying the
// repository's targets (a Flux Kustomization, an Argo CD Application),
// which the planner plans as targets instead of the overlays their
// builds read. The planner knows engines only through this door, small
// and declared here where it is used: it detects each row on the
// change, refuses a sharded plan when one is on, plans the rows in
// order and treats their targets alike (engineMode).
//
// The plain kustomize overlays are no row. They are what the engines'
// targets are cut from (engineMode.dropRead), and their path is
// genuinely different: planned overlay by overlay rather than a side at
// once, each build cached and shared between the sides, sharded, moved.
// A row shape that fits both would be the planner itself; the overlays
// are its build phase instead.
type engine interface {
	// detect says whether the engine applies this change's targets: its
	// flag (Options), else head's .kplan.yaml, else what the sides hold.
	// On, it returns the engine opened on the change, which plans it;
	// off, nil. It runs while the planner discovers the overlays.
	detect(ctx context.Context, c *change) (engineRun, error)
}

// engineRun is an engine detected on a change.
type engineRun interface {
	// shardRefusal is the error a sharded plan fails with: an engine
	// plans its targets in one run (a Flux Kustomization builds after
	// the ones it depends on, an Application renders Applications).
	shardRefusal() error
	// plan plans the targets of both sides, leaving unbuilt those the
	// change cannot affect (c.skip), as the planner compares them.
	plan(ctx context.Context, c *change) (*engineMode, error)
}

// prefetcher is a row whose detection reads the base's files: it starts
// reading them while the head is opened (the longest read of a plan,
// mostly git unpacking), and its detect finds them remembered.
type prefetcher interface {
	prefetch(ctx context.Context, opts Options, base *snapshot.Snapshot)
}

// defaultEngines is the registry of every plan: Flux first, Argo CD
// second, the order their targets' notes and rules are written in. A
// test adds a row by passing execute its own list.
func defaultEngines() []engine {
	return []engine{fluxEngine{}, argoEngine{}}
}

// change is what an engine reads of the change it plans.
type change struct {
	opts  Options
	log   *slog.Logger
	snaps [2]*snapshot.Snapshot // base, head
	// config is head's .kplan.yaml, nil when it has none: both sides
	// are planned with head's engine settings.
	config *repoconfig.Config
	// baseConfig is base's .kplan.yaml, nil when it has none (or it
	// cannot be read): what its clusters run, for the charts rendered
	// on base.
	baseConfig *repoconfig.Config
	changed    map[string]bool // every changed path
	// skip are the changed paths by which the targets the change cannot
	// affect are left unbuilt; nil builds all (Options.Full, Warm).
	skip map[string]bool
	// cache is the render cache, nil when there is none; version names
	// the code in its keys.
	cache   *rendercache.Cache
	version string
	// near are the base's diffs with the commits plans before it read
	// (nil without a cache).
	near *nearby
}

// engineTarget is one target of a mode in which another engine applies
// what the plan shows (a Flux Kustomization, an Argo CD Application), as
// the planner reads it. Every engine hands its targets over in this
// shape so the plan treats them alike: filters, closures, comparison,
// notes, clusters and the duplicate-object rule are written once, here.
type engineTarget struct {
	name    string // its identity in the plan ([cluster: ]namespace/name)
	path    string // the directory it builds, which filters select too ("" none)
	file    string // the file declaring it
	cluster string // the cluster it is applied to
	closure *closure.Closure
	// deferred: the change cannot affect it; it was not built.
	deferred bool
	// notes are what kplan did not render or could not know offline.
	notes []string
	// side is its render as the planner compares it.
	side func() inventorydiff.Side
	// changeNotes say what the engine will not do on its own with a
	// change to the target (pruning: the plan prunes; deleted: the merge
	// removes the target); nil says nothing.
	changeNotes func(pruning, deleted bool) []string
}

// engineMode is the targets of both sides of one such mode, as an
// engine's plan returns them, with the engine's own hooks.
type engineMode struct {
	label   string // "Flux", "Argo CD": prefixes the notes
	targets [2]map[string]*engineTarget
	// renderDeferred renders on head the targets the change left
	// unbuilt, for the duplicate-object rule; nil when the engine keeps
	// them out of it.
	renderDeferred func(ctx context.Context, names []string) map[string]inventorydiff.Side
	// compared, when set, reads a target's sides before the planner
	// compares them, and may set what the base side keeps (Argo CD's
	// sync options, its ignoreDifferences).
	compared func(ctx context.Context, name string, pr *pair)
	// decorated, when set, adds the mode's own notes and findings to a
	// target's plan.
	decorated func(o *inventorydiff.Overlay)
	// ignoreRules, when set, are the mode's noise rules, counted as any.
	ignoreRules func() []inventorydiff.IgnoreRules
	// settings, when set, records the mode in the plan's settings.
	settings func(*inventorydiff.Settings)
	// notPlanned are head's objects of the mode that are no target.
	notPlanned []inventorydiff.NotPlanned
	// moveNote, when set, says what the engine does with an object the
	// change moves from one target to another of the same cluster (key,
	// the targets' names); it is said on both.
	moveNote func(key, from, to string) string
	// claimed are directories the mode's objects that are no target
	// sync (an Application of another revision): no loose overlays.
	claimed []string
	built   int // target sides built, for the plan's work
}

// isEngineTarget says whether name is the target of an engine the plan
// planned.
func (p *planner) isEngineTarget(name string) bool {
	return slices.ContainsFunc(p.modes, func(m *engineMode) bool { return m.has(name) })
}

func newEngineMode(label string) *engineMode {
	return &engineMode{label: label, targets: [2]map[string]*engineTarget{{}, {}}}
}

// add adds t to side i.
func (m *engineMode) add(i int, t *engineTarget) {
	m.targets[i][t.name] = t
	if !t.deferred {
		m.built++
	}
}

// target returns the target named name, head's first, or nil.
func (m *engineMode) target(name string) *engineTarget {
	if m == nil {
		return nil
	}
	if t := m.targets[1][name]; t != nil {
		return t
	}
	return m.targets[0][name]
}

// has says whether name is a target of the mode.
func (m *engineMode) has(name string) bool { return m.target(name) != nil }

// names are the targets' names and directories, for the filters.
func (m *engineMode) names() []string {
	var out []string
	for _, ts := range m.targets {
		for _, t := range ts {
			out = append(out, t.name)
			if t.path != "" {
				out = append(out, t.path)
			}
		}
	}
	return out
}

// dropRead drops the discovered overlays the targets' builds read: those
// are planned as the engine applies them, in its targets, not again as
// loose overlays. A directory a target reads on either side is dropped
// from both: a pull request adding the first Application (or Flux
// Kustomization) over an existing directory adds that target; it does
// not remove the directory as a loose overlay, which would read as a
// prune of everything in it
// (TestAdoptingArgoCDOverAnOverlayPrunesNothing).
func (m *engineMode) dropRead(sides [2]*side) {
	seen := map[*closure.Closure]bool{} // the sides share most
	for i := range sides {
		for _, t := range m.targets[i] {
			if t.closure == nil || seen[t.closure] {
				continue
			}
			seen[t.closure] = true
			for _, q := range t.closure.Paths {
				for _, sd := range sides {
					delete(sd.overlays, q)
				}
			}
		}
	}
	for _, q := range m.claimed {
		for _, sd := range sides {
			delete(sd.overlays, q)
		}
	}
}

// addClosures makes the targets' closures count as read, for the changed
// files nothing reads.
func (m *engineMode) addClosures(cs [2]map[string]*closure.Closure) {
	for i, ts := range m.targets {
		for _, t := range ts {
			if t.closure != nil && cs[i] != nil {
				cs[i][t.name] = t.closure
			}
		}
	}
}

// selected says whether the plan's filter selects t (nil selects
// nothing): by the directory it builds or by its name.
func (p *planner) selected(t *engineTarget) bool {
	if t == nil {
		return false
	}
	if t.path == "" {
		return p.opts.Filter.Select(t.name)
	}
	return p.opts.Filter.Select(t.path, t.name)
}

// compare compares each target's sides; one left unbuilt on both is
// unchanged, as an overlay the change cannot affect.
func (m *engineMode) compare(ctx context.Context, p *planner) {
	names := map[string]bool{}
	for _, ts := range m.targets {
		for n := range ts {
			names[n] = true
		}
	}
	p.mu.Lock()
	p.overlays = slices.Grow(p.overlays, len(names))
	p.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(names)) {
		b, h := m.targets[0][name], m.targets[1][name]
		if !p.selected(b) && !p.selected(h) {
			continue // --overlays/--exclude leave it out
		}
		p.stats.Overlays++
		if b != nil && h != nil && b.deferred && h.deferred {
			p.stats.Skipped++
			p.compare(name, pair{present: [2]bool{true, true}, sides: [2]inventorydiff.Side{unrendered(), unrendered()}})
			continue
		}
		var pr pair
		for i, t := range []*engineTarget{b, h} {
			if t != nil {
				pr.present[i] = true
				pr.sides[i] = p.safely(nil, name, t.side)
			}
		}
		if m.compared != nil {
			m.compared(ctx, name, &pr)
		}
		p.compare(name, pr)
	}
}

// decorate names each target's file, and adds to its notes what kplan
// could not render or know offline and what the engine will not do on
// its own.
func (m *engineMode) decorate(p *planner) {
	// After the overlays' builds, which set the count.
	p.stats.Rendered += m.built
	for i := range p.overlays {
		o := &p.overlays[i]
		t := m.target(o.Path)
		if t == nil {
			continue
		}
		// The title is the identity (o.Path); its file is where it is
		// declared.
		if t.file != "" {
			o.File = t.file
		}
		// The label tells the reports these are not kustomize's warnings.
		for _, n := range t.notes {
			o.Notes = append(o.Notes, m.label+": "+n)
		}
		if t.changeNotes != nil && o.Status != inventorydiff.Unchanged {
			deleted := m.targets[1][o.Path] == nil
			for _, n := range t.changeNotes(len(o.Pruned) > 0, deleted) {
				o.Notes = append(o.Notes, m.label+": "+n)
			}
		}
		if m.decorated != nil {
			m.decorated(o)
		}
	}
	if m.moveNote != nil {
		m.noteMoves(p)
	}
}

// noteMoves says moveNote on both targets of each object the change
// prunes from one target and adds to another applied to the same
// cluster.
func (m *engineMode) noteMoves(p *planner) {
	type at struct{ cluster, key string }
	pruned := map[at][]int{}
	for i, o := range p.overlays {
		if t := m.targets[0][o.Path]; t != nil {
			for _, k := range o.Pruned {
				pruned[at{t.cluster, k}] = append(pruned[at{t.cluster, k}], i)
			}
		}
	}
	if len(pruned) == 0 {
		return
	}
	for i := range p.overlays {
		t := m.targets[1][p.overlays[i].Path]
		if t == nil {
			continue
		}
		for _, k := range p.overlays[i].Added {
			for _, j := range pruned[at{t.cluster, k}] {
				if j == i {
					continue
				}
				n := m.label + ": " + m.moveNote(k, p.overlays[j].Path, p.overlays[i].Path)
				p.overlays[i].Notes = append(p.overlays[i].Notes, n)
				p.overlays[j].Notes = append(p.overlays[j].Notes, n)
			}
		}
	}
}

// clusters says which cluster each head target is applied to.
func (m *engineMode) clusters(c *overlap.Clusters) {
	for _, t := range m.targets[1] {
		c.Environments[t.name] = []string{t.cluster}
	}
}

// keysForDuplicates renders on head, for the duplicate-object rule, the
// targets the change left unbuilt when an overlay adds objects, as the
// planner renders unaffected overlays for it: the changed-only plan
// finds the duplicates the full plan finds.
func (m *engineMode) keysForDuplicates(ctx context.Context, p *planner) {
	if m.renderDeferred == nil || p.facts.NoDuplicates || len(overlap.Adding(p.overlays)) == 0 {
		return
	}
	var todo []string
	for n, t := range m.targets[1] {
		if t.deferred {
			todo = append(todo, n)
		}
	}
	slices.Sort(todo)
	keys := p.headKeysMap()
	for n, sd := range m.renderDeferred(ctx, todo) {
		if sd.Err == nil && sd.Inventory != nil {
			keys[n] = sd.Inventory.Keys
		}
	}
}

// engineSide is the render of a target another engine applies as the
// planner compares it: that engine keeps its own inventory, so no
// ResourceGroup file is read, and namespaced objects without a namespace
// land in ns.
func engineSide(what, path string, objs []*yaml.RNode, ns string, err error) inventorydiff.Side {
	return engineSideScoped(what, path, objs, ns, err, render.NamespaceScoped)
}

// engineSideScoped is engineSide with the kinds' scopes from scope.
func engineSideScoped(what, path string, objs []*yaml.RNode, ns string, err error, scope inventory.Scope) inventorydiff.Side {
	if err != nil {
		return inventorydiff.Side{Err: err}
	}
	files := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	inv, err := declared.PlannedScoped(render.Result{Path: path, Objects: objs}, files, ns, scope)
	if err != nil {
		return inventorydiff.Side{Err: fmt.Errorf("%s: %w", what, err)}
	}
	return inventorydiff.Side{Inventory: inv}
}
