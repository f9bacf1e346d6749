package plan

import (
	"context"
	"slices"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
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

// duplicates adds a duplicate-object finding to each overlay that the
// change makes render an object (it adds it) that another overlay
// deploying to the same cluster already renders (on head, not added by
// this change: alternative installs sharing a base that gains an object
// are not flagged, nor two overlays the change adds together). The overlays a
// changed-only plan did not render are rendered on head for it (as for
// shared inventories), only when the change adds an object: the
// changed-only plan finds what the full plan finds. With the rule off
// (.kplan.yaml), nothing is rendered for it.
func (p *planner) duplicates(ctx context.Context, head *side, off bool) error {
	defer func() { p.headKeys = nil }()
	if off {
		return nil // the rule is off: nothing is rendered for it
	}
	var adding []string
	for i := range p.overlays {
		if len(p.overlays[i].Added) > 0 {
			adding = append(adding, p.overlays[i].Path)
		}
	}
	if len(adding) == 0 {
		return nil
	}
	keys := p.headKeysMap()
	var unknown []string
	for i := range p.overlays {
		o := &p.overlays[i]
		if _, known := keys[o.Path]; known || o.HeadErr != "" || o.Status != inventorydiff.Unchanged || o.HeadHash != "" || !head.overlays[o.Path] {
			continue
		}
		if slices.ContainsFunc(adding, func(a string) bool { return sameCluster(head, a, o.Path) }) {
			unknown = append(unknown, o.Path)
		}
	}
	if _, err := p.identities(ctx, head, unknown, keys); err != nil {
		return err
	}
	// What each overlay adds: an object two overlays add together (a
	// base they share gained it) is not this change's collision; they
	// already render that base's objects alike.
	adds := map[string]map[string]bool{}
	for i := range p.overlays {
		for _, k := range p.overlays[i].Added {
			if id, err := inventory.ParseKey(k); err == nil {
				if adds[p.overlays[i].Path] == nil {
					adds[p.overlays[i].Path] = map[string]bool{}
				}
				adds[p.overlays[i].Path][id.Ref()] = true
			}
		}
	}
	byRef := map[string][]string{}
	for overlay, ks := range keys {
		for _, k := range ks {
			if id, err := inventory.ParseKey(k); err == nil {
				byRef[id.Ref()] = append(byRef[id.Ref()], overlay)
			}
		}
	}
	for i := range p.overlays {
		o := &p.overlays[i]
		for _, k := range o.Added {
			id, err := inventory.ParseKey(k)
			if err != nil {
				continue
			}
			var others []string
			for _, other := range byRef[id.Ref()] {
				// A shared inventory is already this overlay's problem.
				if other != o.Path && !adds[other][id.Ref()] && !slices.Contains(o.SharedWith, other) && sameCluster(head, o.Path, other) {
					others = append(others, other)
				}
			}
			if len(others) > 0 {
				slices.Sort(others)
				o.Dangerous = append(o.Dangerous, danger.DuplicateFinding(k, others))
			}
		}
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
