package deploy

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
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

// Files reads a file of an overlay by its path relative to the overlay's
// directory; an error wrapping fs.ErrNotExist says there is none.
type Files func(name string) ([]byte, error)

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
// else the one object the overlay renders, else DeclaredInventory's: its
// ResourceGroup file, else its seed inventory: directive. files reads the
// overlay's ResourceGroup file; nil reads none.
func NewTarget(r render.Result, files Files, opts TargetOptions) (*Target, error) {
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
		inv, err = InventoryObject(*opts.Inventory)
	case rendersOne && opts.RGFileExplicit:
		// The named file must be the only inventory: with it among the
		// objects, SplitInventory lists every one found.
		rg, rerr := rgFile(r.Path, files, opts)
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
		inv, err = declared(r, files, opts)
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

// DeclaredInventory names the inventory an overlay that renders none is
// applied with (NewTarget's rule, for the planner to name the same one):
// the configured one, else its ResourceGroup file, else its seed
// inventory: directive; nil for none. Only r's Path and Inventory
// directive are read, not its objects.
func DeclaredInventory(r render.Result, files Files, opts TargetOptions) (*kinv.Identity, error) {
	inv, err := declared(r, files, opts)
	if err != nil || inv == nil {
		return nil, err
	}
	id := kinv.IdentityOf(inv.GetKind(), inv.GetName(), inv.GetNamespace(), inv.GetLabels(), cmp.Or(opts.Namespace, DefaultNamespace))
	return &id, nil
}

// Planned is the inventory a plan computes for an overlay's render, and
// the one whose Digest a deploy compares with the plan reviewed: the
// rendered objects, namespaced ones without a namespace in namespace,
// recorded in the inventory objects the render holds or else in the one
// DeclaredInventory names. The planner and the webhook both call it, so
// that the same render gives the same digest.
func Planned(r render.Result, files Files, namespace string) (*kinv.Inventory, error) {
	inv, err := kinv.New(r.Objects, kinv.Options{Namespace: namespace, Scope: render.NamespaceScoped})
	if err != nil {
		return nil, err
	}
	if len(inv.Inventories) == 0 {
		id, err := DeclaredInventory(r, files, TargetOptions{Namespace: namespace})
		if err != nil {
			return nil, err
		}
		if id != nil {
			inv.Inventories = []kinv.Identity{*id}
		}
	}
	return inv, nil
}

// declared is DeclaredInventory's object.
func declared(r render.Result, files Files, opts TargetOptions) (*unstructured.Unstructured, error) {
	if opts.Inventory != nil {
		return InventoryObject(*opts.Inventory)
	}
	rg, err := rgFile(r.Path, files, opts)
	if err != nil || rg != nil {
		return rg, err
	}
	if d := r.Inventory; d != nil {
		if d.Type != "" && d.Type != configMapKind {
			return nil, fmt.Errorf("%s: inventory type %q: only ConfigMap is supported", r.Path, d.Type)
		}
		return ConfigMapInventory(d.ConfigMap.Name, cmp.Or(d.ConfigMap.Namespace, opts.Namespace), ""), nil
	}
	return nil, nil
}

// rgFile reads and parses the overlay's ResourceGroup file; nil when
// there is none.
func rgFile(dir string, files Files, opts TargetOptions) (*unstructured.Unstructured, error) {
	if files == nil {
		return nil, nil
	}
	name := cmp.Or(opts.RGFile, resourcegroup.DefaultFile)
	data, err := files(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ResourceGroup file %s of %s: %w", name, dir, err)
	}
	var rg unstructured.Unstructured
	if err := sigsyaml.Unmarshal(data, &rg.Object); err != nil || rg.GetKind() != resourcegroup.GVK.Kind {
		return nil, fmt.Errorf("the ResourceGroup file %s of %s is not a ResourceGroup (%v)", name, dir, err)
	}
	return &rg, nil
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
