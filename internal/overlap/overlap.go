// Package overlap finds what the overlays of one plan collide on: an
// inventory-id two of them render on head (applying one prunes the
// other's objects) and an object two of them render for one cluster.
// The planner runs the checks over its overlays; kplan merge runs the
// same checks over every shard's, so a sharded plan flags what the
// unsharded one does.
package overlap

import (
	"maps"
	"slices"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Clusters say which overlays may deploy to one cluster.
type Clusters struct {
	// Targets says head's .kplan.yaml lists targets, or the plan's
	// targets are Flux Kustomizations (each of one cluster). Without
	// them kplan cannot tell clusters apart: any two overlays may share
	// one, and as many are alternative variants of one application.
	Targets bool `json:"targets,omitempty"`
	// Environments are the environments of each overlay's targets on
	// head (the webhook maps environments to clusters), or the cluster
	// of each Flux target.
	Environments map[string][]string `json:"environments,omitempty"`
}

// Same says whether overlays a and b may deploy to one cluster: their
// targets share an environment, or there are no targets (Duplicates
// then notes what they share rather than flagging it).
func (c Clusters) Same(a, b string) bool {
	if !c.Targets {
		return true
	}
	for _, e := range c.Environments[a] {
		if slices.Contains(c.Environments[b], e) {
			return true
		}
	}
	return false
}

// Facts are what the checks read besides the overlays' plans.
type Facts struct {
	Clusters
	// IDs are the head inventories of the overlays a plan did not render
	// (the change cannot affect them) and rendered on head for Check
	// alone, because some overlay's inventory-id changes (IDsChange).
	IDs map[string]*inventory.Identity `json:"ids,omitempty"`
	// Keys are the objects overlays render on head: every overlay the
	// plan rendered, and those rendered for Check alone, because an
	// overlay that may deploy where they do adds objects (Adding).
	Keys map[string][]string `json:"keys,omitempty"`
	// NoDuplicates says .kplan.yaml turns the duplicate-object rule off
	// (on both sides).
	NoDuplicates bool `json:"noDuplicates,omitempty"`
}

// Add takes in another share's facts of the same plan.
func (f *Facts) Add(g Facts) {
	f.Targets = f.Targets || g.Targets
	f.NoDuplicates = f.NoDuplicates || g.NoDuplicates
	f.Environments = union(f.Environments, g.Environments)
	f.IDs = union(f.IDs, g.IDs)
	f.Keys = union(f.Keys, g.Keys)
}

func union[V any](a, b map[string]V) map[string]V {
	if a == nil && len(b) > 0 {
		a = make(map[string]V, len(b))
	}
	maps.Copy(a, b)
	return a
}

// Check flags, on overlays, the inventories they share (Inventories) and
// the objects they duplicate (Duplicates, unless the rule is off).
func (f Facts) Check(overlays []inventorydiff.Overlay) {
	Inventories(overlays, f.IDs, f.Clusters)
	if !f.NoDuplicates {
		Duplicates(overlays, f.Keys, f.Clusters)
	}
}

// idChanged says the overlay's inventory-id on head is one it did not
// have on base (or the overlay is new): only such a change can make two
// overlays share one.
func idChanged(o *inventorydiff.Overlay) bool {
	if o.HeadInventory == nil {
		return false
	}
	return o.BaseInventory == nil || o.BaseInventory.ID != o.HeadInventory.ID || o.Status == inventorydiff.New || o.Status == inventorydiff.Moved
}

// IDsChange says whether some overlay's inventory-id changes: only then
// are overlays checked for shared inventories, and the head inventories
// of the overlays a plan did not render are needed (Facts.IDs).
func IDsChange(overlays []inventorydiff.Overlay) bool {
	for i := range overlays {
		if idChanged(&overlays[i]) {
			return true
		}
	}
	return false
}

// Inventories flags the overlays that render the same inventory-id on
// head for one cluster, when some overlay's inventory-id changes:
// SharedWith names the others, SharedBefore says none of them changed its
// inventory-id. ids are the head inventories of overlays whose plan has
// none (not rendered); an overlay found sharing one gets it as its
// HeadInventory.
func Inventories(overlays []inventorydiff.Overlay, ids map[string]*inventory.Identity, c Clusters) {
	if !IDsChange(overlays) {
		return
	}
	// Before any HeadInventory is filled in from ids: an overlay not
	// rendered is one the change cannot affect.
	changed := make([]bool, len(overlays))
	byID := map[string][]int{}
	for i := range overlays {
		o := &overlays[i]
		changed[i] = idChanged(o)
		id := o.HeadInventory
		if id == nil {
			id = ids[o.Path]
		}
		if id != nil {
			byID[id.ID] = append(byID[id.ID], i)
		}
	}
	for _, group := range byID {
		for _, i := range group {
			o := &overlays[i]
			before := !changed[i]
			for _, j := range group {
				if j != i && c.Same(o.Path, overlays[j].Path) {
					o.SharedWith = append(o.SharedWith, overlays[j].Path)
					before = before && !changed[j]
				}
			}
			if len(o.SharedWith) > 0 {
				slices.Sort(o.SharedWith)
				o.SharedBefore = before
				if o.HeadInventory == nil {
					o.HeadInventory = ids[o.Path]
				}
			}
		}
	}
}

// Adding are the overlays that add objects: Duplicates needs the head
// objects (Facts.Keys) of every overlay that may deploy where one of
// them does.
func Adding(overlays []inventorydiff.Overlay) []string {
	var out []string
	for i := range overlays {
		if len(overlays[i].Added) > 0 {
			out = append(out, overlays[i].Path)
		}
	}
	return out
}

// Duplicates adds a duplicate-object finding to each overlay that the
// change makes render an object (it adds it) that another overlay
// deploying to the same cluster renders on head (keys), unless the
// change adds it to that one too: alternative installs sharing a base
// that gains an object are not flagged, nor two overlays the change adds
// together. Overlays sharing an inventory are flagged for that already.
// Without targets (c.Targets false) nothing says the overlays meet in a
// cluster: the overlay gets a note naming the others (kustomize variants,
// most often), not a finding.
func Duplicates(overlays []inventorydiff.Overlay, keys map[string][]string, c Clusters) {
	if len(Adding(overlays)) == 0 {
		return
	}
	adds := map[string]map[string]bool{}
	for i := range overlays {
		for _, k := range overlays[i].Added {
			if id, err := inventory.ParseKey(k); err == nil {
				if adds[overlays[i].Path] == nil {
					adds[overlays[i].Path] = map[string]bool{}
				}
				adds[overlays[i].Path][id.Ref()] = true
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
	for i := range overlays {
		o := &overlays[i]
		for _, k := range o.Added {
			id, err := inventory.ParseKey(k)
			if err != nil {
				continue
			}
			var others []string
			for _, other := range byRef[id.Ref()] {
				if other != o.Path && !adds[other][id.Ref()] && !slices.Contains(o.SharedWith, other) && c.Same(o.Path, other) {
					others = append(others, other)
				}
			}
			switch {
			case len(others) == 0:
			case c.Targets:
				slices.Sort(others)
				o.Dangerous = append(o.Dangerous, danger.DuplicateFinding(k, others))
			default:
				slices.Sort(others)
				o.Notes = append(o.Notes, danger.VariantNoteText(k, others))
			}
		}
	}
}
