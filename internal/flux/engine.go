package flux

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// maxDepth bounds how many levels of Kustomizations applying
// Kustomizations are followed; real repositories have 2 or 3.
const maxDepth = 16

// Options control a Flux engine.
type Options struct {
	// Render are the render bounds (timeout, budgets, remote fetches).
	// Flux's builds read across directories (no load restrictor) and run
	// no helm, whatever these say.
	Render render.Options
	// Sources are the GitRepositories (namespace/name) that are this
	// repository; nil means DefaultSource. A Kustomization with another
	// source is listed as skipped.
	Sources []string
	// Scratch is the directory where Flux's generator runs; "" is the
	// OS's temporary directory.
	Scratch string
	// Memo shares kustomization parses between closures.
	Memo *closure.Memo
	// Clusters are entry points (name → directory the cluster's
	// flux-system Kustomization applies) discovery cannot find, from
	// .kplan.yaml.
	Clusters map[string]string
	// Cache keeps builds between runs (the plan's --cache-dir), under
	// keys naming CacheVersion and everything a build reads; nil keeps
	// them for this Engine only.
	Cache        Cache
	CacheVersion string
	// Kubernetes says what a cluster (by name) runs, for its
	// HelmReleases' charts; nil is kubeversion's default for all.
	Kubernetes func(cluster string) kubeversion.Capabilities
	// BaseKubernetes is Kubernetes on a plan's base side (its own
	// .kplan.yaml's declaration); nil is Kubernetes. A target whose
	// cluster runs another Kubernetes on either side is built on both.
	BaseKubernetes func(cluster string) kubeversion.Capabilities
	// Artifacts are the OCI artifacts built from this repository (URL,
	// without tag → repository directory; .kplan.yaml fluxArtifacts): a
	// Kustomization whose OCIRepository pulls one is a target, built from
	// that directory.
	Artifacts map[string]string
}

// Cache is where builds are kept between runs (rendercache.Cache).
type Cache interface {
	Get(key string) (rendercache.Entry, bool)
	Put(key string, e rendercache.Entry) error
}

// Engine builds the Flux Kustomizations of snapshots; it is safe for
// concurrent use. One Engine per process keeps one parsed OpenAPI schema.
type Engine struct {
	k      *render.Kustomizer
	opts   Options
	gen    *genMemo
	builds sync.Map        // build key → *kept: both sides of a plan share a build of the same inputs
	posts  sync.Map        // post-build key → *keptPost: and its post-build with the same variables
	charts *charts.Fetcher // Render.Charts: the plan's (helm.go)
	// repoCharts memoizes, per snapshot, the repository charts its
	// HelmReleases name (helm.go).
	repoCharts sync.Map
}

// kept is a kustomize build kept by the content it read.
type kept struct {
	objs []*yaml.RNode
	err  error
}

// New returns an Engine for opts.
func New(opts Options) *Engine {
	ro := opts.Render
	ro.LoadRestrictorNone = true
	ro.EnableHelm = false
	if opts.Sources == nil {
		opts.Sources = []string{DefaultSource}
	}
	if opts.Memo == nil {
		opts.Memo = closure.NewMemo()
	}
	return &Engine{k: render.NewKustomizer(ro), opts: opts, gen: &genMemo{m: map[string]*generated{}}, charts: opts.Render.ChartFetcher()}
}

// Target is one Flux Kustomization's build.
type Target struct {
	*Kustomization
	// Cluster names the Flux installation applying it ("" when the
	// repository has no entry point for it).
	Cluster string
	// Objects are what Flux applies, after its post-build steps.
	Objects []*yaml.RNode
	// NotRendered says, for each object Flux hands to another controller
	// that kplan could not render, what and why ("HelmRelease ns/name is
	// not rendered: ...").
	NotRendered []string
	// Notes say what the build could not know offline.
	Notes []string
	// Closure is every repository path the target's result depends on.
	Closure *closure.Closure
	Err     error
	Elapsed time.Duration
	// Deferred: Plan found that the change cannot affect the target, and
	// did not build it (Objects is empty).
	Deferred bool
	// Kubernetes is what its HelmReleases' charts were templated for;
	// nil when it has none.
	Kubernetes *kubeversion.Capabilities

	// src is the artifact it builds from (source.go): the repository as
	// source-controller archives it for its GitRepository.
	src   *source
	name  string   // in a plan: [cluster: ]namespace/name
	key   string   // its build's key (buildKey), "" when it has none
	built []string // the paths its build reads (no declarations), sorted
	reads []string // IDs of targets whose ConfigMaps/Secrets it read
}

// Name is the target's identity in a plan: namespace/name, after its
// cluster's name ("staging: flux-system/apps") when the repository holds
// several clusters.
func (t *Target) Name() string { return cmp.Or(t.name, t.ID()) }

// Skipped is a Flux Kustomization of the repository that is no target.
type Skipped struct {
	ID, File, Reason string
	Cluster          string
}

// Result is every Flux Kustomization of a snapshot.
type Result struct {
	Targets []*Target // sorted by Name
	Skipped []Skipped

	// pools are, by cluster, the ConfigMaps and Secrets its built targets
	// apply: substitution and HelmReleases' valuesFrom read them.
	pools map[string]varPool
	// kube says what each cluster runs on this side; nil is the
	// Engine's Kubernetes.
	kube func(cluster string) kubeversion.Capabilities
}

// Target returns the target with the given name, or nil.
func (r *Result) Target(name string) *Target {
	i, ok := slices.BinarySearchFunc(r.Targets, name, func(t *Target, name string) int { return strings.Compare(t.Name(), name) })
	if !ok {
		return nil
	}
	return r.Targets[i]
}

// name names the targets of results (the sides of one plan) alike:
// prefixed by their cluster when the sides hold more than one named
// cluster, or when two targets would share a name.
func name(results ...*Result) {
	named := map[string]bool{}
	prefix := false
	for _, r := range results {
		ids := map[string]bool{}
		for _, t := range r.Targets {
			if t.Cluster != "" {
				named[t.Cluster] = true
			}
			prefix = prefix || ids[t.ID()]
			ids[t.ID()] = true
		}
	}
	prefix = prefix || len(named) > 1
	for _, r := range results {
		for _, t := range r.Targets {
			t.name = t.ID()
			if prefix && t.Cluster != "" {
				t.name = t.Cluster + ": " + t.ID()
			}
		}
		slices.SortFunc(r.Targets, func(a, b *Target) int { return strings.Compare(a.Name(), b.Name()) })
	}
}

// Build finds and builds the Flux Kustomizations of s applied from this
// repository: the roots first, then the ones their builds output.
func (e *Engine) Build(ctx context.Context, s *snapshot.Snapshot) (*Result, error) {
	r, err := e.buildSide(ctx, s, nil)
	if err == nil {
		name(r)
		e.renderBuilt(ctx, s, r)
	}
	return r, err
}

// Plan builds both sides of a change, leaving unbuilt (Deferred) the
// targets the change cannot affect: on both sides, a target whose
// closure meets no changed path, whose spec and substitution variables
// are the same, that outputs no Flux Kustomization and no ConfigMap or
// Secret another one substitutes from. Every other target is built on
// both sides where it exists.
func (e *Engine) Plan(ctx context.Context, base, head *snapshot.Snapshot, changed map[string]bool) ([2]*Result, error) {
	snaps := [2]*snapshot.Snapshot{base, head}
	var res [2]*Result
	for i, s := range snaps {
		r, err := e.buildSide(ctx, s, changed)
		if err != nil {
			return res, err
		}
		res[i] = r
	}
	if e.opts.BaseKubernetes != nil {
		res[0].kube = e.opts.BaseKubernetes
	}
	name(res[0], res[1])
	for i := range res {
		var todo []*Target
		for _, t := range res[i].Targets {
			if !t.Deferred {
				continue
			}
			o := res[1-i].Target(t.Name())
			if o == nil || !o.Deferred || !reflect.DeepEqual(o.Object, t.Object) || o.Root != t.Root || !slices.Equal(o.Within, t.Within) || o.src.rules() != t.src.rules() ||
				res[i].pools[t.Cluster].key(t.Kustomization) != res[1-i].pools[o.Cluster].key(o.Kustomization) ||
				!sameCapabilities(e.kubeOf(res[i])(t.Cluster), e.kubeOf(res[1-i])(o.Cluster)) {
				t.Deferred = false
				todo = append(todo, t)
			}
		}
		e.buildAll(ctx, snaps[i], e.opts.Scratch, todo, nil)
		for _, t := range todo {
			if t.Err == nil {
				e.postBuild(ctx, t, res[i].pools[t.Cluster])
			}
			if t.Err == nil {
				// Its ConfigMaps and Secrets are no other target's
				// substitution variables (it was deferrable), but a
				// HelmRelease's valuesFrom may read them.
				res[i].pools[t.Cluster].add(t.ID(), t.Objects)
			}
		}
	}
	e.renderPlan(ctx, snaps, res)
	return res, nil
}

// buildSide is Build, deferring the targets that meet no changed path
// when changed is not nil, each cluster built on its own: the same
// Kustomization names in two clusters are two targets, and each
// substitutes from its own cluster's ConfigMaps and Secrets.
func (e *Engine) buildSide(ctx context.Context, s *snapshot.Snapshot, changed map[string]bool) (*Result, error) {
	found, err := Discover(ctx, s)
	if err != nil {
		return nil, err
	}
	// Kustomizations whose OCIRepository pulls an artifact built from
	// this repository are rooted at its directory (copies: found is
	// shared by both sides).
	ocis := ociURLs(found)
	declared := slices.Clone(found.Kustomizations)
	for i := range declared {
		declared[i].Kustomization = e.withArtifact(declared[i].Kustomization, ocis)
	}
	var deferrable func(t *Target) bool
	if changed != nil {
		files := map[string]bool{}
		for _, d := range declared {
			files[d.File] = true
		}
		names := append(substituteNames(declared), valuesFromNames(ctx, s)...)
		// A ResourceSet's objects (Flux Kustomizations among them) are
		// known once it is rendered: its target is never deferred.
		names = append(names, rsetKind)
		deferrable = func(t *Target) bool {
			if t.Closure.Meets(changed) || !t.Closure.Bounded() {
				return false
			}
			// It may output a Flux Kustomization, or a ConfigMap or
			// Secret some Kustomization substitutes from.
			for _, p := range t.built {
				if files[p] {
					return false
				}
			}
			return !mayName(ctx, s, t.built, names)
		}
	}

	// Which declared file each declared Kustomization's build reads.
	raw := map[int]*closure.Closure{}
	rawOf := func(i int) *closure.Closure {
		c, ok := raw[i]
		if !ok {
			// An ExternalArtifact's paths are known once its cluster's
			// ArtifactGenerators are built: it reads no declared file.
			if kind, _ := declared[i].Source(); kind != "ExternalArtifact" && e.skip(declared[i].Kustomization) == "" {
				c = e.rawClosure(ctx, s, declared[i].Kustomization)
			}
			raw[i] = c
		}
		return c
	}
	self := func(i int) bool {
		c := rawOf(i)
		if c == nil {
			return false
		}
		_, ok := slices.BinarySearch(c.Paths, declared[i].File)
		return ok
	}
	// Which declared files each one's build reads: reads[i] are the
	// indices of the declarations i reads, readers[j] the IDs of those
	// reading j.
	graph := func(declared []Declared) (reads [][]int, readers [][]string) {
		reads = make([][]int, len(declared))
		readers = make([][]string, len(declared))
		for i := range declared {
			c := rawOf(i)
			if c == nil {
				continue // another source's paths are not this repository's
			}
			for j := range declared {
				if j != i && declared[j].ID() != declared[i].ID() && declared[j].File != "" {
					if _, ok := slices.BinarySearch(c.Paths, declared[j].File); ok {
						readers[j] = append(readers[j], declared[i].ID())
						reads[i] = append(reads[i], j)
					}
				}
			}
		}
		return reads, readers
	}
	_, readers := graph(declared)
	root := func(i int) bool { return len(readers[i]) == 0 }
	ep := e.entries(ctx, s, declared, found.Instances, self, root)
	declared = ep.declared
	reads, readers := graph(declared)
	// Entry points: the implicit ones, and the roots whose build applies
	// their own declaration (flux bootstrap's flux-system), but those
	// nothing references beside a FluxInstance.
	res := &Result{pools: map[string]varPool{}, Skipped: ep.skipped}
	entries, phantoms := ep.entriesOf(func(i int) bool {
		return len(readers[i]) == 0 && self(i) && e.skip(declared[i].Kustomization) == ""
	})
	for _, i := range slices.Sorted(maps.Keys(phantoms)) {
		res.Skipped = append(res.Skipped, phantoms[i])
	}
	cs, unreached := clusters(declared, entries, ep.named, reads)
	srcs := e.newSources(s, found.GitRepositories)
	for _, c := range cs {
		var reads []string
		if c.entry >= 0 {
			if rc := rawOf(c.entry); rc != nil {
				reads = rc.Paths
			}
		}
		e.buildCluster(ctx, s, c, clusterSources{srcs, reads}, declared, readers, deferrable, maps.Clone(ocis), res)
		ep.name(c, phantoms, res.Targets)
	}
	for _, i := range unreached {
		d := declared[i]
		if _, ok := phantoms[i]; ok {
			continue // named above
		}
		if why := e.skip(d.Kustomization); why != "" {
			res.Skipped = append(res.Skipped, Skipped{ID: d.ID(), File: d.File, Reason: why})
			continue
		}
		res.Skipped = append(res.Skipped, Skipped{ID: d.ID(), File: d.File, Reason: "no cluster's entry point applies it (no Flux Kustomization of the repository reads its file)"})
	}
	slices.SortFunc(res.Skipped, func(a, b Skipped) int { return strings.Compare(a.ID, b.ID) })
	return res, nil
}

// buildCluster builds one cluster's targets into res: its roots first
// (its entry point, or for the unnamed cluster those no member reads),
// then the Kustomizations their builds output, level by level; then, in
// rounds, the declared ones no build output that a failed build reads.
func (e *Engine) buildCluster(ctx context.Context, s *snapshot.Snapshot, c cluster, cs clusterSources, declared []Declared, allReaders [][]string, deferrable func(*Target) bool, ocis map[string]string, res *Result) {
	b := newClusterBuild(e, s, c, declared, allReaders, deferrable, res)
	b.srcs, b.ocis = cs, ocis
	level := b.roots()
	for round := 0; ; round++ {
		b.levels(ctx, level)
		if level = b.unmatched(round); len(level) == 0 {
			break
		}
	}
	complete(b.targets)
	for _, t := range b.targets {
		res.Targets = append(res.Targets, t)
	}
}

// clusterBuild is one cluster's build under way (buildCluster).
type clusterBuild struct {
	e          *Engine
	s          *snapshot.Snapshot
	c          cluster
	declared   []Declared
	deferrable func(*Target) bool
	res        *Result
	// readers are, for each member, the IDs of the members reading its
	// file.
	readers map[int][]string
	pool    varPool // what the cluster holds, to substitute from
	arts    map[string]*artifact
	targets map[string]*Target // by ID
	// matched are the members a build output, or a round built.
	matched map[int]bool
	srcs    clusterSources
	// ocis are the URLs of the OCIRepositories the cluster declares or
	// its builds output, by ID.
	ocis map[string]string
}

// clusterSources are the artifacts a cluster's targets build from: the
// side's, picked by what the cluster's entry point reads (reads).
type clusterSources struct {
	*sources
	reads []string
}

// source is the artifact k builds from, and what the cluster's roots
// must say of it. An ExternalArtifact is copied from the artifact of
// the repository's (first) GitRepository.
func (b *clusterBuild) source(ctx context.Context, k *Kustomization) (*source, []string) {
	if b.srcs.sources == nil {
		return nil, nil
	}
	kind, id := k.Source()
	if kind == "ExternalArtifact" {
		id = b.e.opts.Sources[0]
	}
	g, note := b.srcs.pick(id, b.srcs.reads)
	src := b.srcs.of(ctx, g)
	var notes []string
	if k.Parent == "" {
		if note != "" {
			notes = append(notes, note)
		}
		notes = append(notes, src.notes...)
	}
	return src, notes
}

func newClusterBuild(e *Engine, s *snapshot.Snapshot, c cluster, declared []Declared, allReaders [][]string, deferrable func(*Target) bool, res *Result) *clusterBuild {
	b := &clusterBuild{e: e, s: s, c: c, declared: declared, deferrable: deferrable, res: res,
		readers: map[int][]string{}, pool: varPool{}, arts: map[string]*artifact{}, targets: map[string]*Target{}, matched: map[int]bool{}}
	ids := map[string]bool{}
	for _, i := range c.members {
		ids[declared[i].ID()] = true
	}
	for _, i := range c.members {
		for _, r := range allReaders[i] {
			if ids[r] {
				b.readers[i] = append(b.readers[i], r)
			}
		}
	}
	res.pools[c.name] = b.pool
	return b
}

// roots are the cluster's first level: its entry point, or for the
// unnamed cluster the members no member reads.
func (b *clusterBuild) roots() []*Kustomization {
	var level []*Kustomization
	for _, i := range b.c.members {
		if i == b.c.entry || (b.c.entry < 0 && len(b.readers[i]) == 0) {
			k := *b.declared[i].Kustomization
			level = append(level, &k)
			b.matched[i] = true
		}
	}
	return level
}

// levels builds level, then the Kustomizations its builds output, and
// so on, at most maxDepth levels deep.
func (b *clusterBuild) levels(ctx context.Context, level []*Kustomization) {
	for depth := 0; len(level) > 0; depth++ {
		if depth == maxDepth {
			for _, k := range level {
				b.skipped(k, fmt.Sprintf("more than %d levels of Flux Kustomizations applying Flux Kustomizations", maxDepth))
			}
			return
		}
		built := b.newTargets(ctx, level)
		b.e.buildAll(ctx, b.s, b.e.opts.Scratch, built, b.deferrable)
		for _, t := range built {
			if t.Err == nil {
				b.pool.add(t.ID(), t.Objects)
				b.e.artifacts(t.Objects, b.arts)
			}
		}
		level = nil
		for _, t := range built {
			if t.Err != nil || t.Deferred {
				continue
			}
			b.e.postBuild(ctx, t, b.pool)
			// What the cluster holds is the post-built objects (later
			// levels substitute from them, helm-controller's valuesFrom
			// reads them).
			b.pool.add(t.ID(), t.Objects)
			addOCIURLs(t.Objects, b.ocis)
			level = append(level, b.children(t)...)
		}
	}
}

// newTargets are the targets of a level's Kustomizations, but those
// already targets (a Kustomization applying itself: flux-system) and
// those skipped, which their parent's notes name.
func (b *clusterBuild) newTargets(ctx context.Context, level []*Kustomization) []*Target {
	var built []*Target
	for _, k := range level {
		if _, dup := b.targets[k.ID()]; dup {
			continue
		}
		why := b.e.skip(k)
		if kind, _ := k.Source(); kind == "ExternalArtifact" && why == "" {
			why = inArtifact(k, b.arts)
		}
		if why != "" {
			b.skipped(k, why)
			if p := b.targets[k.Parent]; p != nil {
				p.Notes = append(p.Notes, fmt.Sprintf("Kustomization %s is not planned: %s", k.ID(), why))
			}
			continue
		}
		t := &Target{Kustomization: k, Cluster: b.c.name}
		t.src, t.Notes = b.source(ctx, k)
		if p := b.targets[k.Parent]; k.Artifact != "" && (p == nil || p.Artifact != k.Artifact) {
			t.Notes = append(t.Notes, artifactNote(k))
		}
		b.targets[k.ID()] = t
		built = append(built, t)
	}
	return built
}

// children are the Flux Kustomizations t's build outputs, each matched
// to the member declaring it in a file t's build reads.
func (b *clusterBuild) children(t *Target) []*Kustomization {
	var out []*Kustomization
	for _, o := range t.Objects {
		if !IsKustomization(o.GetApiVersion(), o.GetKind()) {
			continue
		}
		child, err := fromNode(o.Copy(), "", "default")
		if err != nil {
			t.Notes = append(t.Notes, err.Error())
			continue
		}
		child.Parent = t.ID()
		child = b.e.withArtifact(child, b.ocis)
		for _, i := range b.c.members {
			d := b.declared[i]
			if d.Name == child.Name && d.File != "" && t.Closure != nil && slices.Contains(t.Closure.Paths, d.File) {
				child.File, b.matched[i] = d.File, true
				break
			}
		}
		out = append(out, child)
	}
	return out
}

// unmatched are the declared members no build output: built from their
// file when the build that reads it failed (so the plan still shows
// them), or in a later round; skipped otherwise (Flux does not apply
// them).
func (b *clusterBuild) unmatched(round int) []*Kustomization {
	var level []*Kustomization
	for _, i := range b.c.members {
		d := b.declared[i]
		if b.matched[i] {
			continue
		}
		b.matched[i] = true
		if _, ok := b.targets[d.ID()]; ok {
			continue
		}
		if round > 0 || b.readByFailed(i) {
			k := *d.Kustomization
			level = append(level, &k)
			continue
		}
		b.skipped(d.Kustomization, "no Flux Kustomization of the repository applies it (the ones reading its file do not output it)")
	}
	return level
}

// readByFailed says whether a build that failed reads member i's file.
func (b *clusterBuild) readByFailed(i int) bool {
	return slices.ContainsFunc(b.readers[i], func(r string) bool {
		t := b.targets[r]
		return t != nil && t.Err != nil
	})
}

// skipped records that k is not a target of the cluster, and why.
func (b *clusterBuild) skipped(k *Kustomization, why string) {
	b.res.Skipped = append(b.res.Skipped, Skipped{ID: k.ID(), Cluster: b.c.name, File: k.File, Reason: why})
}

// skip says why k is not a target, or "".
func (e *Engine) skip(k *Kustomization) string {
	if k.Suspended() {
		return "suspended: Flux applies nothing of it"
	}
	kind, src := k.Source()
	switch {
	case kind == "ExternalArtifact":
		return "" // resolved against its cluster's ArtifactGenerators
	case kind == "OCIRepository" && k.Artifact != "":
		return "" // built from this repository (.kplan.yaml fluxArtifacts)
	case kind == "OCIRepository":
		return fmt.Sprintf("its source OCIRepository %s is an artifact .kplan.yaml's fluxArtifacts does not map to a directory of this repository; kplan renders Kustomizations of the repository only (map it there if CI pushes it from this repository)", src)
	case kind == "Bucket":
		return fmt.Sprintf("its source %s %s is an artifact built outside this repository; kplan renders Kustomizations of the repository only", kind, src)
	case kind != "GitRepository" || !slices.Contains(e.opts.Sources, src):
		return fmt.Sprintf("its source %s %s is not this repository (this repository is the GitRepository %s)", kind, src, strings.Join(e.opts.Sources, ", "))
	}
	return ""
}

// rawClosure is what a declared Kustomization's build reads by its
// spec as written, for finding the roots: its path's build with its
// components, or the path's whole tree when Flux would generate its
// kustomization. It runs no generator: which files a build reads does
// not depend on the rest of the spec.
func (e *Engine) rawClosure(ctx context.Context, s *snapshot.Snapshot, k *Kustomization) *closure.Closure {
	dir := k.Path()
	has := false
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, ok := s.Index.ID(join(dir, name)); ok {
			has = true
		}
	}
	b := closure.New(closure.SnapshotSource(ctx, s), closure.Options{Memo: e.opts.Memo})
	u := closure.NewUnion(k.ID())
	if has {
		u.Add(b.Overlay(dir))
	} else {
		// Flux lists the path's manifests and the directories below with
		// a kustomization: those files, those builds, and a kustomization
		// file appearing anywhere it walks count.
		sc := scanOf(s, dir)
		for _, p := range sc.files {
			u.Path(p)
		}
		for _, d := range sc.dirs {
			u.Path(d)
			for _, name := range konfig.RecognizedKustomizationFileNames() {
				u.Path(join(d, name))
			}
		}
		for _, d := range sc.kdirs {
			u.Add(b.Overlay(d))
		}
	}
	comps, _, _ := unstructured.NestedStringSlice(k.Object, "spec", "components")
	for _, c := range comps {
		u.Add(b.Overlay(path.Clean(path.Join(dir, c))))
	}
	return u.Closure()
}

// buildAll builds targets concurrently, each failing alone; those
// deferrable says may wait are left Deferred.
func (e *Engine) buildAll(ctx context.Context, s *snapshot.Snapshot, scratch string, ts []*Target, deferrable func(*Target) bool) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, t := range ts {
		g.Go(func() error {
			start := time.Now()
			t.Err = crash.Catch(func() error { return e.build(ctx, s, scratch, t, deferrable) })
			if c := crash.As(t.Err); c != nil {
				// A bug building one target fails it alone.
				slog.Error("kplan bug: panic building a Flux Kustomization; it fails, the rest is planned", "id", t.ID(), "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
				t.Deferred, t.Err = false, fmt.Errorf("Flux Kustomization %s (%s): %w", t.ID(), cmp.Or(t.File, t.Path()), t.Err)
			}
			t.Elapsed = time.Since(start)
			if t.Err != nil {
				slog.Debug("Flux Kustomization failed", "id", t.ID(), "err", t.Err)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// build runs Flux's generator and kustomize build for t.
func (e *Engine) build(ctx context.Context, s *snapshot.Snapshot, scratch string, t *Target, deferrable func(*Target) bool) error {
	if t.src != nil {
		// What source-controller's artifact leaves out does not exist for
		// the build.
		if t.src.err != nil {
			return fmt.Errorf("Flux Kustomization %s: the artifact of its source: %w", t.ID(), t.src.err)
		}
		s = t.src.snap
	}
	if t.Closure == nil {
		t.Closure = e.closure(ctx, s, t)
	}
	if t.Closure.Err != nil {
		return fmt.Errorf("Flux Kustomization %s: %w", t.ID(), t.Closure.Err)
	}
	if t.Within != nil {
		if p := outside(t.built, t.Within); p != "" {
			return fmt.Errorf("Flux Kustomization %s: its build reads %s, which its ExternalArtifact does not hold (its ArtifactGenerator copies %s)", t.ID(), p, strings.Join(t.Within, ", "))
		}
	}
	if deferrable != nil && deferrable(t) {
		t.Deferred = true
		return nil
	}
	key := e.buildKey(s, t)
	t.key = key
	if objs, err, ok := e.cached(key); ok {
		t.Objects = objs
		return err
	}
	objs, err, keep := e.kustomize(ctx, s, scratch, t)
	var timeout *render.TimeoutError
	if keep && ctx.Err() == nil && !errors.As(err, &timeout) {
		// A build past its time budget depends on the machine's load,
		// not on the commit: never kept.
		e.store(key, objs, err)
	}
	t.Objects = objs
	return err
}

// kustomize runs Flux's generator and kustomize build for t; keep says
// whether its result is the commit's, not a failure to read it.
func (e *Engine) kustomize(ctx context.Context, s *snapshot.Snapshot, scratch string, t *Target) (objs []*yaml.RNode, err error, keep bool) {
	g, err := e.gen.generate(ctx, s, scratch, t.Kustomization)
	if err != nil {
		return nil, err, false
	}
	if err := s.Load(ctx, t.Closure.Paths); err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: %w", t.ID(), err), false
	}
	fsys, err := snapshot.WithFile(s.FS, g.File, g.Data)
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: %w", t.ID(), err), false
	}
	objs, err = e.k.RenderContext(ctx, fsys, t.Path(), t.Closure.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s (%s): %w", t.ID(), t.Path(), err), true
	}
	for _, o := range objs {
		// kustomize-controller refuses such objects before applying any.
		if o.GetName() == "" || o.GetKind() == "" || o.GetApiVersion() == "" {
			return nil, fmt.Errorf("Flux Kustomization %s: an object without apiVersion, kind or name (Flux fails with \"failed to decode Kubernetes apiVersion, kind and name\")", t.ID()), true
		}
	}
	return objs, nil, true
}

// postBuild applies Flux's post-build steps to t's objects and lists
// what kplan does not render.
func (e *Engine) postBuild(ctx context.Context, t *Target, pool varPool) {
	key := e.postBuildKey(t, pool)
	if e.postBuilt(key, t) {
		return
	}
	defer e.keepPostBuilt(ctx, key, t, len(t.Notes), len(t.NotRendered))
	var pb *postBuilt
	err := crash.Catch(func() (err error) {
		pb, err = postBuild(ctx, t.Kustomization, t.Objects, pool)
		return err
	})
	if c := crash.As(err); c != nil {
		slog.Error("kplan bug: panic in a Flux Kustomization's post-build; it fails, the rest is planned", "id", t.ID(), "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
		err = fmt.Errorf("Flux Kustomization %s (%s): postBuild: %w", t.ID(), cmp.Or(t.File, t.Path()), err)
	}
	if err != nil {
		t.Err, t.Objects = err, nil
		return
	}
	t.Objects, t.Notes, t.reads = pb.objects, append(t.Notes, pb.notes...), pb.reads
	// What its ResourceSets make is what flux-operator applies: planned
	// as the target's, its Flux Kustomizations the next targets.
	var rs *rsetResult
	err = crash.Catch(func() error {
		rs = resourceSets(t.Objects, pool.configMap)
		return nil
	})
	if c := crash.As(err); c != nil {
		slog.Error("kplan bug: panic rendering a ResourceSet; its target fails, the rest is planned", "id", t.ID(), "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
		t.Err, t.Objects = fmt.Errorf("Flux Kustomization %s (%s): ResourceSets: %w", t.ID(), cmp.Or(t.File, t.Path()), err), nil
		return
	}
	t.Objects = append(t.Objects, rs.objects...)
	t.Notes = append(t.Notes, rs.notes...)
	t.NotRendered = append(t.NotRendered, rs.notRendered...)
}

// closure is what t's own build reads (rawClosure: the same paths as
// the build with the generated kustomization), plus the file declaring t
// and the kustomization files of the directories above that file (they
// set its namespace, patch it). Build adds its ancestors' and its
// substitution sources' (complete).
func (e *Engine) closure(ctx context.Context, s *snapshot.Snapshot, t *Target) *closure.Closure {
	c := e.rawClosure(ctx, s, t.Kustomization)
	t.built = c.Paths
	set := map[string]bool{}
	for _, p := range c.Paths {
		set[p] = true
	}
	addDeclaration(set, t.File)
	for _, p := range e.chartPaths(ctx, s, c.Paths) {
		set[p] = true
	}
	t.src.repoPaths(set)
	for p := range set {
		for d := path.Dir(p); d != "." && !set[d]; d = path.Dir(d) {
			set[d] = true
		}
	}
	c.Paths = sorted(set)
	return c
}

// addDeclaration adds a declaring file and the kustomization files of
// the directories above it.
func addDeclaration(set map[string]bool, file string) {
	if file == "" {
		return
	}
	set[file] = true
	for d := path.Dir(file); ; d = path.Dir(d) {
		for _, name := range konfig.RecognizedKustomizationFileNames() {
			set[join(d, name)] = true
		}
		if d == "." {
			break
		}
	}
}

// complete adds to each target's closure the declarations of its
// ancestors (whose patches and namespace shape its spec) and the own
// closures of the targets whose ConfigMaps or Secrets it substitutes
// from (which file defines one is not known, so all they read counts).
func complete(targets map[string]*Target) {
	own := map[string][]string{}
	for id, t := range targets {
		if t.Closure != nil {
			own[id] = t.Closure.Paths
		}
	}
	for _, t := range targets {
		if t.Closure == nil {
			continue
		}
		set := map[string]bool{}
		for _, p := range t.Closure.Paths {
			set[p] = true
		}
		seen := map[string]bool{t.ID(): true}
		for p := targets[t.Parent]; p != nil && !seen[p.ID()]; p = targets[p.Parent] {
			seen[p.ID()] = true
			addDeclaration(set, p.File)
		}
		for _, r := range t.reads {
			for _, p := range own[r] {
				set[p] = true
			}
		}
		for p := range set {
			for d := path.Dir(p); d != "." && !set[d]; d = path.Dir(d) {
				set[d] = true
			}
		}
		c := *t.Closure
		c.Paths = sorted(set)
		t.Closure = &c
	}
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
