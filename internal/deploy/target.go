package deploy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/common"
	sigsyaml "sigs.k8s.io/yaml"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/resourcegroup"
)

// Target is the inventory and objects of one rendered overlay.
type Target struct {
	Inventory *unstructured.Unstructured
	Objects   []*unstructured.Unstructured
}

// Source says where else an overlay's inventory may come from.
type Source struct {
	// RGFile is a ResourceGroup file's content (nil: none).
	RGFile []byte
	// RGFileExplicit says the user named the file (--rg-file): it then must
	// be the only inventory. Otherwise it is the overlay's default
	// resourcegroup.yaml, used only when the render has no inventory (an
	// overlay that lists it under resources renders it already).
	RGFileExplicit bool
	// HasKptfile says the overlay's Kptfile has an inventory to migrate.
	HasKptfile bool
	// Namespace is the target's namespace: an inventory rendered without
	// one goes there, like every namespaced object ("" is "default").
	Namespace string
}

// TargetOf picks the inventory of a rendered overlay: the one inventory
// object it renders, else the ResourceGroup file, else a ConfigMap
// inventory from the seed's inventory: directive.
func TargetOf(r render.Result, src Source) (*Target, error) {
	return targetOf(r, src, nil)
}

// TargetWithInventory uses inv as the inventory whatever the overlay
// renders (the webhook config's inventory override); rendered inventory
// objects are dropped.
func TargetWithInventory(r render.Result, inv *unstructured.Unstructured) (*Target, error) {
	return targetOf(r, Source{}, inv)
}

func targetOf(r render.Result, src Source, override *unstructured.Unstructured) (*Target, error) {
	objs := make([]*unstructured.Unstructured, 0, len(r.Objects)+1)
	for _, n := range r.Objects {
		// Through JSON, so numbers become the int64 and float64 that
		// unstructured objects hold (kyaml's own maps hold int).
		data, err := n.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", r.Path, n.GetName(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", r.Path, n.GetName(), err)
		}
		objs = append(objs, u)
	}
	rendersOne := slices.ContainsFunc(objs, isInventoryObject)
	if src.RGFile != nil && (src.RGFileExplicit || !rendersOne) {
		var rg unstructured.Unstructured
		if err := sigsyaml.Unmarshal(src.RGFile, &rg.Object); err != nil || rg.GetKind() != resourcegroup.GVK.Kind {
			return nil, fmt.Errorf("the ResourceGroup file of %s is not a ResourceGroup (%v)", r.Path, err)
		}
		objs = append(objs, &rg)
	}
	inv, rest, err := SplitInventory(objs)
	if override != nil {
		var multi *MultipleInventoriesError
		if errors.As(err, &multi) {
			rest = rest[:0]
			for _, o := range objs {
				if !isInventoryObject(o) {
					rest = append(rest, o)
				}
			}
		}
		inv, err = override, nil
	}
	var none *NoInventoryError
	if errors.As(err, &none) && r.Inventory != nil {
		d := r.Inventory
		if d.Type != "" && d.Type != configMapKind {
			return nil, fmt.Errorf("%s: inventory type %q: only ConfigMap is supported", r.Path, d.Type)
		}
		inv = ConfigMapInventory(d.ConfigMap.Name, cmp.Or(d.ConfigMap.Namespace, src.Namespace), "")
		err = nil
	}
	if errors.As(err, &none) {
		none.Dir, none.HasKptfile = r.Path, src.HasKptfile
	}
	if err != nil {
		return nil, err
	}
	if inv.GetNamespace() == "" {
		inv.SetNamespace(cmp.Or(src.Namespace, DefaultNamespace))
	}
	return &Target{Inventory: inv, Objects: rest}, nil
}

// InventoryObject is an empty inventory object named by id, of one of
// the inventory backends (internal/inventory.Backends; "" is the
// default). A backend whose objects are inventories only when labelled
// (ConfigMap) always carries the inventory-id label, default
// <name>-<namespace>; the others carry it when id names one.
func InventoryObject(id kinv.Identity) (*unstructured.Unstructured, error) {
	b, ok := kinv.BackendOf(id.Kind)
	if !ok {
		return nil, fmt.Errorf("inventory %s: kind %q: want %s", id, id.Kind, kinv.BackendKinds())
	}
	ns := cmp.Or(id.Namespace, DefaultNamespace)
	if id.ID == "" && b.Labelled {
		id.ID = id.Name + "-" + ns
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(b.APIVersion())
	u.SetKind(b.Kind)
	u.SetName(id.Name)
	u.SetNamespace(ns)
	if id.ID != "" {
		u.SetLabels(map[string]string{common.InventoryLabel: id.ID})
	}
	return u, nil
}

// ConfigMapInventory is a cli-utils ConfigMap inventory object; id
// defaults to <name>-<namespace>.
func ConfigMapInventory(name, namespace, id string) *unstructured.Unstructured {
	u, _ := InventoryObject(kinv.Identity{Kind: configMapKind, Name: name, Namespace: namespace, ID: id}) // a backend of the table
	return u
}

// configMapKind is the backend of the seed's inventory directive.
const configMapKind = "ConfigMap"
