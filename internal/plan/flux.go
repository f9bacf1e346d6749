package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kplan-dev/kplan/internal/flux"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/repoconfig"
)

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
// the change cannot affect are left unbuilt; changed nil builds all),
// each a target planned by its identity (cluster: namespace/name)
// instead of the kustomize directories its build reads.
func (p *planner) planFluxTargets(ctx context.Context, sides [2]*side, changed map[string]bool) (*engineMode, error) {
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
	m := newEngineMode("Flux")
	for i, sd := range sides {
		for _, sk := range res[i].Skipped {
			p.log.Info("Flux Kustomization not planned", "side", sd.s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
		}
		for _, t := range res[i].Targets {
			m.add(i, &engineTarget{
				name: t.Name(), path: t.Path(), file: t.File, cluster: "flux:" + t.Cluster,
				closure: t.Closure, deferred: t.Deferred,
				notes: slices.Concat(t.Notes, t.NotRendered),
				side: func() inventorydiff.Side {
					return engineSide("Flux Kustomization "+t.Name(), t.Path(), t.Objects, repoconfig.DefaultNamespace, t.Err)
				},
			})
		}
	}
	m.dropRead(sides)
	return m, nil
}
