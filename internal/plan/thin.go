package plan

import (
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// thin replaces each object that is identical on both sides with an
// empty one, before the sides are compared. The comparison reports such
// objects unchanged either way, but it converts every object it compares
// to maps first, which on a large plan is a good part of its CPU; an
// identity check is much cheaper. Objects that differ, or exist on one
// side only, are left as they are.
func thin(base, head *inventory.ObjectSet) {
	if base == nil || head == nil {
		return
	}
	for key, b := range base.Objects {
		h, ok := head.Objects[key]
		if !ok || !sameNode(b.Node.YNode(), h.Node.YNode()) {
			continue
		}
		empty := yaml.NewMapRNode(nil)
		base.Objects[key] = &inventory.Object{ID: b.ID, Key: key, Node: empty}
		head.Objects[key] = &inventory.Object{ID: h.ID, Key: key, Node: empty}
	}
}

// sameNode reports whether two YAML trees are identical, style included.
func sameNode(a, b *yaml.Node) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value ||
		a.Style != b.Style || len(a.Content) != len(b.Content) || a.Kind == yaml.AliasNode {
		return false
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}
