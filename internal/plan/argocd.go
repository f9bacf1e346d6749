package plan

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/argocd"
	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/overlap"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// argoPlan is the Argo CD Applications of both sides, each a target
// planned by its identity ([cluster: ]namespace/name).
type argoPlan struct {
	res   [2]*argocd.Result
	built int
	p     *planner
	e     *argocd.Engine
}

// argoEngine is the Argo CD engine of a plan: this repository is its git
// remotes and head's .kplan.yaml argocdRepoURLs; the branch it merges
// into is the plan's base as named.
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
	o := argocd.Options{Render: p.opts.Render, Repos: argocd.NewRepos(urls...), Revisions: p.baseBranches(ctx)}
	if !p.opts.Full {
		o.ChartCache = p.opts.CacheDir // shared with Flux HelmReleases' charts
	}
	return argocd.New(o)
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
// is on (nil otherwise), and drops the discovered overlays their renders
// read: those are planned as Argo CD syncs them, in their targets.
func (p *planner) planArgo(ctx context.Context, sides [2]*side, changed, skip map[string]bool) (*argoPlan, error) {
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
	for i, sd := range sides {
		for _, sk := range res[i].Skipped {
			p.log.Info("Argo CD object not planned", "side", sd.s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
		}
		read := map[string]bool{}
		for _, t := range res[i].Targets {
			if t.Closure != nil {
				for _, q := range t.Closure.Paths {
					read[q] = true
				}
			}
		}
		for o := range sd.overlays {
			if read[o] {
				delete(sd.overlays, o)
			}
		}
	}
	return &argoPlan{res: res, p: p, e: e}, nil
}

// addClosures makes the Applications' closures count as read.
func (ap *argoPlan) addClosures(cs [2]map[string]*closure.Closure) {
	for i, res := range ap.res {
		for _, t := range res.Targets {
			if t.Closure != nil && cs[i] != nil {
				cs[i][t.Name()] = t.Closure
			}
		}
	}
}

// compare compares each Application's sides; one left unrendered on
// both is unchanged.
func (ap *argoPlan) compare(p *planner) {
	ids := map[string]bool{}
	for _, res := range ap.res {
		for _, t := range res.Targets {
			ids[t.Name()] = true
			if !t.Deferred {
				ap.built++
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		p.stats.Overlays++
		b, h := ap.res[0].Target(id), ap.res[1].Target(id)
		if b != nil && h != nil && b.Deferred && h.Deferred {
			p.stats.Skipped++
			p.compare(id, pair{present: [2]bool{true, true}, sides: [2]inventorydiff.Side{unrendered(), unrendered()}})
			continue
		}
		var pr pair
		for i, res := range ap.res {
			if t := res.Target(id); t != nil {
				pr.present[i] = true
				pr.sides[i] = p.safely(nil, id, func() inventorydiff.Side { return argoSide(t) })
			}
		}
		p.compare(id, pr)
	}
}

// argoSide is an Application's render as the planner compares it: the
// namespace of namespaced objects without one is the destination's.
func argoSide(t *argocd.Target) inventorydiff.Side {
	return engineSide("Argo CD Application "+t.Name(), t.Name(), t.Objects, cmp.Or(t.Namespace, repoconfig.DefaultNamespace), t.Err)
}

// decorate names each Application's file and adds what kplan did not
// render to its notes.
func (ap *argoPlan) decorate(overlays []inventorydiff.Overlay) {
	ap.p.stats.Rendered += ap.built
	for i := range overlays {
		o := &overlays[i]
		var t *argocd.Target
		for _, res := range []*argocd.Result{ap.res[1], ap.res[0]} {
			if t = res.Target(o.Path); t != nil {
				break
			}
		}
		if t == nil {
			continue
		}
		o.File = t.File
		for _, n := range t.Notes {
			o.Notes = append(o.Notes, "Argo CD: "+n)
		}
		for _, nr := range t.NotRendered {
			o.Notes = append(o.Notes, "Argo CD: "+nr)
		}
		if o.Status != inventorydiff.Unchanged {
			notes := t.SyncNotes(len(o.Pruned) > 0)
			if ap.res[1].Target(o.Path) == nil {
				notes = t.DeleteNotes() // the merge deletes the Application
			}
			for _, n := range notes {
				o.Notes = append(o.Notes, "Argo CD: "+n)
			}
		}
	}
}

// keysForDuplicates renders on head, for the duplicate-object rule, the
// Applications the change left unrendered when an overlay adds objects,
// as the planner renders unaffected overlays for it: the changed-only
// plan finds the duplicates the full plan finds.
func (ap *argoPlan) keysForDuplicates(ctx context.Context, head *snapshot.Snapshot) {
	if ap.p.facts.NoDuplicates || len(overlap.Adding(ap.p.overlays)) == 0 {
		return
	}
	var todo []*argocd.Target
	for _, t := range ap.res[1].Targets {
		if t.Deferred {
			todo = append(todo, t)
		}
	}
	ap.e.Render(ctx, head, todo)
	keys := ap.p.headKeysMap()
	for _, t := range todo {
		if sd := argoSide(t); sd.Err == nil && sd.Inventory != nil {
			keys[t.Name()] = sd.Inventory.Keys
		}
	}
}
