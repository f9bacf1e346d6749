package deploy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/inventory"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// objectInfo is how cli-utils names the inventory object i.
func objectInfo(i kinv.Identity) *inventory.SingleObjectInfo {
	return inventory.NewSingleObjectInfo(inventory.ID(i.ID), types.NamespacedName{Namespace: i.Namespace, Name: i.Name})
}

// inventoryOf reads an inventory object's identity.
func inventoryOf(obj *unstructured.Unstructured) kinv.Identity {
	// One rule for plan and apply: the plan names inventories the same way.
	return kinv.IdentityOf(obj.GetKind(), obj.GetName(), obj.GetNamespace(), obj.GetLabels(), DefaultNamespace)
}

// isInventoryObject reports whether a rendered object is an inventory:
// any ResourceGroup, or a ConfigMap carrying the inventory-id label.
func isInventoryObject(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return kinv.IsInventory(gvk.Group, gvk.Kind, obj.GetLabels())
}

// NoInventoryError says the render holds no inventory object.
type NoInventoryError struct {
	Dir        string
	HasKptfile bool // a Kptfile with an inventory section exists
}

func (e *NoInventoryError) Error() string {
	if e.HasKptfile {
		return fmt.Sprintf("%s renders no ResourceGroup, but its Kptfile has an inventory: run `kplan migrate %s` to convert it", e.Dir, e.Dir)
	}
	return fmt.Sprintf("%s renders no inventory object: run `kplan init %s` to create resourcegroup.yaml, or name one with --rg-file", e.Dir, e.Dir)
}

// MultipleInventoriesError lists every inventory object found.
type MultipleInventoriesError struct {
	Found []kinv.Identity
}

func (e *MultipleInventoriesError) Error() string {
	var names []string
	for _, i := range e.Found {
		names = append(names, i.String())
	}
	return fmt.Sprintf("exactly one inventory object is allowed per apply, found %d: %s", len(e.Found), strings.Join(names, "; "))
}

// SplitInventory separates the one inventory object from the objects to
// apply (seeds/002_96cdce1014c23446.md: exactly one ResourceGroup).
func SplitInventory(objs []*unstructured.Unstructured) (*unstructured.Unstructured, []*unstructured.Unstructured, error) {
	var invs []*unstructured.Unstructured
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if isInventoryObject(o) {
			invs = append(invs, o)
		} else {
			rest = append(rest, o)
		}
	}
	switch len(invs) {
	case 0:
		return nil, rest, &NoInventoryError{}
	case 1:
		return invs[0], rest, nil
	default:
		e := &MultipleInventoriesError{}
		for _, i := range invs {
			e.Found = append(e.Found, inventoryOf(i))
		}
		return nil, nil, e
	}
}

// InventoryOf reads an inventory object's identity: kind, namespace, name
// and inventory-id.
func InventoryOf(obj *unstructured.Unstructured) kinv.Identity { return inventoryOf(obj) }
