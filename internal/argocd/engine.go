package argocd

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Options control an Engine.
type Options struct {
	// Render are the render bounds; kustomize sources build with them
	// as Argo CD's default build options do (no helm, load restrictor as
	// set).
	Render render.Options
	// Repos are the repoURLs that are this repository.
	Repos Repos
	// Revisions are the targetRevisions that track the branch the plan
	// merges into, besides "" and HEAD; an Application tracking another
	// revision is listed, not planned.
	Revisions []string
	// Memo shares kustomization parses between closures.
	Memo *closure.Memo
	// Clusters are the clusters Argo CD deploys to, for ApplicationSets'
	// clusters generators, declared in ClustersFile (.kplan.yaml); with
	// no ClustersFile those generators are not evaluated.
	Clusters     []Cluster
	ClustersFile string
	// NewGitFileGlobbing matches git files generators' paths as Argo CD
	// does with applicationset.enableNewGitFileGlobbing; off, as git
	// ls-files does (its default).
	NewGitFileGlobbing bool
	// KustomizeEnableHelm is argocd-cm's kustomize.buildOptions
	// --enable-helm: kustomize sources inflate their helmCharts.
	KustomizeEnableHelm bool
	// Kubernetes says what an Application's destination cluster runs,
	// for its charts (Helm sources, kustomize helmCharts), as Argo CD's
	// controller passes the cluster's version and API versions to the
	// repo server; nil is kubeversion's default for every cluster.
	Kubernetes func(Destination) kubeversion.Capabilities
}

// Engine renders the Argo CD Applications of snapshots; safe for
// concurrent use.
type Engine struct {
	k      *render.Kustomizer
	opts   Options
	charts *charts.Fetcher
	// kusts are the Kustomizers of kustomize sources inflating charts,
	// one per Kubernetes (kustFor).
	kusts  sync.Map
	pulled sync.Map // pulledMayOutput's answers
	// madeApps are the Applications ApplicationSets made, by madeKey.
	madeApps sync.Map
	// parsedFiles are the files' parses (*fileRec), by fileKey: the
	// sides of a plan share the parse of a file alike on both.
	parsedFiles sync.Map
	// builders compute the closures of a snapshot's Applications, one
	// per snapshot (a *sideBuilder): Applications sharing a base share
	// its reading.
	builders sync.Map
	// states are the snapshots' sideStates (*stateOnce).
	states sync.Map
	// index is what plans before this one kept (Use), prior the commit
	// of it the base derives from (Prior); nil: none.
	index atomic.Pointer[Index]
	prior atomic.Pointer[origin]
	// tracked are tracks's answers, by targetRevision: the index
	// records those its decisions depend on.
	tracked sync.Map
}

// sideBuilder is the closure builder of one snapshot, which is not safe
// for concurrent use.
type sideBuilder struct {
	mu sync.Mutex
	b  *closure.Builder
}

// New returns an Engine for opts.
func New(opts Options) *Engine {
	ro := opts.Render
	ro.EnableHelm = opts.KustomizeEnableHelm // Argo CD's default: off
	if opts.Memo == nil {
		opts.Memo = closure.NewMemo()
	}
	// Charts come through the plan's fetcher (Render.Charts: its network
	// policy, credentials and cache, shared with Flux HelmReleases and
	// kustomize helmCharts).
	ro.Charts = opts.Render.ChartFetcher()
	return &Engine{k: render.NewKustomizer(ro), opts: opts, charts: ro.Charts}
}

// Target is one Application's render.
type Target struct {
	*Application
	// Objects are what Argo CD syncs, namespaced ones without a namespace
	// going to Namespace.
	Objects []*yaml.RNode
	// Namespace is the destination namespace.
	Namespace string
	// NotRendered says what of the Application kplan did not render, and
	// why.
	NotRendered []string
	// Notes say what the render could not know offline.
	Notes []string
	// Closure is every repository path the render depends on.
	Closure *closure.Closure
	Err     error
	// Deferred: the change cannot affect it; it was not rendered.
	Deferred bool
	// may is what its closure's files say of whether it renders
	// Applications (mayOutput), once known.
	may may
	// twin: it stands for an Application the other side makes and this
	// one cannot (unknownTwins).
	twin bool
	// Parent is the target whose render outputs this Application
	// (app-of-apps); nil for one declared in git.
	Parent *Target
	// Kubernetes is what its charts were templated for; nil when it
	// templated none.
	Kubernetes *kubeversion.Capabilities

	name string
	own  []string // the paths its sources and declaration read, without its parent's
	// listed are the directories whose listing (the files below them)
	// its closure depends on, beyond its paths: a chart's, a directory
	// source's; "." when any file may count.
	listed []string
}

// Name is the target's identity in a plan: namespace/name of the
// Application, after its destination cluster when the sides sync to
// more than one.
func (t *Target) Name() string { return cmp.Or(t.name, t.ID()) }

// Result is every Application of a snapshot.
type Result struct {
	Targets []*Target // sorted by Name
	// Skipped are the Argo CD objects of the repository that are no
	// target, with why.
	Skipped []Named

	unexpanded map[string]error // by ID, the ApplicationSets not expanded
}

// Target returns the target named name, or nil.
func (r *Result) Target(name string) *Target {
	i, ok := slices.BinarySearchFunc(r.Targets, name, func(t *Target, n string) int { return strings.Compare(t.Name(), n) })
	if !ok {
		return nil
	}
	return r.Targets[i]
}

// Found reports whether s holds an Application with a source in this
// repository, or an ApplicationSet making one, searching only paths
// when not nil.
func (e *Engine) Found(ctx context.Context, s *snapshot.Snapshot, paths []string) (bool, error) {
	var apps []*Application
	if paths == nil {
		st, err := e.state(ctx, s, e.originOf(s))
		if err != nil {
			return false, err
		}
		apps = st.decl.Applications
		for _, x := range st.sets {
			apps = append(apps, x.apps...)
		}
	} else {
		d, err := discoverIn(ctx, s, paths, e)
		if err != nil {
			return false, err
		}
		apps = d.Applications
		for _, set := range d.Sets {
			made, _ := e.generate(ctx, s, set)
			apps = append(apps, made...)
		}
	}
	for _, a := range apps {
		if e.factsOf(a).renders {
			return true, nil
		}
	}
	return false, nil
}

// originOf is the index's commit s derives from (Prior), or nil.
func (e *Engine) originOf(s *snapshot.Snapshot) *origin {
	if o := e.prior.Load(); o != nil && o.rev == s.Rev {
		return o
	}
	return nil
}

// factsOf are what a's spec decides under the engine's settings: as the
// index recorded them, else from its spec.
func (e *Engine) factsOf(a *Application) *appFacts {
	if a.facts != nil {
		return a.facts
	}
	f := &appFacts{skip: e.skipOf(a)}
	for _, src := range a.Spec().AllSources() {
		f.renders = f.renders || e.renders(src)
	}
	return f
}

// maxDepth bounds how many levels of Applications rendering
// Applications (app-of-apps) are followed; real repositories have 2 or 3.
const maxDepth = 8

// Build renders every Application of s.
func (e *Engine) Build(ctx context.Context, s *snapshot.Snapshot) (*Result, error) {
	res, err := e.plan(ctx, []*snapshot.Snapshot{s}, nil)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Plan renders both sides of a change, leaving unrendered (Deferred)
// each Application written alike on both sides whose closure meets no
// changed path on either and that cannot render Applications; changed
// nil renders all.
func (e *Engine) Plan(ctx context.Context, base, head *snapshot.Snapshot, changed map[string]bool) ([2]*Result, error) {
	res, err := e.plan(ctx, []*snapshot.Snapshot{base, head}, changed)
	if err != nil {
		return [2]*Result{}, err
	}
	for i, r := range res {
		for _, t := range r.Targets {
			if o := res[1-i].Target(t.Name()); t.Deferred && (o == nil || !o.Deferred) {
				return [2]*Result{}, fmt.Errorf("kplan bug: Application %s deferred on one side only", t.Name())
			}
		}
	}
	return [2]*Result{res[0], res[1]}, nil
}

// plan renders the sides snaps level by level: the Applications in git
// first, then the Applications their renders output (app-of-apps),
// which are targets too.
func (e *Engine) plan(ctx context.Context, snaps []*snapshot.Snapshot, changed map[string]bool) ([]*Result, error) {
	lp := &levelPlan{changed: changed, res: make([]*Result, len(snaps)), answered: map[*closure.Closure]bool{}}
	if len(snaps) == 2 && changed != nil {
		// Not on a full plan, which discovers both sides and computes
		// every closure on each: it stays a check of the changed-only
		// plan.
		lp.reuse = newReuse(snapshot.Changed(snaps[0].Index, snaps[1].Index))
	}
	level := make([][]*Target, len(snaps))
	for i, s := range snaps {
		o := e.originOf(s)
		if i == 1 && lp.reuse != nil {
			// Head is base but for the paths the change touches.
			base, err := e.state(ctx, snaps[0], e.originOf(snaps[0]))
			if err != nil {
				return nil, err
			}
			o = &origin{files: base.files, sets: setsOf(base.sets), changed: lp.reuse.changed, reuse: lp.reuse}
		}
		r, err := e.side(ctx, s, o)
		if err != nil {
			return nil, err
		}
		lp.res[i], level[i] = r, r.Targets
	}
	if len(snaps) == 2 {
		lp.unknown = unknownTwins(lp.res)
	}
	for depth := 0; ; depth++ {
		name(lp.res...)
		for i, s := range snaps {
			e.deferUnreached(ctx, lp, i, s, level[i])
		}
		// Which to render is decided for every side before any renders
		// (rendering clears Deferred).
		todo := make([][]*Target, len(snaps))
		for i := range snaps {
			for _, t := range level[i] {
				if t.Deferred && len(snaps) == 2 {
					if o := lp.res[1-i].Target(t.Name()); o != nil && o.Deferred && o.SameObject(t.Application) {
						continue
					}
				}
				todo[i] = append(todo[i], t)
			}
		}
		for i, s := range snaps {
			e.renderAll(ctx, s, todo[i])
		}
		next, more := e.nextLevel(lp.res, level, depth)
		if !more {
			break
		}
		level = next
	}
	for t, twin := range lp.unknown {
		twin.Closure = t.Closure
	}
	name(lp.res...)
	if len(snaps) == 2 {
		for _, t := range lp.res[1].Targets {
			if n := t.UpdateNote(); n != "" {
				if b := lp.res[0].Target(t.Name()); b != nil && !b.SameObject(t.Application) {
					t.Notes = append(t.Notes, n)
				}
			}
		}
	}
	return lp.res, nil
}

// levelPlan is what plan carries from level to level.
type levelPlan struct {
	res     []*Result
	changed map[string]bool // nil: a full plan
	unknown map[*Target]*Target
	reuse   *reuse
	// answered says, by closure, whether its own files may output
	// Applications.
	answered map[*closure.Closure]bool
}

// deferUnreached gives side i's targets ts their closures (head taking
// base's where it can), and defers those the change cannot reach that
// cannot render Applications.
func (e *Engine) deferUnreached(ctx context.Context, lp *levelPlan, i int, s *snapshot.Snapshot, ts []*Target) {
	var candidates []*Target
	for _, t := range ts {
		if i == 1 {
			lp.reuse.closure(lp.res[0], t)
		}
		if t.Closure == nil {
			t.Closure = e.closure(ctx, s, t)
		}
		// One whose twin is unknown is planned on every run, as --full
		// plans it: the twin's side failed, whatever changed.
		if lp.changed != nil && lp.unknown[t] == nil && t.Closure.Bounded() && !t.Closure.Meets(lp.changed) {
			candidates = append(candidates, t)
		}
	}
	// A closure head took from base answers alike: the files its sources
	// read are base's; so does one taken from the index, which kept its
	// answer.
	var ask []*Target
	for _, t := range candidates {
		if _, ok := lp.answered[t.Closure]; !ok && t.may != mayAsk {
			lp.answered[t.Closure] = t.may == mayDoes
		}
		if _, ok := lp.answered[t.Closure]; !ok {
			ask = append(ask, t)
		}
	}
	outputs := e.mayOutput(ctx, s, ask)
	for _, t := range candidates {
		may, ok := lp.answered[t.Closure]
		if !ok {
			may = outputs[t]
			lp.answered[t.Closure] = may
		}
		t.Deferred = !may
	}
}

// nextLevel are the Applications the targets of level render that are
// not targets yet, added to res (app-of-apps), and whether there are
// any; past maxDepth they are noted, not planned.
func (e *Engine) nextLevel(res []*Result, level [][]*Target, depth int) ([][]*Target, bool) {
	next := make([][]*Target, len(res))
	more := false
	for i, r := range res {
		var have map[appKey]bool // made once a target renders Applications
		for _, t := range level[i] {
			if !slices.ContainsFunc(t.Objects, func(o *yaml.RNode) bool { return IsApplication(o.GetApiVersion(), o.GetKind()) }) {
				continue
			}
			if have == nil {
				have = make(map[appKey]bool, len(r.Targets))
				for _, t := range r.Targets {
					have[keyOf(t.Application)] = true
				}
			}
			for _, c := range e.children(t, r, have) {
				if depth == maxDepth {
					t.Notes = append(t.Notes, fmt.Sprintf("Application %s is not planned: more than %d levels of Applications rendering Applications", c.ID(), maxDepth))
					continue
				}
				r.Targets = append(r.Targets, c)
				next[i] = append(next[i], c)
				more = true
			}
		}
	}
	return next, more
}

// unknownTwins adds to each side, for every Application an ApplicationSet
// makes on the other side but cannot be expanded on this one, a target
// of its name failing with why: the merge may well keep, change or make
// it, so it is not planned as removed or added (pruning everything it
// syncs). It returns the twins by the target they stand beside, which
// are not rendered.
func unknownTwins(res []*Result) map[*Target]*Target {
	sideNames := [2]string{"base", "head"}
	out := map[*Target]*Target{}
	for i, r := range res {
		if len(r.unexpanded) == 0 {
			continue
		}
		have := make(map[appKey]bool, len(r.Targets))
		for _, t := range r.Targets {
			have[keyOf(t.Application)] = true
		}
		for _, t := range res[1-i].Targets {
			err := r.unexpanded[t.Set]
			key := keyOf(t.Application)
			if t.Set == "" || err == nil || have[key] {
				continue
			}
			have[key] = true
			twin := &Target{Application: t.Application, Namespace: t.Namespace, twin: true,
				Err: fmt.Errorf("Argo CD Application %s, made on the %s side, is not known on this one: %w", t.ID(), sideNames[1-i], err)}
			r.Targets = append(r.Targets, twin)
			out[t] = twin
		}
	}
	return out
}

// children are the Applications t's render outputs that are not targets
// yet (have, by ID and cluster, is updated): app-of-apps. A rendered
// Application without a namespace is created in t's destination
// namespace.
func (e *Engine) children(t *Target, r *Result, have map[appKey]bool) []*Target {
	var out []*Target
	for _, o := range t.Objects {
		if !IsApplication(o.GetApiVersion(), o.GetKind()) {
			continue
		}
		m, err := objectOf(o)
		if err != nil {
			continue
		}
		a, err := Parse(m, t.File)
		if err != nil {
			t.Notes = append(t.Notes, fmt.Sprintf("the Application %s it renders is not planned: %v", o.GetName(), err))
			continue
		}
		if o.GetNamespace() == "" {
			a.Namespace = cmp.Or(t.Namespace, DefaultNamespace)
			a.named()
		}
		key := keyOf(a)
		if have[key] {
			continue // declared in git too: planned from its file
		}
		have[key] = true
		if why := e.skipOf(a); why != "" {
			r.Skipped = append(r.Skipped, Named{ID: a.ID(), File: t.File, Reason: why + " (rendered by Application " + t.ID() + ")", Paths: e.ownPaths(a)})
			continue
		}
		out = append(out, &Target{Application: a, Namespace: a.Destination.Namespace, Parent: t})
	}
	return out
}

// mayOutput says which of ts may output an Application: a file its own
// sources read names argoproj.io/v (its own declaration only when a
// source reads it). Such a target is always rendered, so that the
// Applications it renders are known on both sides. The files of all are
// searched in one batch.
func (e *Engine) mayOutput(ctx context.Context, s *snapshot.Snapshot, ts []*Target) map[*Target]bool {
	out := map[*Target]bool{}
	if len(ts) == 0 {
		return out
	}
	e.mayFiles(ctx, s, ts)
	for _, t := range ts {
		out[t] = t.may == mayDoes
	}
	// A pulled chart may render Applications too: its archive says.
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	pulled := map[*Target]bool{}
	for _, t := range ts {
		if out[t] {
			continue
		}
		for _, src := range t.Spec().AllSources() {
			if src.Chart == "" {
				continue
			}
			g.Go(func() error {
				if e.pulledMayOutput(ctx, src) {
					mu.Lock()
					pulled[t] = true
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	for t := range pulled {
		out[t] = true
	}
	return out
}

// mayFiles sets what the files ts's own sources read say of whether
// they render Applications (Target.may): a file naming argoproj.io/v
// (its own declaration only when a source reads it) says it may; none
// says it may not, unless a source pulls a chart (whose archive
// mayOutput reads). A failed search says nothing, and ts may.
func (e *Engine) mayFiles(ctx context.Context, s *snapshot.Snapshot, ts []*Target) {
	files := map[*Target][]string{}
	all := map[string]bool{}
	for _, t := range ts {
		for _, p := range t.own {
			if _, ok := s.Index.ID(p); ok && (p != t.File || e.readsOwnFile(t)) {
				files[t] = append(files[t], p)
				all[p] = true
			}
		}
	}
	// The apiVersion's group/version, not the group alone: Argo CD's
	// annotations (argocd.argoproj.io/hook) name it on any object. A
	// file naming it names the group, which discovery searched its YAML
	// files for: the second search reads the few that do.
	has, err := s.Containing(ctx, sortedKeys(all), Group)
	if err == nil {
		has, err = s.Containing(ctx, has, Group+"/v")
	}
	named := map[string]bool{}
	for _, p := range has {
		named[p] = true
	}
	for _, t := range ts {
		switch {
		case err != nil || slices.ContainsFunc(files[t], func(p string) bool { return named[p] }):
			t.may = mayDoes
		case slices.ContainsFunc(t.Spec().AllSources(), func(src Source) bool { return src.Chart != "" }):
			t.may = mayAsk
		default:
			t.may = mayNot
		}
	}
}

// pulledMayOutput reports whether the chart src pulls names
// argoproj.io/v in any file (it may render Applications), or cannot be
// pulled for a reason a render would say (a host that does not answer, a
// version no release matches). A host the network policy refuses is
// refused alike on every run and both sides, so the Application fails
// when the change reaches it, as a remote kustomize base does, and is
// not rendered (to fail) on every plan. The answer is kept for the
// engine's plan: both sides ask alike.
func (e *Engine) pulledMayOutput(ctx context.Context, src Source) bool {
	key := src.RepoURL + "\x00" + src.Chart + "\x00" + src.TargetRevision
	if v, ok := e.pulled.Load(key); ok {
		return v.(bool)
	}
	may := true
	got, err := e.charts.Pull(ctx, charts.Ref{Repo: src.RepoURL, Name: src.Chart, Version: src.TargetRevision})
	if charts.Refused(err) {
		may = false
	}
	if err == nil {
		if zr, err := gzip.NewReader(bytes.NewReader(got.Archive)); err == nil {
			data, err := io.ReadAll(io.LimitReader(zr, e.charts.Limit()))
			may = err != nil || bytes.Contains(data, []byte(Group+"/v"))
		}
	}
	e.pulled.Store(key, may)
	return may
}

// readsOwnFile reports whether a source of t reads the file declaring
// it (an app-of-apps root whose path holds its own declaration).
func (e *Engine) readsOwnFile(t *Target) bool {
	for _, src := range t.Spec().AllSources() {
		if src.Ref != "" && src.Path == "" {
			continue // values only
		}
		if dir := cleanPath(src.Path); e.opts.Repos.Has(src.RepoURL) && (dir == "." || strings.HasPrefix(t.File, dir+"/")) {
			return true
		}
	}
	return false
}

// side finds the targets of s: its Applications with a source in this
// repository that track the plan's branch.
func (e *Engine) side(ctx context.Context, s *snapshot.Snapshot, o *origin) (*Result, error) {
	st, err := e.state(ctx, s, o)
	if err != nil {
		return nil, err
	}
	d := st.decl
	r := &Result{Skipped: slices.Clone(d.Invalid), unexpanded: map[string]error{}}
	apps := d.Applications
	for _, x := range st.sets {
		set := x.set
		if x.err != nil {
			r.Skipped = append(r.Skipped, Named{ID: set.ID(), File: set.File, Reason: x.err.Error()})
			r.unexpanded[set.ID()] = fmt.Errorf("ApplicationSet %s (%s): %w", set.ID(), set.File, x.err)
			continue
		}
		apps = append(apps, x.apps...)
	}
	seen := make(map[appKey]string, len(apps))
	targets := make([]Target, 0, len(apps)) // one allocation for all
	for _, a := range apps {
		if why := e.factsOf(a).skip; why != "" {
			r.Skipped = append(r.Skipped, Named{ID: a.ID(), File: a.File, Reason: why, Paths: e.ownPaths(a)})
			continue
		}
		k := keyOf(a)
		if f, dup := seen[k]; dup {
			r.Skipped = append(r.Skipped, Named{ID: a.ID(), File: a.File, Reason: "declared again (first in " + f + "): Argo CD keeps one Application of a name"})
			continue
		}
		seen[k] = a.File
		targets = append(targets, Target{Application: a, Namespace: a.Destination.Namespace})
		t := &targets[len(targets)-1]
		if o != nil && o.closures != nil {
			// The closure computed on the index's commit, when nothing it
			// read differs here.
			if c := o.closures[a]; c != nil && o.reuse.keeps(c.c, c.listed) {
				t.Closure, t.own, t.listed, t.may = c.c, c.own, c.listed, c.may
			}
		}
		r.Targets = append(r.Targets, t)
	}
	slices.SortFunc(r.Skipped, func(a, b Named) int { return strings.Compare(a.ID+a.File, b.ID+b.File) })
	return r, nil
}

// appKey names an Application in Argo CD: its ID and destination
// cluster.
type appKey struct{ id, cluster string }

func keyOf(a *Application) appKey { return appKey{a.ID(), a.Destination.Cluster()} }

// skipOf says why a is not a target, or "".
func (e *Engine) skipOf(a *Application) string {
	ours := false
	for _, src := range a.Spec().AllSources() {
		ours = ours || e.renders(src)
		if src.Chart == "" && e.opts.Repos.Has(src.RepoURL) {
			if !e.tracks(src.TargetRevision) {
				return fmt.Sprintf("tracks another revision (targetRevision %s): merging this branch does not change what Argo CD syncs", src.TargetRevision)
			}
		}
	}
	if !ours {
		return "no source is this repository or a Helm chart (set argocdRepoURLs in .kplan.yaml when a repoURL names it another way)"
	}
	return ""
}

// ownPaths are the directories of this repository a's sources read.
func (e *Engine) ownPaths(a *Application) []string {
	var out []string
	for _, src := range a.Spec().AllSources() {
		if dir, ok := e.ownDir(src); ok {
			out = append(out, dir)
		}
	}
	return out
}

// renders reports whether kplan renders src: a source of this
// repository, or a chart from a Helm repository or OCI registry (its
// targetRevision is the chart's version, which the Application's file
// in this repository sets).
func (e *Engine) renders(src Source) bool {
	return src.Chart != "" || e.opts.Repos.Has(src.RepoURL)
}

// tracks reports whether targetRevision follows the plan's branch. The
// answers are kept (tracked): the index records them with what it
// decided by them.
func (e *Engine) tracks(rev string) bool {
	t := rev == "" || rev == "HEAD" || slices.Contains(e.opts.Revisions, rev)
	e.tracked.Store(rev, t)
	return t
}

// name names the targets of both sides alike: after their destination
// cluster when the sides sync to more than one.
func name(results ...*Result) {
	clusters := map[string]bool{}
	for _, r := range results {
		for _, t := range r.Targets {
			clusters[t.Destination.Cluster()] = true
		}
	}
	for _, r := range results {
		for _, t := range r.Targets {
			t.name = t.ID()
			if c := t.Destination.Cluster(); len(clusters) > 1 && c != "" {
				t.name = c + ": " + t.ID()
			}
		}
		slices.SortFunc(r.Targets, func(a, b *Target) int { return strings.Compare(a.Name(), b.Name()) })
	}
}

// Render renders ts (targets of s a plan left Deferred), for the
// findings across targets.
func (e *Engine) Render(ctx context.Context, s *snapshot.Snapshot, ts []*Target) {
	e.renderAll(ctx, s, ts)
}

// renderAll renders ts concurrently, each failing alone.
func (e *Engine) renderAll(ctx context.Context, s *snapshot.Snapshot, ts []*Target) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, t := range ts {
		g.Go(func() error {
			t.Deferred = false
			if t.Closure == nil {
				t.Closure = e.closure(ctx, s, t)
			}
			t.Err = crash.Catch(func() error { return e.render(ctx, s, t) })
			if c := crash.As(t.Err); c != nil {
				slog.Error("kplan bug: panic rendering an Argo CD Application; it fails, the rest is planned", "id", t.ID(), "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
			}
			if t.Err != nil {
				t.Objects = nil
				t.Err = fmt.Errorf("Argo CD Application %s (%s): %w", t.ID(), t.File, t.Err)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// kind is how Argo CD renders a source.
type kind int

const (
	kindDirectory kind = iota
	kindKustomize
	kindHelm
	kindRemoteChart
	kindPlugin
)

// kindOf is the source's type as Argo CD picks it: the settings it sets,
// else what its path's top holds (a kustomization wins over Chart.yaml),
// else a directory.
func kindOf(s *snapshot.Snapshot, src Source) kind {
	switch {
	case src.Chart != "":
		return kindRemoteChart
	case src.Plugin != nil:
		return kindPlugin
	case src.Kustomize != nil:
		return kindKustomize
	case src.Helm != nil:
		return kindHelm
	case src.Directory != nil:
		return kindDirectory
	}
	dir := cleanPath(src.Path)
	if kustomizationFile(s, dir) != "" {
		return kindKustomize
	}
	if _, ok := s.Index.ID(join(dir, "Chart.yaml")); ok {
		return kindHelm
	}
	return kindDirectory
}

// kustomizationFile is the kustomization file of dir, or "".
func kustomizationFile(s *snapshot.Snapshot, dir string) string {
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		if _, ok := s.Index.ID(join(dir, n)); ok {
			return join(dir, n)
		}
	}
	return ""
}

// buildEnv is the build environment the repo server expands in a
// source's settings (newEnv, reposerver/repository/repository.go:1857-
// 1871 at 37ee0097cf): the Application's instance name, destination
// namespace, project and source. The revision variables are the commit
// Argo CD syncs, which a plan made before the merge cannot know: they
// stay as written (revisionNote says so on the target).
func buildEnv(t *Target, src Source) map[string]string {
	env := map[string]string{
		"ARGOCD_APP_NAME": instanceName(t.Application), "ARGOCD_APP_NAMESPACE": t.Namespace,
		"ARGOCD_APP_PROJECT_NAME": t.Spec().Project,
		"ARGOCD_APP_SOURCE_PATH":  src.Path, "ARGOCD_APP_SOURCE_REPO_URL": src.RepoURL, "ARGOCD_APP_SOURCE_TARGET_REVISION": src.TargetRevision,
	}
	for _, v := range revisionVars {
		env[v] = "$" + v
	}
	return env
}

// revisionVars are the build environment's variables set to the synced
// commit.
var revisionVars = []string{"ARGOCD_APP_REVISION", "ARGOCD_APP_REVISION_SHORT", "ARGOCD_APP_REVISION_SHORT_8"}

// revisionNote says, for a source whose settings name a revision
// variable, that the plan shows it as written; "" otherwise.
func revisionNote(what string, src Source) string {
	b, _ := json.Marshal(src)
	if !bytes.Contains(b, []byte("ARGOCD_APP_REVISION")) {
		return ""
	}
	return what + ": $ARGOCD_APP_REVISION (or _SHORT, _SHORT_8) is the commit Argo CD syncs, known only after the merge: the plan shows the variable as written"
}

// render renders t's sources into its objects.
func (e *Engine) render(ctx context.Context, s *snapshot.Snapshot, t *Target) error {
	if t.Closure.Err != nil {
		return t.Closure.Err
	}
	if err := t.SpecErr(); err != nil {
		return err
	}
	if err := s.Load(ctx, t.Closure.Paths); err != nil {
		return err
	}
	refs := map[string]Source{}
	for _, src := range t.Spec().AllSources() {
		if src.Ref != "" {
			refs[src.Ref] = src
		}
	}
	srcs, err := e.sources(ctx, s, t)
	if err != nil {
		return err
	}
	var objs []*yaml.RNode
	for i, src := range srcs {
		what := fmt.Sprintf("source %s", cmp.Or(src.Path, src.Chart, src.RepoURL))
		if len(srcs) > 1 {
			what = fmt.Sprintf("source %d (%s)", i+1, cmp.Or(src.Path, src.Chart, src.RepoURL))
		}
		out, err := e.renderSource(ctx, s, t, src, refs, what)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		objs = append(objs, out...)
	}
	t.Objects, err = synced(t, objs)
	return err
}

// renderSource renders one source of t (what names it in notes and
// errors): nothing for another repository's, a values-only one or a
// plugin's, each said.
func (e *Engine) renderSource(ctx context.Context, s *snapshot.Snapshot, t *Target, src Source, refs map[string]Source, what string) ([]*yaml.RNode, error) {
	if !e.renders(src) {
		if src.Ref == "" || src.Path != "" {
			t.NotRendered = append(t.NotRendered, fmt.Sprintf("%s: %s is another repository; kplan renders this repository's sources only", what, src.RepoURL))
		}
		return nil, nil
	}
	if src.Ref != "" && src.Path == "" && src.Chart == "" {
		return nil, nil // a values-only source for $ref value files
	}
	env := buildEnv(t, src)
	if n := revisionNote(what, src); n != "" {
		t.Notes = append(t.Notes, n)
	}
	switch kindOf(s, src) {
	case kindPlugin:
		t.NotRendered = append(t.NotRendered, what+": a config management plugin source is not rendered (plugins run programs in Argo CD's repo server)")
		return nil, nil
	case kindKustomize:
		return e.kustomize(ctx, s, t, src, env)
	case kindHelm, kindRemoteChart:
		return e.helm(ctx, s, t, src, refs, env)
	}
	out, skipped, marked, err := directory(ctx, s, src)
	for _, f := range skipped {
		t.NotRendered = append(t.NotRendered, fmt.Sprintf("%s: %s is jsonnet, which kplan does not evaluate", what, f))
	}
	for _, f := range marked {
		t.Notes = append(t.Notes, fmt.Sprintf("%s: %s holds %s: Argo CD does not read it, nor does the plan", what, f, skipFileRenderingMarker))
	}
	return out, err
}

// synced are the objects of objs Argo CD syncs as t's: hooks and objects
// created anew at each sync are said in t's notes instead; an object
// without apiVersion, kind or name fails t, as it fails the sync.
func synced(t *Target, objs []*yaml.RNode) ([]*yaml.RNode, error) {
	kept := objs[:0]
	for _, o := range objs {
		generated := ""
		if g, err := o.Pipe(yaml.Lookup("metadata", "generateName")); err == nil && g != nil {
			generated = g.YNode().Value
		}
		if why := hookOf(o); why != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("%s %s is not planned as an object: %s", o.GetKind(), cmp.Or(o.GetName(), generated+"*"), why))
			continue
		}
		if why := excluded(o); why != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("%s %s is not planned as an object: %s", o.GetKind(), cmp.Or(o.GetName(), generated+"*"), why))
			continue
		}
		if o.GetName() == "" && o.GetKind() != "" && generated != "" {
			// An object Argo CD creates anew at each sync under a
			// generated name: no object of the plan.
			t.Notes = append(t.Notes, fmt.Sprintf("%s %s* is created anew at each sync (metadata.generateName); it is not planned as an object", o.GetKind(), generated))
			continue
		}
		if o.GetName() == "" || o.GetKind() == "" || o.GetApiVersion() == "" {
			return nil, fmt.Errorf("an object without apiVersion, kind or name (Argo CD fails the sync)")
		}
		kept = append(kept, o)
	}
	return kept, nil
}

// kustomize builds a kustomize source with the Application's settings
// written into its kustomization; with helm on, its charts see the
// destination cluster's Kubernetes (kustFor).
func (e *Engine) kustomize(ctx context.Context, s *snapshot.Snapshot, t *Target, src Source, env map[string]string) ([]*yaml.RNode, error) {
	dir := cleanPath(src.Path)
	var fsys filesys.FileSystem = s.FS
	if k := src.Kustomize; k != nil {
		file := kustomizationFile(s, dir)
		if file == "" {
			return nil, fmt.Errorf("%s has no kustomization file for the kustomize: settings", dir)
		}
		data, err := s.ReadFile(ctx, file)
		if err != nil {
			return nil, err
		}
		exists := func(c string) bool {
			_, ok := s.Index.ID(join(dir, c))
			return ok || s.Index.IsDir(join(dir, c))
		}
		data, err = edit(data, file, k, exists, env)
		if err != nil {
			return nil, err
		}
		if fsys, err = snapshot.WithFile(fsys, file, data); err != nil {
			return nil, err
		}
	}
	return e.kustFor(t, src).RenderContext(ctx, fsys, dir, false)
}

// kubernetes is what t's destination cluster runs.
func (e *Engine) kubernetes(t *Target) kubeversion.Capabilities {
	if e.opts.Kubernetes == nil {
		return kubeversion.Defaults()
	}
	return e.opts.Kubernetes(t.Destination)
}

// kustFor is the Kustomizer building t's kustomize source src: with
// argocd-cm's --enable-helm, one whose charts see the destination
// cluster's Kubernetes, the source's kustomize.kubeVersion and
// apiVersions over it (Argo CD v3.5.1's GetKubeVersionOrDefault and
// GetAPIVersionsOrDefault, passed as kustomize build --helm-kube-version
// and --helm-api-versions: util/kustomize/kustomize.go); t then says so.
func (e *Engine) kustFor(t *Target, src Source) *render.Kustomizer {
	if !e.opts.KustomizeEnableHelm {
		return e.k
	}
	caps := e.kubernetes(t)
	if k := src.Kustomize; k != nil {
		if k.KubeVersion != "" {
			caps.Version, caps.From = k.KubeVersion, "the Application's kustomize.kubeVersion"
			if v, err := kubeversion.Parse(k.KubeVersion); err == nil {
				caps.Version = v
			}
		}
		if len(k.APIVersions) > 0 {
			caps.APIVersions, caps.From = k.APIVersions, "the Application's kustomize.apiVersions"
		}
	}
	if t.Closure != nil && t.Closure.Helm {
		t.Kubernetes = &caps
	}
	if v, ok := e.kusts.Load(caps.Key()); ok {
		return v.(*render.Kustomizer)
	}
	ro := e.opts.Render.WithKubernetes(caps)
	ro.EnableHelm = true
	v, _ := e.kusts.LoadOrStore(caps.Key(), render.NewKustomizer(ro))
	return v.(*render.Kustomizer)
}

// closure is what t's render reads: each source of this repository (a
// kustomize build's closure with the Application's components and
// patch files, a chart's or directory's tree, value files), the file
// declaring it and the directories above them.
func (e *Engine) closure(ctx context.Context, s *snapshot.Snapshot, t *Target) *closure.Closure {
	v, _ := e.builders.LoadOrStore(s, &sideBuilder{})
	sb := v.(*sideBuilder)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.b == nil {
		sb.b = closure.New(closure.SnapshotSource(ctx, s), closure.Options{Memo: e.opts.Memo, EnableHelm: e.opts.KustomizeEnableHelm})
	}
	b := sb.b
	t.listed, t.may = nil, mayAsk
	u := closure.NewUnion(t.ID())
	if err := t.SpecErr(); err != nil {
		// Rendered, to fail with it.
		u.Path(t.File)
		u.Unbound(err.Error())
		t.own = u.Paths()
		c := u.Closure()
		c.Err = err
		return c
	}
	u.Path(t.File)
	for _, p := range t.Inputs {
		u.Path(p)
	}
	refs := map[string]Source{}
	for _, src := range t.Spec().AllSources() {
		if src.Ref != "" {
			refs[src.Ref] = src
		}
		if dir, ok := e.ownDir(src); ok {
			// The repo server's override files, there or not.
			for _, f := range overrideFiles(t.Application, dir) {
				u.Path(f)
			}
		}
	}
	srcs, err := e.sources(ctx, s, t)
	if err != nil {
		u.Unbound(err.Error())
		t.own = u.Paths()
		c := u.Closure()
		c.Err = err
		return c
	}
	for _, src := range srcs {
		e.sourceClosure(ctx, s, b, u, t, src, refs)
	}
	t.own = u.Paths()
	if t.Parent != nil && t.Parent.Closure != nil {
		// Its spec is what its parent's render made of these.
		for _, p := range t.Parent.Closure.Paths {
			u.Path(p)
		}
		if !t.Parent.Closure.Bounded() {
			u.Unbound("its parent Application's render is unbounded")
		}
	}
	return u.Closure()
}

// sourceClosure adds to u what one source of t reads of the repository,
// by the kind of source it is; refs are t's sources by ref name.
func (e *Engine) sourceClosure(ctx context.Context, s *snapshot.Snapshot, b *closure.Builder, u *closure.Union, t *Target, src Source, refs map[string]Source) {
	if src.Chart != "" {
		// A pulled chart: its $ref value files and file parameters are
		// the repository's; the chart's version is the Application's
		// file.
		e.valueFiles(u, t, src, "", refs)
		return
	}
	dir, ok := e.ownDir(src)
	if !ok {
		return
	}
	u.Path(dir)
	switch kindOf(s, src) {
	case kindKustomize:
		// Which kind a source is depends on the files at its top.
		u.Path(join(dir, "Chart.yaml"))
		u.Add(b.Overlay(dir))
		if e.opts.KustomizeEnableHelm {
			// Its helmCharts' directories are listed, wherever they are.
			t.listed = append(t.listed, ".")
		}
		if k := src.Kustomize; k != nil {
			for _, c := range k.Components {
				u.Add(b.Overlay(join(dir, c)))
				u.Path(join(dir, c))
			}
			for _, p := range k.Patches {
				if f, ok := p["path"].(string); ok {
					u.Path(join(dir, f))
				}
			}
		}
	case kindHelm:
		t.listed = append(t.listed, dir)
		for _, f := range tree(s, dir, true) {
			u.Path(f)
		}
		e.valueFiles(u, t, src, dir, refs)
		// The file:// dependencies helm dependency build copies in.
		for _, d := range fileDependencies(ctx, s, dir) {
			t.listed = append(t.listed, d)
			u.Path(d)
			for _, f := range tree(s, d, true) {
				u.Path(f)
			}
		}
	case kindDirectory:
		t.listed = append(t.listed, dir)
		recurse := src.Directory != nil && src.Directory.Recurse
		for _, f := range tree(s, dir, recurse) {
			u.Path(f)
		}
		for _, n := range konfig.RecognizedKustomizationFileNames() {
			u.Path(join(dir, n))
		}
		u.Path(join(dir, "Chart.yaml"))
	}
}

// valueFiles adds to u the value files and file parameters of a Helm
// source that are the repository's, relative to dir ("" for a pulled
// chart: only $ref paths are).
func (e *Engine) valueFiles(u *closure.Union, t *Target, src Source, dir string, refs map[string]Source) {
	for _, p := range helmFiles(src) {
		if rp, inRepo, ok := resolve(dir, p, refs, e.opts.Repos, buildEnv(t, src)); ok && inRepo {
			u.Path(rp)
		}
	}
}

// helmFiles are the value files and file parameters' paths of a Helm
// source, as written.
func helmFiles(src Source) []string {
	h := src.Helm
	if h == nil {
		return nil
	}
	out := slices.Clone(h.ValueFiles)
	for _, fp := range h.FileParameters {
		out = append(out, fp.Path)
	}
	return out
}

// fileDependencies are the repository directories of the file://
// dependencies the chart at dir lists (vendored or not: a superset is a
// safe closure); one above the repository's root is none.
func fileDependencies(ctx context.Context, s *snapshot.Snapshot, dir string) []string {
	data, err := s.ReadFile(ctx, join(dir, "Chart.yaml"))
	if err != nil {
		return nil
	}
	if !bytes.Contains(data, []byte("file://")) && !bytes.ContainsAny(data, `\!`) {
		// No file:// repository, written out, escaped in a quoted string
		// or tagged (!!binary): none to parse the chart's metadata for
		// (most charts).
		return nil
	}
	var meta struct {
		Dependencies []struct {
			Repository string `json:"repository"`
		} `json:"dependencies"`
	}
	if sigsyaml.Unmarshal(data, &meta) != nil {
		return nil
	}
	var out []string
	for _, d := range meta.Dependencies {
		if rel, ok := strings.CutPrefix(d.Repository, "file://"); ok && !strings.HasPrefix(path.Join(dir, rel), "../") {
			out = append(out, join(dir, rel))
		}
	}
	return out
}

// tree are the files below dir (only its own when not recurse). The
// index's paths are sorted, so those below dir are one run of them: a
// search, not a pass over the repository per Application.
func tree(s *snapshot.Snapshot, dir string, recurse bool) []string {
	all := s.Index.Paths()
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	i, _ := slices.BinarySearch(all, prefix)
	var out []string
	for _, p := range all[i:] {
		if !strings.HasPrefix(p, prefix) {
			break
		}
		if !recurse && strings.Contains(p[len(prefix):], "/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

func cleanPath(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	if p == "/" {
		return "."
	}
	return p[1:]
}

func join(dir, name string) string { return cleanPath(path.Join(dir, name)) }

// reuse lets head's Applications take base's closures where the change
// cannot have changed them: most Applications of a repository are alike
// on both sides, and computing a closure reads kustomizations, lists
// charts and directories.
type reuse struct {
	changed map[string]bool // the paths that differ between the sides
	below   map[string]bool // the directories holding one of them, "." too
}

func newReuse(changed map[string]bool) *reuse {
	r := &reuse{changed: changed, below: map[string]bool{}}
	for p := range changed {
		for d := path.Dir(p); !r.below[d]; d = path.Dir(d) {
			r.below[d] = true
			if d == "." || d == "/" {
				break
			}
		}
	}
	return r
}

// closure gives head's t the closure of base's target of its name when
// it is the same Application (one parse of a file alike on both sides,
// or one making by an ApplicationSet of alike parameters), declared in
// git (not rendered by a parent), and none of what its closure read
// changed: no path of it, no file below a directory it lists. A closure
// is what its Application's spec reads of those, so it would come out
// the same. A nil r reuses nothing.
func (r *reuse) closure(base *Result, t *Target) {
	if r == nil || t.Parent != nil {
		return
	}
	b := base.Target(t.Name())
	if b == nil || b.Application != t.Application || b.Parent != nil || !r.keeps(b.Closure, b.listed) {
		return
	}
	t.Closure, t.own, t.listed, t.may = b.Closure, b.own, b.listed, b.may
}

// keeps says whether a closure c (listing the directories listed) is
// what it would be on the other tree: no path of it, no file below a
// directory it lists, differs. A closure that failed is computed again.
func (r *reuse) keeps(c *closure.Closure, listed []string) bool {
	if c == nil || c.Err != nil || c.Meets(r.changed) {
		return false
	}
	for _, d := range listed {
		if r.below[d] {
			return false
		}
	}
	return true
}

// fileKey names a file by its path and content.
type fileKey struct{ path, id string }

// parsed is the parse of the file p of s this plan made, or a plan
// before it kept in the index.
func (e *Engine) parsed(s *snapshot.Snapshot, p string) (*fileRec, bool) {
	id, ok := s.Index.ID(p)
	if !ok {
		return nil, false
	}
	key := fileKey{p, id}
	if f, ok := e.parsedFiles.Load(key); ok {
		return f.(*fileRec), true
	}
	if ix := e.index.Load(); ix != nil {
		if f := ix.files[key]; f != nil {
			v, _ := e.parsedFiles.LoadOrStore(key, f)
			return v.(*fileRec), true
		}
	}
	return nil, false
}

// keep keeps the parse d of the file p of s, for this plan and, in the
// index, later ones.
func (e *Engine) keep(s *snapshot.Snapshot, p string, d Declared) *fileRec {
	id, _ := s.Index.ID(p)
	v, _ := e.parsedFiles.LoadOrStore(fileKey{p, id}, &fileRec{path: p, id: id, decl: d})
	return v.(*fileRec)
}
