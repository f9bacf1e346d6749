package plan

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/flux"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/repoconfig"
)

// fluxPlan is the Flux Kustomizations of both sides, each a target
// planned by its identity (namespace/name) instead of the kustomize
// directories its build reads.
type fluxPlan struct {
	res   [2]*flux.Result
	built int // target sides built, for the plan's work
	p     *planner
}

// fluxMode says whether to plan Flux Kustomizations: Options.Flux when
// set, else head's .kplan.yaml `flux:`, else off when that file lists
// targets (kplan deploys them), else whether either side holds a Flux
// Kustomization whose source is the repository.
func (p *planner) fluxMode(ctx context.Context, sides [2]*side, changed map[string]bool) (bool, error) {
	if p.opts.Flux != nil {
		return *p.opts.Flux, nil
	}
	cfg, _ := readTargets(ctx, sides[1].s)
	if cfg != nil && cfg.Flux != nil {
		return *cfg.Flux, nil
	}
	if cfg.HasTargets() {
		return false, nil // kplan deploys the targets it lists
	}
	if cfg != nil && len(cfg.FluxClusters) > 0 {
		return true, nil
	}
	for i, sd := range sides {
		var found *flux.Found
		var err error
		if i == 1 {
			// Base declares none from the repository: head can only in a
			// file the change touched.
			found, err = flux.DiscoverIn(ctx, sd.s, slices.Sorted(maps.Keys(changed)))
		} else {
			found, err = flux.Discover(ctx, sd.s)
		}
		if err != nil {
			return false, err
		}
		if len(found.Instances) > 0 {
			return true, nil // flux-operator syncs a path of it
		}
		for _, d := range found.Kustomizations {
			if kind, src := d.Source(); (kind == "GitRepository" && src == flux.DefaultSource) || kind == "ExternalArtifact" {
				return true, nil
			}
		}
	}
	return false, nil
}

// planFluxTargets builds the Flux Kustomizations of both sides (those
// the change cannot affect are left unbuilt; changed nil builds all) and
// drops the discovered overlays their builds read: those are planned as
// Flux applies them, in their targets.
func (p *planner) planFluxTargets(ctx context.Context, sides [2]*side, changed map[string]bool) (*fluxPlan, error) {
	cfg, _ := readTargets(ctx, sides[1].s)
	var clusters map[string]string
	if cfg != nil {
		clusters = cfg.FluxClusters
	}
	fo := flux.Options{Render: p.opts.Render, Clusters: clusters}
	if !p.opts.Full {
		fo.ChartCache = p.opts.CacheDir
	}
	if p.cache != nil {
		// Root and parent Kustomizations read what an app's change leaves
		// alone: kept, they are not built again.
		if p.version == "" {
			p.version = buildVersion()
		}
		fo.Cache, fo.CacheVersion = p.cache, p.version
	}
	e := flux.New(fo)
	res, err := e.Plan(ctx, sides[0].s, sides[1].s, changed)
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomizations: %w", err)
	}
	fx := &fluxPlan{res: res, p: p}
	for i, sd := range sides {
		for _, sk := range res[i].Skipped {
			p.log.Info("Flux Kustomization not planned", "side", sd.s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
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
	return fx, nil
}

// has says whether id names a Flux target.
func (fx *fluxPlan) has(id string) bool {
	return fx != nil && (fx.res[0].Target(id) != nil || fx.res[1].Target(id) != nil)
}

// addClosures makes the Flux targets' closures count as read, for the
// changed files nothing reads.
func (fx *fluxPlan) addClosures(cs [2]map[string]*closure.Closure) {
	for i, res := range fx.res {
		for _, t := range res.Targets {
			if t.Closure != nil && cs[i] != nil {
				cs[i][t.Name()] = t.Closure
			}
		}
	}
}

// compare compares each Flux target's sides; one left unbuilt on both
// is unchanged, as an overlay the change cannot affect.
func (fx *fluxPlan) compare(p *planner) {
	ids := map[string]bool{}
	for _, res := range fx.res {
		for _, t := range res.Targets {
			ids[t.Name()] = true
			if !t.Deferred {
				fx.built++
			}
		}
	}
	for _, id := range slices.Sorted(mapKeys(ids)) {
		b, h := fx.res[0].Target(id), fx.res[1].Target(id)
		if !fx.selected(b) && !fx.selected(h) {
			continue // --overlays/--exclude leave it out
		}
		p.stats.Overlays++
		if b != nil && h != nil && b.Deferred && h.Deferred {
			p.stats.Skipped++
			p.compare(id, pair{present: [2]bool{true, true}, sides: [2]inventorydiff.Side{unrendered(), unrendered()}})
			continue
		}
		var pr pair
		for i, res := range fx.res {
			if t := res.Target(id); t != nil {
				pr.present[i] = true
				pr.sides[i] = p.safely(nil, id, func() inventorydiff.Side { return p.fluxSide(t) })
			}
		}
		p.compare(id, pr)
	}
}

// selected says whether the plan's filter selects the target t (nil
// selects nothing): by the directory it builds or by its name.
func (fx *fluxPlan) selected(t *flux.Target) bool {
	return t != nil && fx.p.opts.Filter.Select(t.Path(), t.Name())
}

// fluxSide is a Flux target's render as the planner compares it.
func (p *planner) fluxSide(t *flux.Target) inventorydiff.Side {
	return engineSide("Flux Kustomization "+t.Name(), t.Path(), t.Objects, repoconfig.DefaultNamespace, t.Err)
}

// engineSide is the render of a target another engine applies (Flux,
// Argo CD) as the planner compares it: that engine keeps its own
// inventory, so no ResourceGroup file is read, and namespaced objects
// without a namespace land in ns.
func engineSide(what, path string, objs []*yaml.RNode, ns string, err error) inventorydiff.Side {
	if err != nil {
		return inventorydiff.Side{Err: err}
	}
	files := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	inv, err := declared.Planned(render.Result{Path: path, Objects: objs}, files, ns)
	if err != nil {
		return inventorydiff.Side{Err: fmt.Errorf("%s: %w", what, err)}
	}
	return inventorydiff.Side{Inventory: inv}
}

// decorate names each Flux target's file, and adds
// what kplan could not render or know offline to its notes.
func (fx *fluxPlan) decorate(overlays []inventorydiff.Overlay) {
	// After the overlays' builds, which set the count.
	fx.p.stats.Rendered += fx.built
	for i := range overlays {
		o := &overlays[i]
		var t *flux.Target
		for _, res := range []*flux.Result{fx.res[1], fx.res[0]} {
			if t = res.Target(o.Path); t != nil {
				break
			}
		}
		if t == nil {
			continue
		}
		// The title is the identity (o.Path); its file is where it is
		// declared.
		if t.File != "" {
			o.File = t.File
		}
		// "Flux: " tells the reports these are not kustomize's warnings.
		for _, n := range t.Notes {
			o.Notes = append(o.Notes, "Flux: "+n)
		}
		for _, nr := range t.NotRendered {
			o.Notes = append(o.Notes, "Flux: "+nr)
		}
	}
}
