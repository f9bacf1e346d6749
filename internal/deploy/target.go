package deploy

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/declared"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
)

// Target is the inventory and objects of one rendered overlay.
type Target struct {
	Inventory *unstructured.Unstructured
	Objects   []*unstructured.Unstructured
}

// TargetOptions say where an overlay's inventory comes from besides what
// it renders.
type TargetOptions struct {
	// Inventory, if set, is the inventory whatever the overlay renders
	// (the webhook configuration's override); rendered inventory objects
	// are dropped.
	Inventory *kinv.Identity
	// RGFile is the overlay's ResourceGroup file ("" is
	// resourcegroup.yaml).
	RGFile string
	// RGFileExplicit says the user named the file (--rg-file): it then must
	// be the only inventory. Otherwise the file is used only when the
	// render has no inventory (an overlay that lists it under resources
	// renders it already).
	RGFileExplicit bool
	// HasKptfile says the overlay's Kptfile has an inventory to migrate.
	HasKptfile bool
	// Namespace is the target's namespace: an inventory rendered without
	// one goes there, like every namespaced object ("" is "default").
	Namespace string
}

// NewTarget turns a rendered overlay into what an apply takes, for `kplan
// apply` and the webhook alike: its objects and the one inventory they
// are recorded in. The inventory is the configured one (opts.Inventory),
// else the one object the overlay renders, else declared.Object's: its
// ResourceGroup file, else its seed inventory: directive. files reads the
// overlay's ResourceGroup file; nil reads none.
func NewTarget(r render.Result, files declared.Files, opts TargetOptions) (*Target, error) {
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
	var (
		inv  *unstructured.Unstructured
		rest []*unstructured.Unstructured
		err  error
	)
	switch rendersOne := slices.ContainsFunc(objs, isInventoryObject); {
	case opts.Inventory != nil:
		rest = slices.DeleteFunc(objs, isInventoryObject)
		inv, err = declared.InventoryObject(*opts.Inventory)
	case rendersOne && opts.RGFileExplicit:
		// The named file must be the only inventory: with it among the
		// objects, SplitInventory lists every one found.
		rg, rerr := declared.RGFile(r.Path, files, opts.RGFile)
		if rerr != nil {
			return nil, rerr
		}
		if rg != nil {
			objs = append(objs, rg)
		}
		inv, rest, err = SplitInventory(objs)
	case rendersOne:
		inv, rest, err = SplitInventory(objs)
	default:
		rest = objs
		inv, err = declared.Object(r, files, declared.Options{Inventory: opts.Inventory, RGFile: opts.RGFile, Namespace: opts.Namespace})
		if err == nil && inv == nil {
			err = &NoInventoryError{Dir: r.Path, HasKptfile: opts.HasKptfile}
		}
	}
	if err != nil {
		return nil, err
	}
	if inv.GetNamespace() == "" {
		inv.SetNamespace(cmp.Or(opts.Namespace, DefaultNamespace))
	}
	return &Target{Inventory: inv, Objects: rest}, nil
}
