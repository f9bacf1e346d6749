package inventorydiff

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ChangedMask is how head shows a mask (Side.Masked) whose hidden value
// differs from base's: "(value from Secret ns/name key K, hidden,
// changed)", as a Secret's own values show "(hidden, changed)".
func ChangedMask(mask string) string { return strings.TrimSuffix(mask, ")") + ", changed)" }

// MarkMaskedChanges shows, in head's objects, each mask whose hidden
// value differs from the same mask's on base, as ChangedMask: the field
// then differs, and the comparison plans the object changed, without
// anything of the value. Head's objects are replaced by marked copies;
// call it after head's digest is taken, which holds no mark. Idempotent.
func MarkMaskedChanges(b, h Side) {
	if b.Masked == nil || h.Masked == nil || b.Inventory == nil || h.Inventory == nil {
		return
	}
	for ref, ho := range h.Inventory.Objects {
		bo, ok := b.Inventory.Objects[ref]
		if !ok || ho.Node == nil || bo.Node == nil {
			continue
		}
		hm := h.Masked(ho.Node)
		if len(hm) == 0 {
			continue
		}
		bm := b.Masked(bo.Node)
		var changed []string
		for mask, fp := range hm {
			if bfp, ok := bm[mask]; ok && bfp != fp {
				changed = append(changed, mask)
			}
		}
		if len(changed) == 0 {
			continue
		}
		pairs := make([]string, 0, 2*len(changed))
		for _, m := range changed {
			pairs = append(pairs, m, ChangedMask(m))
		}
		node := ho.Node.Copy()
		replaceScalars(node.YNode(), strings.NewReplacer(pairs...))
		marked := *ho
		marked.Node = node
		h.Inventory.Objects[ref] = &marked
	}
}

func replaceScalars(n *yaml.Node, r *strings.Replacer) {
	if n.Kind == yaml.ScalarNode {
		n.Value = r.Replace(n.Value)
		return
	}
	for _, c := range n.Content {
		replaceScalars(c, r)
	}
}
