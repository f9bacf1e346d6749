// Package declared names the inventory an overlay's objects are recorded
// in when its render holds no inventory object: the configured one, else
// the overlay's ResourceGroup file, else its seed inventory: directive.
// It takes rendered objects and the directive, and nothing of a cluster,
// so that both the plan (which names the inventory a merge applies
// through) and the deploy (which applies through it) read the same rule
// without the plan linking the applier.
package declared

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
)

// DefaultNamespace is where namespaced objects rendered without a
// namespace go when the target names none, as kubectl sends them.
const DefaultNamespace = "default"

// Files reads a file of an overlay by its path relative to the overlay's
// directory; an error wrapping fs.ErrNotExist says there is none.
type Files func(name string) ([]byte, error)

// Options say where an overlay's inventory comes from besides what it
// renders.
type Options struct {
	// Inventory, if set, is the inventory whatever the overlay renders
	// (the webhook configuration's override).
	Inventory *kinv.Identity
	// RGFile is the overlay's ResourceGroup file ("" is
	// kinv.ResourceGroupFile).
	RGFile string
	// Namespace is the target's namespace: an inventory declared without
	// one goes there ("" is DefaultNamespace).
	Namespace string
}

// Object is the inventory object an overlay that renders none is applied
// with: the configured one, else its ResourceGroup file, else its seed
// inventory: directive; nil for none. Only r's Path and Inventory
// directive are read, not its objects.
func Object(r render.Result, files Files, opts Options) (*unstructured.Unstructured, error) {
	if opts.Inventory != nil {
		return InventoryObject(*opts.Inventory)
	}
	rg, err := RGFile(r.Path, files, opts.RGFile)
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

// Identity names Object's inventory; nil for none.
func Identity(r render.Result, files Files, opts Options) (*kinv.Identity, error) {
	inv, err := Object(r, files, opts)
	if err != nil || inv == nil {
		return nil, err
	}
	id := kinv.IdentityOf(inv.GetKind(), inv.GetName(), inv.GetNamespace(), inv.GetLabels(), cmp.Or(opts.Namespace, DefaultNamespace))
	return &id, nil
}

// Planned is the object set a plan computes for an overlay's render, and
// the one whose Digest a deploy compares with the plan reviewed: the
// rendered objects, namespaced ones without a namespace in namespace,
// recorded in the inventory objects the render holds or else in the one
// Identity names. The planner and the webhook both call it, so that the
// same render gives the same digest.
func Planned(r render.Result, files Files, namespace string) (*kinv.ObjectSet, error) {
	return PlannedScoped(r, files, namespace, render.NamespaceScoped)
}

// PlannedScoped is Planned with the kinds' scopes from scope: for an
// engine whose targets' kinds are defined elsewhere than in their own
// render (an Argo CD Application of custom resources whose CRDs another
// Application syncs).
func PlannedScoped(r render.Result, files Files, namespace string, scope kinv.Scope) (*kinv.ObjectSet, error) {
	set, err := kinv.New(r.Objects, kinv.Options{Namespace: namespace, Scope: scope})
	if err != nil {
		return nil, err
	}
	if len(set.Inventories) == 0 {
		id, err := Identity(r, files, Options{Namespace: namespace})
		if err != nil {
			return nil, err
		}
		if id != nil {
			set.Inventories = []kinv.Identity{*id}
		}
	}
	return set, nil
}

// RGFile reads and parses the overlay's ResourceGroup file name ("" is
// kinv.ResourceGroupFile) in dir; nil when there is none or files is nil.
func RGFile(dir string, files Files, name string) (*unstructured.Unstructured, error) {
	if files == nil {
		return nil, nil
	}
	name = cmp.Or(name, kinv.ResourceGroupFile)
	data, err := files(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ResourceGroup file %s of %s: %w", name, dir, err)
	}
	var rg unstructured.Unstructured
	if err := sigsyaml.Unmarshal(data, &rg.Object); err != nil || rg.GetKind() != kinv.DefaultBackend {
		return nil, fmt.Errorf("the ResourceGroup file %s of %s is not a ResourceGroup (%v)", name, dir, err)
	}
	return &rg, nil
}

// InventoryObject is an empty inventory object named by id, of one of
// the inventory backends (kinv.Backends; "" is the default). A backend
// whose objects are inventories only when labelled (ConfigMap) always
// carries the inventory-id label, default <name>-<namespace>; the others
// carry it when id names one.
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
		u.SetLabels(map[string]string{kinv.InventoryIDLabel: id.ID})
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
