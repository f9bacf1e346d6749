package plan

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/argocd"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/repoconfig"
)

// argoEngine is the Argo CD engine of a plan: this repository is its git
// remotes and head's .kplan.yaml argocdRepoURLs; the branch it merges
// into is the plan's base as named; Argo CD's clusters are head's
// .kplan.yaml argocdClusters.
func (p *planner) argoEngine(ctx context.Context, sides [2]*side) *argocd.Engine {
	cfg, _ := readTargets(ctx, sides[1].s)
	var urls []string
	if cfg != nil {
		urls = append(urls, cfg.ArgoCDRepoURLs...)
	}
	if p.opts.RepoDir != "" {
		if out, err := (gitcli.Repo{Dir: p.opts.RepoDir}).Run(ctx, "remote", "-v"); err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 {
					urls = append(urls, f[1])
				}
			}
		}
	}
	opts := argocd.Options{Render: p.opts.Render, Repos: argocd.NewRepos(urls...), Revisions: p.baseBranches(ctx), NewGitFileGlobbing: cfg != nil && cfg.ArgoCDNewGitFileGlobbing}
	if !p.opts.Full {
		opts.ChartCache = p.opts.CacheDir // shared with Flux HelmReleases' charts
	}
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
		for _, c := range cfg.ArgoCDClusters {
			opts.Clusters = append(opts.Clusters, argocd.Cluster{Name: c.Name, Server: c.Server, Labels: c.Labels, Annotations: c.Annotations})
		}
	}
	return argocd.New(opts)
}

// baseBranches name the branch the plan merges into: the base as given
// ("main", "origin/main") and the branch of the Action's base label
// ("main at 1a2b3c4"); when the base names no branch (a commit, HEAD~),
// the repository's checked-out branch too.
func (p *planner) baseBranches(ctx context.Context) []string {
	label, _, _ := strings.Cut(p.opts.BaseLabel, " at ")
	var revs []string
	for _, r := range []string{p.opts.Base, label} {
		for _, prefix := range []string{"refs/heads/", "refs/remotes/origin/", "origin/"} {
			r = strings.TrimPrefix(r, prefix)
		}
		if r != "" {
			revs = append(revs, r)
		}
	}
	if p.opts.RepoDir == "" {
		return revs
	}
	g := gitcli.Repo{Dir: p.opts.RepoDir}
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

// argoMode says whether to plan Argo CD Applications: Options.ArgoCD
// when set, else head's .kplan.yaml `argocd:`, else off when that file
// lists targets, else whether either side holds an Application with a
// source in this repository (head: in a changed file).
func (p *planner) argoMode(ctx context.Context, e *argocd.Engine, sides [2]*side, changed map[string]bool) (bool, error) {
	if p.opts.ArgoCD != nil {
		return *p.opts.ArgoCD, nil
	}
	cfg, _ := readTargets(ctx, sides[1].s)
	if cfg != nil && cfg.ArgoCD != nil {
		return *cfg.ArgoCD, nil
	}
	if cfg.HasTargets() {
		return false, nil
	}
	for i, sd := range sides {
		var paths []string
		if i == 1 {
			paths = slices.Sorted(maps.Keys(changed))
			if len(paths) == 0 {
				continue
			}
		}
		found, err := e.Found(ctx, sd.s, paths)
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// planArgo plans the Argo CD Applications of both sides when Argo mode
// is on (nil otherwise), each a target planned by its identity
// ([cluster: ]namespace/name) instead of the directories its render
// reads.
func (p *planner) planArgo(ctx context.Context, sides [2]*side, changed, skip map[string]bool) (*engineMode, error) {
	e := p.argoEngine(ctx, sides)
	on, err := p.argoMode(ctx, e, sides, changed)
	if err != nil || !on {
		return nil, err
	}
	if p.opts.Shard.On() {
		return nil, fmt.Errorf("--shard: Argo CD mode plans its Applications in one run; plan without --shard (or with --argocd=false)")
	}
	res, err := e.Plan(ctx, sides[0].s, sides[1].s, skip)
	if err != nil {
		return nil, fmt.Errorf("Argo CD Applications: %w", err)
	}
	m := newEngineMode("Argo CD")
	for i, sd := range sides {
		for _, sk := range res[i].Skipped {
			p.log.Info("Argo CD object not planned", "side", sd.s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
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
		e.Render(ctx, sides[1].s, todo)
		out := map[string]inventorydiff.Side{}
		for _, t := range todo {
			out[t.Name()] = argoTarget(t).side()
		}
		return out
	}
	// What each Application's sync options and ignoreDifferences do to
	// its plan, read as its sides are compared.
	sync := map[string]argoSync{}
	m.compared = func(ctx context.Context, name string, pr *pair) {
		b, h := res[0].Target(name), res[1].Target(name)
		if pr.present[0] {
			pr.sides[0].Keeps = argoKeeps(b, h)
		}
		eff := syncEffects(pr.sides[0], pr.sides[1], b, h)
		var notes []string
		eff.ignore, notes = argoIgnore(ctx, name, pr.sides[0], pr.sides[1], h)
		eff.notes = append(eff.notes, notes...)
		sync[name] = eff
	}
	m.decorated = func(o *inventorydiff.Overlay) {
		if o.Status != inventorydiff.Unchanged {
			for _, n := range sync[o.Path].notes {
				o.Notes = append(o.Notes, "Argo CD: "+n)
			}
		}
		o.Dangerous = append(o.Dangerous, sync[o.Path].findings...)
	}
	m.ignoreRules = func() []inventorydiff.IgnoreRules {
		var out []inventorydiff.IgnoreRules
		for _, name := range slices.Sorted(maps.Keys(sync)) {
			if r := sync[name].ignore; len(r.Scoped) > 0 {
				out = append(out, r)
			}
		}
		return out
	}
	m.dropRead(sides)
	return m, nil
}

// argoTarget is an Application as the planner reads it: the namespace
// of namespaced objects without one is the destination's.
func argoTarget(t *argocd.Target) *engineTarget {
	return &engineTarget{
		name: t.Name(), file: t.File, cluster: "argocd:" + t.Spec.Destination.Cluster(),
		closure: t.Closure, deferred: t.Deferred,
		notes: slices.Concat(t.Notes, t.NotRendered),
		side: func() inventorydiff.Side {
			return engineSide("Argo CD Application "+t.Name(), t.Name(), t.Objects, cmp.Or(t.Namespace, repoconfig.DefaultNamespace), t.Err)
		},
		changeNotes: func(pruning, deleted bool) []string {
			if deleted {
				return t.DeleteNotes() // the merge deletes the Application
			}
			return t.SyncNotes(pruning)
		},
	}
}
