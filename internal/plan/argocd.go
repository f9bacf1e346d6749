package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/kplan-dev/kplan/internal/argocd"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/repoconfig"
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
// opens for that plans the change, with what it learnt.
func (argoEngine) detect(ctx context.Context, c *change) (engineRun, error) {
	e, parses := newArgoEngine(ctx, c)
	on, err := argoMode(ctx, e, c)
	if err != nil || !on {
		return nil, err
	}
	return argoRun{e, parses}, nil
}

// newArgoEngine is the Argo CD engine of a plan: this repository is its
// git remotes and head's .kplan.yaml argocdRepoURLs; the branch it
// merges into is the plan's base as named; Argo CD's clusters are head's
// .kplan.yaml argocdClusters.
func newArgoEngine(ctx context.Context, c *change) (*argocd.Engine, *argoParses) {
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
			opts.Clusters = append(opts.Clusters, argocd.Cluster{Name: cl.Name, Server: cl.Server, Labels: cl.Labels, Annotations: cl.Annotations})
		}
	}
	opts.Kubernetes = func(d argocd.Destination) kubeversion.Capabilities {
		return cfg.Capabilities(argoClusterIDs(cfg, d)...)
	}
	var parses *argoParses
	if c.cache != nil {
		parses = newArgoParses(c.cache, c.version)
		opts.Parses = parses
	}
	return argocd.New(opts), parses
}

// argoParses keeps Argo CD's parses of the repository's files in the
// render cache (never for --full, which reads no cache): a warm plan of
// a repository of thousands of Applications parses only the files no
// plan parsed before.
type argoParses struct {
	cache   *rendercache.Cache
	version string
	mu      sync.Mutex
	loaded  rendercache.Parses
	used    rendercache.Parses // what this plan read or made: what the file keeps next
	made    bool
}

func newArgoParses(c *rendercache.Cache, version string) *argoParses {
	return &argoParses{cache: c, version: version, loaded: c.Parses("argocd", version), used: rendercache.Parses{}}
}

func (p *argoParses) Parse(key string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.loaded[key]
	if ok {
		p.used[key] = v
	}
	return v, ok
}

func (p *argoParses) KeepParse(key string, value []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[key] = value
	p.made = true
}

// save writes what this plan's sides parsed, when it differs from what
// was read: the files of contents gone are left out, so the file stays
// the size of the repository's Argo CD files. A nil p keeps nothing.
func (p *argoParses) save() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.made && len(p.used) == len(p.loaded) {
		return nil
	}
	return p.cache.PutParses("argocd", p.version, p.used)
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

// argoMode is detect's answer, e searching the sides.
func argoMode(ctx context.Context, e *argocd.Engine, c *change) (bool, error) {
	if c.opts.ArgoCD != nil {
		return *c.opts.ArgoCD, nil
	}
	cfg := c.config
	if cfg != nil && cfg.ArgoCD != nil {
		return *cfg.ArgoCD, nil
	}
	if cfg.HasTargets() {
		return false, nil
	}
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
	e      *argocd.Engine
	parses *argoParses // kept once the plan is made; nil without a render cache
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
	if err := r.parses.save(); err != nil {
		c.log.Debug("Argo CD's parses not kept", "err", err)
	}
	m := newEngineMode("Argo CD")
	for i, s := range c.snaps {
		for _, sk := range res[i].Skipped {
			c.log.Info("Argo CD object not planned", "side", s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
		}
		for _, t := range res[i].Targets {
			m.add(i, argoTarget(t))
		}
	}
	m.renderDeferred = func(ctx context.Context, names []string) map[string]inventorydiff.Side {
		todo := make([]*argocd.Target, 0, len(names))
		for _, n := range names {
			todo = append(todo, res[1].Target(n))
		}
		r.e.Render(ctx, c.snaps[1], todo)
		out := map[string]inventorydiff.Side{}
		for _, t := range todo {
			out[t.Name()] = argoTarget(t).side()
		}
		return out
	}
	argoSyncRules(m, res)
	return m, nil
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
func argoTarget(t *argocd.Target) *engineTarget {
	return &engineTarget{
		name: t.Name(), file: t.File, cluster: "argocd:" + t.Spec.Destination.Cluster(),
		closure: t.Closure, deferred: t.Deferred,
		notes: slices.Concat(t.Notes, t.NotRendered),
		side: func() inventorydiff.Side {
			sd := engineSide("Argo CD Application "+t.Name(), t.Name(), t.Objects, cmp.Or(t.Namespace, repoconfig.DefaultNamespace), t.Err)
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
