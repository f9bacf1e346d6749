package plan

import (
	"context"
	"slices"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/overlap"
)

// headKeysMap is p.headKeys, made when first needed.
func (p *planner) headKeysMap() map[string][]string {
	if p.headKeys == nil {
		p.headKeys = map[string][]string{}
	}
	return p.headKeys
}

// keepHeadKeys records the objects an overlay renders on head (its
// inventory's key list, not a copy); the caller holds p.mu.
func (p *planner) keepHeadKeys(overlay string, h inventorydiff.Side) {
	if h.Err != nil || h.Inventory == nil || len(h.Inventory.Keys) == 0 {
		return
	}
	p.headKeysMap()[overlay] = h.Inventory.Keys
}

// clusters are which overlays head deploys to one cluster: .kplan.yaml's
// targets by environment, the engines' targets (Flux, Argo CD) by the
// cluster applying them, and the overlays the webhook's configuration
// deploys (Options.DeployedTo) by cluster. Discovered overlays no one of
// them names are not known to meet anywhere.
func (p *planner) clusters(head *side) overlap.Clusters {
	c := overlap.Clusters{Environments: map[string][]string{}}
	if head.targets != nil {
		c.Targets = true
		for _, t := range head.targets.Targets {
			c.Environments[t.Overlay] = append(c.Environments[t.Overlay], t.Environment)
		}
	} else if len(p.modes) > 0 {
		c.Targets = true
		for _, m := range p.modes {
			m.clusters(&c)
		}
	}
	deployedTo := p.opts.DeployedTo
	if len(deployedTo) > 0 {
		// The webhook's clusters are named apart from .kplan.yaml's
		// environments (the webhook maps those to clusters in turn).
		c.Targets = true
		for overlay, cs := range deployedTo {
			for _, cl := range cs {
				c.Environments[overlay] = append(c.Environments[overlay], "webhook:"+cl)
			}
		}
	}
	if !c.Targets {
		return overlap.Clusters{}
	}
	return c
}

// notRendered are the overlays the plan did not render on head (the
// change cannot affect them), those of other shards included: what the
// findings across overlays render on head when the plan's overlays call
// for it.
func (p *planner) notRendered(head *side) []string {
	var out []string
	for i := range p.overlays {
		o := &p.overlays[i]
		if o.HeadInventory == nil && o.HeadErr == "" && o.Status == inventorydiff.Unchanged && o.HeadHash == "" && head.overlays[o.Path] && !p.isEngineTarget(o.Path) {
			out = append(out, o.Path)
		}
	}
	return append(out, p.elsewhere...)
}

// checkSharedInventories flags overlays that render the same inventory-id
// on head (overlap.Inventories): applying one prunes what the other
// applied. Only a change of some overlay's inventory can make such a
// pair, so the overlays the plan did not render are rendered (head only)
// just when one changed. A shard leaves the check to kplan merge, which
// runs it over every shard's overlays: it renders them when its own
// overlays call for it, as the unsharded plan does.
func (p *planner) checkSharedInventories(ctx context.Context, head *side) error {
	if !overlap.IDsChange(p.overlays) {
		return nil
	}
	ids, err := p.identities(ctx, head, p.notRendered(head), p.headKeysMap())
	if err != nil {
		return err
	}
	p.facts.IDs = ids
	if p.owned == nil {
		overlap.Inventories(p.overlays, ids, p.facts.Clusters)
	}
	return nil
}

// duplicates adds a duplicate-object finding to each overlay that the
// change makes render an object another overlay deploying to the same
// cluster renders (overlap.Duplicates). With targets (.kplan.yaml,
// Flux), the overlays the plan did not render are rendered on head for
// it (as for shared inventories), only those of an environment where an
// overlay adding objects deploys: the changed-only plan finds what the
// full plan finds. Without targets the overlay gets a note instead, from
// what is known (cachedKeys). With the rule off
// (.kplan.yaml), nothing is rendered for it. A shard leaves the check to
// kplan merge, as checkSharedInventories does.
func (p *planner) duplicates(ctx context.Context, head *side) error {
	if p.facts.NoDuplicates {
		return nil
	}
	adding := overlap.Adding(p.overlays)
	if len(adding) == 0 {
		return nil
	}
	keys := p.headKeysMap()
	var unknown []string
	for _, o := range p.notRendered(head) {
		if _, known := keys[o]; !known && slices.ContainsFunc(adding, func(a string) bool { return p.facts.Same(a, o) }) {
			unknown = append(unknown, o)
		}
	}
	if !p.facts.Targets {
		// Nothing says they meet in a cluster: the overlays adding
		// objects get a note naming the others, from what the plan
		// rendered and the render cache holds, never from rendering the
		// overlays the change cannot affect.
		p.cachedKeys(head, unknown, keys)
	} else if _, err := p.identities(ctx, head, unknown, keys); err != nil {
		return err
	}
	if p.owned == nil {
		overlap.Duplicates(p.overlays, keys, p.facts.Clusters)
	}
	return nil
}

// disabledRules are the danger rules .kplan.yaml turns off on both
// sides: a pull request cannot turn off the rules that flag it, and one
// that turns a rule back on sees its findings.
func disabledRules(sides [2]*side) map[string]bool {
	off := map[string]bool{}
	for _, id := range sides[0].disabled {
		if slices.Contains(sides[1].disabled, id) {
			off[id] = true
		}
	}
	return off
}

// cachedKeys adds to keys the head objects of the overlays the render
// cache holds (by the content their closures read, which the change did
// not touch: a push to the base branch stored them); the others stay
// unknown, and the notes name what is known.
func (p *planner) cachedKeys(head *side, overlays []string, keys map[string][]string) {
	if p.cache == nil {
		return
	}
	for _, o := range overlays {
		c := head.closures.Overlay(o)
		if !c.Bounded() {
			continue
		}
		e, ok := p.cache.Get(p.cacheKey(head.s, c))
		if !ok || e.Err != nil {
			continue
		}
		sd := p.safely(head, o, func() inventorydiff.Side { return p.toSide(head, o, e.Objects, nil) })
		if sd.Err == nil && sd.Inventory != nil {
			keys[o] = sd.Inventory.Keys
			p.stats.CacheHits++
		}
	}
}
