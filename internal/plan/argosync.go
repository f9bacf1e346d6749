package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/argocd"
	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// argoSync is what Argo CD's sync options do to one Application's plan:
// the objects it leaves in the cluster instead of pruning them (said in
// the target's notes), the protections the change removes (findings).
type argoSync struct {
	notes    []string
	findings []danger.Finding
	// ignore are its spec.ignoreDifferences as noise rules.
	ignore inventorydiff.IgnoreRules
}

// argoSyncRules makes the mode read, as each Application's sides are
// compared, what its sync options and ignoreDifferences do to its plan:
// the notes and findings (rule argocd-protection-removed) its plan gets,
// and the noise rules the plan counts.
func argoSyncRules(m *engineMode, res [2]*argocd.Result) {
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
}

// argoKeeps is the base side's Keeps of an Application: an object
// leaving it stays when Argo CD's sync options say so (argocd.Kept), and
// every object stays when the merge deletes an Application without the
// resources finalizer (its DeleteNotes say so). head is the Application
// after the merge, nil when the merge deletes it.
func argoKeeps(base, head *argocd.Target) func(*inventory.Object) bool {
	if head == nil && base != nil && !base.Cascades() {
		return func(*inventory.Object) bool { return true }
	}
	var app *argocd.Application
	if head != nil {
		app = head.Application
	}
	return func(o *inventory.Object) bool {
		return o != nil && argocd.Kept(o.Node.GetAnnotations(), app) != ""
	}
}

// syncEffects reads an Application's sides for what its sync options
// do: each object leaving it that Argo CD keeps or only prunes when
// something else syncs, and each prune or delete protection the change
// drops, the object's or the Application's. Removing a protection is a
// finding (rule argocd-protection-removed): nothing is deleted at this
// merge, but the next change that removes the object deletes it, and
// the reviewer of that change no longer sees it kept. Adding one deletes
// nothing and shows in the field diff.
func syncEffects(b, h inventorydiff.Side, bt, ht *argocd.Target) argoSync {
	var out argoSync
	if b.Inventory == nil {
		return out
	}
	var app *argocd.Application
	if ht != nil {
		app = ht.Application
	}
	orphaned := ht == nil && bt != nil && !bt.Cascades() // all stay; DeleteNotes say why
	for _, r := range b.Inventory.Refs {
		bo := b.Inventory.Objects[r]
		ann := bo.Node.GetAnnotations()
		var ho *inventory.Object
		if h.Inventory != nil {
			ho = h.Inventory.Objects[r]
		}
		if ho == nil {
			if orphaned {
				continue
			}
			if why := argocd.Kept(ann, app); why != "" {
				out.notes = append(out.notes, inventorydiff.Name(bo.Key)+" stays in the cluster: "+why)
			} else if argocd.IgnoresExtraneous(ann) {
				out.notes = append(out.notes, argocd.ExtraneousNote(inventorydiff.Name(bo.Key)))
			}
			continue
		}
		if gone := argocd.ProtectionRemoved(argocd.Protection(ann), argocd.Protection(ho.Node.GetAnnotations())); gone != "" {
			out.findings = append(out.findings, danger.Finding{Rule: danger.ArgoCDProtectionRemoved, Object: ho.Key,
				Reason: inventorydiff.Name(ho.Key) + " loses its Argo CD sync option " + gone + ": the next change that removes it from the Application deletes it"})
		}
	}
	if bt != nil && ht != nil {
		if gone := argocd.ProtectionRemoved(bt.AppProtection(), ht.AppProtection()); gone != "" {
			out.findings = append(out.findings, danger.Finding{Rule: danger.ArgoCDProtectionRemoved,
				Reason: "the Application drops its sync option " + gone + " (spec.syncPolicy.syncOptions): objects that leave it from now on are pruned"})
		}
	}
	slices.SortStableFunc(out.findings, func(a, b danger.Finding) int { return strings.Compare(a.Object, b.Object) })
	return out
}

// argoIgnore turns an Application's spec.ignoreDifferences into noise
// rules scoped to its target: each JSON pointer or jq expression hides,
// in each object it names, the field changes that are gone when both
// sides are compared without what it drops, as Argo CD's diff compares
// them. Like every rule they are counted and never hide adds, prunes,
// dangers or Secret data. notes say what could not be applied.
func argoIgnore(ctx context.Context, id string, b, h inventorydiff.Side, ht *argocd.Target) (inventorydiff.IgnoreRules, []string) {
	out := inventorydiff.IgnoreRules{Source: "Argo CD Application " + id + " spec.ignoreDifferences"}
	if ht == nil || b.Inventory == nil || h.Inventory == nil {
		return out, nil
	}
	rules, notes := ht.IgnoreRules()
	hid := false
	for _, r := range rules {
		sr := inventorydiff.ScopedRule{Rule: r.Text, Overlay: id, Hidden: map[string]map[string]bool{}}
		for _, ref := range h.Inventory.Refs {
			ho, bo := h.Inventory.Objects[ref], b.Inventory.Objects[ref]
			if bo == nil || !r.Matches(ho.ID.Group, ho.ID.Kind, ho.ID.Namespace, ho.ID.Name) {
				continue
			}
			bm, err1 := bo.Node.Map()
			hm, err2 := ho.Node.Map()
			if err1 != nil || err2 != nil {
				continue // unreadable: the diff shows it so
			}
			paths, ok, err := inventorydiff.HiddenPaths(bm, hm, func(m map[string]any) (map[string]any, error) { return r.Normalize(ctx, m) })
			switch {
			case err != nil:
				notes = append(notes, fmt.Sprintf("%s: %v; its fields are shown", inventorydiff.Name(ho.Key), err))
			case !ok:
				notes = append(notes, fmt.Sprintf("%s: %s removes a list item's key, so kplan cannot tell which changes it hides; they are shown", inventorydiff.Name(ho.Key), r.Text))
			case len(paths) > 0:
				sr.Hidden[ho.Key] = paths
				hid = true
			}
		}
		out.Scoped = append(out.Scoped, sr)
	}
	if hid && !ht.RespectsIgnoreDifferences() {
		notes = append(notes, "spec.ignoreDifferences hide changes from the diff of Argo CD, as from this plan; without the sync option RespectIgnoreDifferences=true a sync that something else starts still applies them")
	}
	return out, notes
}
