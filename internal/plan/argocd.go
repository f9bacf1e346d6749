package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/argocd"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// argoEngine is the registry's row of Argo CD (internal/argocd): the
// repository's Argo CD Applications are the plan's targets, each planned
// by its identity ([cluster: ]namespace/name) instead of the directories
// its render reads.
type argoEngine struct{}

// needles are what detection searches the base's YAML for, unless
// Options.ArgoCD turns Argo CD off: with it on, Argo CD's discovery
// takes the answers of that one search (and a warm plan those the render
// cache kept) instead of reading every YAML file again.
func (argoEngine) needles(opts Options) []string {
	if opts.ArgoCD != nil && !*opts.ArgoCD {
		return nil
	}
	return []string{argocd.Group}
}

// detect says whether to plan Argo CD Applications: Options.ArgoCD
// when set, else head's .kplan.yaml `argocd:`, else off when that file
// lists targets, else whether either side holds an Application with a
// source in this repository (head: in a changed file). The engine it
// opens for that (with the render cache's index, unless Argo CD is off)
// plans the change, with what it learnt.
func (argoEngine) detect(ctx context.Context, c *change) (engineRun, error) {
	on, settled := argoSettled(c)
	if settled && !on {
		return nil, nil
	}
	e, index := newArgoEngine(ctx, c)
	if !settled {
		var err error
		if on, err = argoFound(ctx, e, c); err != nil || !on {
			return nil, err
		}
	}
	return argoRun{e, index}, nil
}

// newArgoEngine is the Argo CD engine of a plan: this repository is its
// git remotes and head's .kplan.yaml argocdRepoURLs; the branch it
// merges into is the plan's base as named; Argo CD's clusters are head's
// .kplan.yaml argocdClusters. With a render cache, it takes what the
// index there knows of the base (argoIndex).
func newArgoEngine(ctx context.Context, c *change) (*argocd.Engine, *argoIndex) {
	cfg := c.config
	var urls []string
	if cfg != nil {
		urls = append(urls, cfg.ArgoCDRepoURLs...)
	}
	if c.opts.RepoDir != "" {
		if out, err := (gitcli.Repo{Dir: c.opts.RepoDir}).Run(ctx, "remote", "-v"); err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 {
					urls = append(urls, f[1])
				}
			}
		}
	}
	opts := argocd.Options{Render: c.opts.Render, Repos: argocd.NewRepos(urls...), Revisions: baseBranches(ctx, c.opts), NewGitFileGlobbing: cfg != nil && cfg.ArgoCDNewGitFileGlobbing}
	if cfg != nil && cfg.ArgoCDKustomizeBuildOptions != "" {
		// argocd-cm's kustomize.buildOptions: how Argo CD builds, over
		// kplan's own render flags (Parse has checked them).
		if bo, err := repoconfig.ParseBuildOptions(cfg.ArgoCDKustomizeBuildOptions); err == nil {
			opts.KustomizeEnableHelm = bo.EnableHelm
			opts.Render.LoadRestrictorNone = bo.LoadRestrictorNone
		}
	}
	if cfg != nil && cfg.ArgoCDClusters != nil {
		// Argo CD's clusters are not in git: both sides see head's.
		opts.ClustersFile = repoconfig.File
		for _, cl := range cfg.ArgoCDClusters {
			opts.Clusters = append(opts.Clusters, argocd.Cluster{Name: cl.Name, Server: cl.Server, Labels: cl.Labels, Annotations: cl.Annotations, Project: cl.Project})
		}
	}
	opts.Kubernetes = func(d argocd.Destination) kubeversion.Capabilities {
		return cfg.Capabilities(argoClusterIDs(cfg, d)...)
	}
	e := argocd.New(opts)
	if c.cache == nil {
		return e, nil
	}
	return e, useArgoIndex(ctx, c, e)
}

// argoIndex is the render cache's index of Argo CD Applications (never
// for --full, which reads no cache): a plan whose base a plan before it
// read, or a commit a few files away from one, takes its Applications
// from there, and derives again only what the files that differ reach.
type argoIndex struct {
	cache   *rendercache.Cache
	version string
	commits []string // those of the index read, newest first
	// hit says the base is a commit of the index: a plan of it writes
	// the index only when warming the cache (Options.Warm: a push to the
	// default branch, whose head the next plans take as their base).
	hit bool
}

// useArgoIndex reads the index and makes e derive the base from the
// commit of it that is the base, else from its newest commit and their
// diff. An index that cannot be read, or was made under other settings,
// is left out (the plan discovers every Application), and said in the
// debug log.
func useArgoIndex(ctx context.Context, c *change, e *argocd.Engine) *argoIndex {
	ai := &argoIndex{cache: c.cache, version: c.version}
	body, err := c.cache.Index("argocd", c.version)
	if err != nil || body == nil {
		if err != nil {
			c.log.Debug("the render cache's Argo CD index is not read", "err", err)
		}
		return ai
	}
	ix, err := argocd.DecodeIndex(body)
	if err != nil {
		c.log.Debug("the render cache's Argo CD index is not read", "err", err)
		return ai
	}
	if why := e.Use(ix); why != "" {
		c.log.Debug("the render cache's Argo CD index is not used", "why", why)
		return ai
	}
	ai.commits = ix.Commits()
	base := c.snaps[0]
	if slices.Contains(ai.commits, base.Rev) {
		if err := e.Prior(base.Rev, base.Rev, map[string]bool{}); err != nil {
			c.log.Debug("the render cache's Argo CD index is not used", "err", err)
		}
		ai.hit = !c.opts.Warm
		return ai
	}
	for _, commit := range ai.commits[:min(2, len(ai.commits))] {
		// What differs between the base and a commit of the index.
		changed, err := c.near.diff(ctx, commit)
		if err != nil {
			c.log.Debug("a commit of the render cache's Argo CD index is not read", "commit", commit, "err", err)
			continue
		}
		if err := e.Prior(base.Rev, commit, changed); err == nil {
			return ai
		}
	}
	return ai
}

// save keeps what the plan knows of the sides' commits in the index,
// unless the index holds those commits already, or served the base
// (hit). A nil ai keeps nothing.
func (ai *argoIndex) save(ctx context.Context, e *argocd.Engine, snaps [2]*snapshot.Snapshot, res [2]*argocd.Result) error {
	if ai == nil || ai.hit {
		return nil
	}
	ix := e.Index(ctx, snaps[:], res[:])
	if ix == nil || slices.Equal(ix.Commits(), ai.commits) {
		return nil
	}
	data, err := ix.Encode()
	if err != nil {
		return err
	}
	return ai.cache.PutIndex("argocd", ai.version, data)
}

// baseBranches name the branch the plan merges into: the base as given
// ("main", "origin/main") and the branch of the Action's base label
// ("main at 1a2b3c4"); when the base names no branch (a commit, HEAD~),
// the repository's checked-out branch too.
func baseBranches(ctx context.Context, opts Options) []string {
	label, _, _ := strings.Cut(opts.BaseLabel, " at ")
	var revs []string
	for _, r := range []string{opts.Base, label} {
		for _, prefix := range []string{"refs/heads/", "refs/remotes/origin/", "origin/"} {
			r = strings.TrimPrefix(r, prefix)
		}
		if r != "" {
			revs = append(revs, r)
		}
	}
	if opts.RepoDir == "" {
		return revs
	}
	g := gitcli.Repo{Dir: opts.RepoDir}
	for _, r := range revs {
		for _, ref := range []string{"refs/heads/" + r, "refs/remotes/origin/" + r} {
			if _, err := g.Run(ctx, "show-ref", "--verify", "-q", ref); err == nil {
				return revs
			}
		}
	}
	if out, err := g.Run(ctx, "symbolic-ref", "--short", "-q", "HEAD"); err == nil {
		revs = append(revs, strings.TrimSpace(string(out)))
	}
	return revs
}

// argoSettled is detect's answer when the flag or head's .kplan.yaml
// gives it (settled): with neither, the sides say (argoFound).
func argoSettled(c *change) (on, settled bool) {
	if c.opts.ArgoCD != nil {
		return *c.opts.ArgoCD, true
	}
	cfg := c.config
	if cfg != nil && cfg.ArgoCD != nil {
		return *cfg.ArgoCD, true
	}
	if cfg.HasTargets() {
		return false, true
	}
	return false, false
}

// argoFound says whether either side holds an Application with a source
// in this repository (head: in a changed file), e searching them.
func argoFound(ctx context.Context, e *argocd.Engine, c *change) (bool, error) {
	for i, s := range c.snaps {
		var paths []string
		if i == 1 {
			paths = slices.Sorted(maps.Keys(c.changed))
			if len(paths) == 0 {
				continue
			}
		}
		found, err := e.Found(ctx, s, paths)
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// argoRun is Argo CD detected on a change, with the engine that detected
// it.
type argoRun struct {
	e     *argocd.Engine
	index *argoIndex // kept once the plan is made; nil without a render cache
}

func (argoRun) shardRefusal() error {
	return errors.New("--shard: Argo CD mode plans its Applications in one run; plan without --shard (or with --argocd=false)")
}

// plan renders the Argo CD Applications of both sides, and reads what
// their sync options and ignoreDifferences do to their plans.
func (r argoRun) plan(ctx context.Context, c *change) (*engineMode, error) {
	res, err := r.e.Plan(ctx, c.snaps[0], c.snaps[1], c.skip)
	if err != nil {
		return nil, fmt.Errorf("Argo CD Applications: %w", err)
	}
	if err := r.index.save(ctx, r.e, c.snaps, res); err != nil {
		c.log.Debug("the Argo CD index is not kept", "err", err)
	}
	m := newEngineMode("Argo CD")
	for _, sk := range res[1].Skipped {
		m.notPlanned = append(m.notPlanned, inventorydiff.NotPlanned{Engine: "Argo CD", ID: sk.ID, File: sk.File, Reason: sk.Reason})
	}
	for _, r := range res {
		for _, sk := range r.Skipped {
			m.claimed = append(m.claimed, sk.Paths...)
		}
	}
	for i, s := range c.snaps {
		for _, sk := range res[i].Skipped {
			c.log.Debug("Argo CD object not planned", "side", s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
		}
		scope := argoScope(ctx, s, res[i])
		for _, t := range res[i].Targets {
			m.add(i, argoTarget(t, scope))
		}
	}
	m.renderDeferred = func(ctx context.Context, names []string) map[string]inventorydiff.Side {
		todo := make([]*argocd.Target, 0, len(names))
		for _, n := range names {
			todo = append(todo, res[1].Target(n))
		}
		r.e.Render(ctx, c.snaps[1], todo)
		out := map[string]inventorydiff.Side{}
		scope := argoScope(ctx, c.snaps[1], res[1])
		for _, t := range todo {
			out[t.Name()] = argoTarget(t, scope).side()
		}
		return out
	}
	argoSyncRules(m, res)
	m.moveNote = func(key, from, to string) string {
		// Argo CD prunes only what its tracking says is the
		// Application's own (isSelfReferencedObj, controller/
		// state.go:1342-1400 at argo-cd 37ee0097cf): once to has
		// applied the object it is to's, and from's prune leaves it;
		// if from syncs first, its prune deletes the object and to
		// creates it anew.
		return inventorydiff.Name(key) + " moves from " + from + " to " + to + " (one cluster): what happens depends on which Application syncs first; if " + from + " prunes before " + to + " applies it, the object is deleted and created anew (its data and uptime with it), otherwise " + to + " takes it over"
	}
	return m, nil
}

// argoScope knows, besides the built-in kinds, the kinds of the
// CustomResourceDefinitions in the files the side's Applications read
// (a CRDs Application's manifests, a chart's crds/), rendered or not, so
// that a changed-only plan knows what the full one does: Argo CD puts an
// object of a kind the destination serves namespaced in the destination
// namespace (NormalizeTargetObjects, controller/state.go:795 at argo-cd
// 37ee0097cf), wherever its CRD comes from. A CRD only a chart's
// template makes is known in its own Application only.
func argoScope(ctx context.Context, s *snapshot.Snapshot, r *argocd.Result) inventory.Scope {
	// Searched once, and only when an object's kind is not built in and
	// not defined in its own render: most plans never search.
	var once sync.Once
	crds := inventory.CRDScope(nil)
	search := func() {
		read := map[string]bool{}
		for _, t := range r.Targets {
			if t.Closure == nil {
				continue
			}
			for _, p := range t.Closure.Paths {
				if ext := path.Ext(p); ext == ".yaml" || ext == ".yml" || ext == ".json" {
					read[p] = true
				}
			}
		}
		has, err := s.Containing(ctx, slices.Sorted(maps.Keys(read)), "CustomResourceDefinition")
		if err != nil {
			return
		}
		data, _ := s.ReadFiles(ctx, has)
		var docs []*yaml.RNode
		for _, p := range has {
			d, _ := yamldocs.Mappings(data[p])
			docs = append(docs, d...)
		}
		crds = inventory.CRDScope(docs)
	}
	return func(apiVersion, kind string) (bool, bool) {
		if ns, known := render.NamespaceScoped(apiVersion, kind); known {
			return ns, true
		}
		once.Do(search)
		return crds(apiVersion, kind)
	}
}

// unknownScopes are notes on t's objects without a namespace whose kind
// neither kplan nor a CRD of the repository's Applications says the
// scope of: planned as rendered, where Argo CD puts them in the
// destination namespace if the cluster serves them namespaced.
func unknownScopes(t *argocd.Target, scope inventory.Scope) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range t.Objects {
		if o.GetNamespace() != "" || seen[o.GetApiVersion()+" "+o.GetKind()] {
			continue
		}
		if _, known := scope(o.GetApiVersion(), o.GetKind()); known {
			continue
		}
		seen[o.GetApiVersion()+" "+o.GetKind()] = true
		out = append(out, fmt.Sprintf("%s %s: no CustomResourceDefinition in the repository's Applications says whether it is namespaced; planned without a namespace, where Argo CD puts it in the destination namespace (%s) if the cluster serves it namespaced", o.GetApiVersion(), o.GetKind(), t.Namespace))
	}
	return out
}

// argoClusterIDs name an Application's destination cluster for
// .kplan.yaml's kubernetes.clusters: its name and server, and the other
// of the two as argocdClusters pairs them (Argo CD's cluster Secrets).
func argoClusterIDs(cfg *repoconfig.Config, d argocd.Destination) []string {
	ids := []string{d.Name, d.Server}
	if cfg == nil {
		return ids
	}
	for _, cl := range cfg.ArgoCDClusters {
		if (d.Name != "" && cl.Name == d.Name) || (d.Server != "" && strings.TrimSuffix(cl.Server, "/") == strings.TrimSuffix(d.Server, "/")) {
			ids = append(ids, cl.Name, cl.Server)
		}
	}
	return ids
}

// argoTarget is an Application as the planner reads it: the namespace
// of namespaced objects without one is the destination's.
func argoTarget(t *argocd.Target, scope inventory.Scope) *engineTarget {
	return &engineTarget{
		name: t.Name(), file: t.File, cluster: "argocd:" + t.Destination.Cluster(),
		closure: t.Closure, deferred: t.Deferred,
		notes: slices.Concat(t.Notes, t.NotRendered, unknownScopes(t, scope)),
		side: func() inventorydiff.Side {
			sd := engineSideScoped("Argo CD Application "+t.Name(), t.Name(), t.Objects, cmp.Or(t.Namespace, repoconfig.DefaultNamespace), t.Err, scope)
			sd.Kubernetes = t.Kubernetes
			return sd
		},
		changeNotes: func(pruning, deleted bool) []string {
			if deleted {
				return t.DeleteNotes() // the merge deletes the Application
			}
			return t.SyncNotes(pruning)
		},
	}
}
