package deploy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/object"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// replaceInventory refuses an apply that would prune every object its
// inventory holds while it adds others (ReplaceInventoryError), unless
// the apply prunes nothing or AllowReplaceInventory.
type replaceInventory struct{}

func (replaceInventory) Name() string { return "replace-inventory" }

func (replaceInventory) Check(in CheckInput) error {
	if in.Options.NoPrune || in.Options.AllowReplaceInventory {
		return nil
	}
	return checkReplace(in.Inventory, in.Previous, in.Objects)
}

// ReplaceInventoryError refuses an apply with the signature of a copied
// inventory: it would prune every object the inventory held while it
// adds others. That is what applying `cp -r staging prod` with staging's
// resourcegroup.yaml does — it deletes all of staging.
type ReplaceInventoryError struct {
	Inventory kinv.Identity
	// Pruned lists what the apply would have pruned ("Kind namespace/name"),
	// cluster-scoped objects first; Added counts the objects the inventory does not hold yet.
	Pruned []string
	Added  int
}

// maxListed bounds the objects an error names; the count says the rest.
const maxListed = 20

func (e *ReplaceInventoryError) Error() string {
	var b strings.Builder
	// The consequence first: a commit status shows 140 characters.
	fmt.Fprintf(&b, "refusing to apply: it would prune all %d objects %s holds in the cluster (this render has none of them) and add %d others — the signature of an overlay copied with its inventory (cp -r staging prod). It would have pruned:",
		len(e.Pruned), e.Inventory, e.Added)
	for i, k := range e.Pruned {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.Pruned)-maxListed)
			break
		}
		b.WriteString("\n  " + k)
	}
	b.WriteString("\nGive this overlay its own inventory (delete its resourcegroup.yaml and run `kplan init <overlay>`), or, if it really replaces everything that inventory holds, allow it: `kplan apply --allow-replace-inventory`, or `allowReplaceInventory: true` on the webhook target")
	return b.String()
}

// checkReplace returns a ReplaceInventoryError when prev (the inventory's
// object list in the cluster) is not empty, the render shares none of it
// and adds objects.
func checkReplace(inv kinv.Identity, prev []object.ObjMetadata, objs []*unstructured.Unstructured) error {
	if len(prev) == 0 {
		return nil
	}
	rendered := map[object.ObjMetadata]bool{}
	for _, o := range objs {
		rendered[object.UnstructuredToObjMetadata(o)] = true
	}
	added := len(rendered)
	for _, id := range prev {
		if rendered[id] {
			return nil // the render keeps something of the inventory: an ordinary change
		}
	}
	if added == 0 {
		return nil
	}
	e := &ReplaceInventoryError{Inventory: inv, Added: added}
	// Cluster-scoped objects (Namespaces, CRDs) first: their prune takes
	// everything in them along.
	ids := slices.Clone(prev)
	slices.SortFunc(ids, func(a, b object.ObjMetadata) int {
		if (a.Namespace == "") != (b.Namespace == "") {
			return cmp.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(describeID(a), describeID(b))
	})
	for _, id := range ids {
		e.Pruned = append(e.Pruned, describeID(id))
	}
	return e
}

// describeID is "Kind namespace/name", "Kind name" when cluster-scoped,
// with ".group" after the kind outside the core group, as kubectl writes.
func describeID(id object.ObjMetadata) string {
	k := id.GroupKind.Kind
	if id.GroupKind.Group != "" {
		k += "." + id.GroupKind.Group
	}
	if id.Namespace == "" {
		return k + " " + id.Name
	}
	return k + " " + id.Namespace + "/" + id.Name
}
