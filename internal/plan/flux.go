package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/kplan-dev/kplan/internal/flux"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// fluxEngine is the registry's row of Flux (internal/flux): the
// repository's Flux Kustomizations are the plan's targets, each planned
// by its identity (cluster: namespace/name) instead of the kustomize
// directories its build reads.
type fluxEngine struct{}

// prefetch searches the base's YAML for Flux Kustomizations when Flux
// mode is left to detection: what it finds is remembered by content, and
// detect asks again (and fails the plan with any error or crash).
func (fluxEngine) prefetch(ctx context.Context, opts Options, base *snapshot.Snapshot) {
	if opts.Flux == nil {
		_, _ = flux.Discover(ctx, base)
	}
}

// needles are what detection searches the base's YAML for, unless
// Options.Flux says whether to plan Flux.
func (fluxEngine) needles(opts Options) []string {
	if opts.Flux != nil {
		return nil
	}
	return flux.Needles()
}

// detect says whether to plan Flux Kustomizations: Options.Flux when
// set, else head's .kplan.yaml `flux:`, else off when that file lists
// targets (kplan deploys them), else whether either side holds a Flux
// Kustomization whose source is the repository.
func (fluxEngine) detect(ctx context.Context, c *change) (engineRun, error) {
	on, err := fluxMode(ctx, c)
	if err != nil || !on {
		return nil, err
	}
	return fluxRun{}, nil
}

// fluxMode is detect's answer.
func fluxMode(ctx context.Context, c *change) (bool, error) {
	if c.opts.Flux != nil {
		return *c.opts.Flux, nil
	}
	cfg := c.config
	if cfg != nil && cfg.Flux != nil {
		return *cfg.Flux, nil
	}
	if cfg.HasTargets() {
		return false, nil // kplan deploys the targets it lists
	}
	if cfg != nil && (len(cfg.FluxClusters) > 0 || len(cfg.FluxArtifacts) > 0) {
		return true, nil
	}
	for i, s := range c.snaps {
		var found *flux.Found
		var err error
		if i == 1 {
			// Base declares none from the repository: head can only in a
			// file the change touched.
			found, err = flux.DiscoverIn(ctx, s, slices.Sorted(maps.Keys(c.changed)))
		} else {
			found, err = flux.Discover(ctx, s)
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

// fluxRun is Flux detected on a change.
type fluxRun struct{}

func (fluxRun) shardRefusal() error {
	return errors.New("--shard: Flux mode plans its targets in one run; plan without --shard (or with --flux=false)")
}

// plan builds the Flux Kustomizations of both sides (those the change
// cannot affect are left unbuilt; c.skip nil builds all).
func (fluxRun) plan(ctx context.Context, c *change) (*engineMode, error) {
	var clusters map[string]string
	if c.config != nil {
		clusters = c.config.FluxClusters
	}
	// What each cluster runs, for the HelmReleases' charts: each side's
	// own declaration (a change of it re-renders the charts, as the
	// cluster's upgrade does); every other engine setting is head's.
	fo := flux.Options{Render: c.opts.Render, Clusters: clusters, Artifacts: c.config.FluxArtifactPaths(),
		Kubernetes:     func(cluster string) kubeversion.Capabilities { return c.config.Capabilities(cluster) },
		BaseKubernetes: func(cluster string) kubeversion.Capabilities { return c.baseConfig.Capabilities(cluster) }}
	if c.cache != nil {
		// Root and parent Kustomizations read what an app's change leaves
		// alone: kept, they are not built again.
		fo.Cache, fo.CacheVersion = c.cache, c.version
	}
	res, err := flux.New(fo).Plan(ctx, c.snaps[0], c.snaps[1], c.skip)
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomizations: %w", err)
	}
	m := newEngineMode("Flux")
	for i, s := range c.snaps {
		for _, sk := range res[i].Skipped {
			c.log.Info("Flux Kustomization not planned", "side", s.Rev, "id", sk.ID, "file", sk.File, "reason", sk.Reason)
		}
		for _, t := range res[i].Targets {
			m.add(i, &engineTarget{
				name: t.Name(), path: t.Path(), file: t.File, cluster: "flux:" + t.Cluster,
				closure: t.Closure, deferred: t.Deferred,
				notes: slices.Concat(t.Notes, t.NotRendered),
				side: func() inventorydiff.Side {
					sd := engineSide("Flux Kustomization "+t.Name(), t.Path(), t.Objects, repoconfig.DefaultNamespace, t.Err)
					sd.Masked, sd.Kubernetes = res[i].Masked(t), t.Kubernetes
					return sd
				},
			})
		}
	}
	// The plan's settings say Flux planned it.
	m.settings = func(s *inventorydiff.Settings) { s.Flux = true }
	return m, nil
}
