package inventory

import "strings"

// Backend is a kind of object cli-utils can record an apply's objects in.
// Everything that needs to know the inventory kinds (recognising one in a
// render, validating a configured kind, making an empty one, finding one
// in a cluster) reads this table, so adding a kind is one row.
type Backend struct {
	Group, Version, Kind string
	Resource             string // plural, for dynamic clients
	// Labelled: an object of this kind is an inventory only when it
	// carries InventoryIDLabel (a ConfigMap usually is not one).
	Labelled bool
}

// APIVersion is the backend's group/version.
func (b Backend) APIVersion() string {
	if b.Group == "" {
		return b.Version
	}
	return b.Group + "/" + b.Version
}

// Backends lists the inventory kinds kplan applies through: a kpt
// ResourceGroup (the default, seeds/002_96cdce1014c23446.md) and a
// cli-utils ConfigMap (the seed's inventory: directive).
func Backends() []Backend {
	return []Backend{
		{Group: "kpt.dev", Version: "v1alpha1", Kind: "ResourceGroup", Resource: "resourcegroups"},
		{Group: "", Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Labelled: true},
	}
}

// DefaultBackend is the kind an inventory has when none is named.
const DefaultBackend = "ResourceGroup"

// ResourceGroupFile is the file an overlay declares its ResourceGroup in
// (seeds/002_96cdce1014c23446.md).
const ResourceGroupFile = "resourcegroup.yaml"

// BackendOf finds the backend of kind ("" is DefaultBackend).
func BackendOf(kind string) (Backend, bool) {
	if kind == "" {
		kind = DefaultBackend
	}
	for _, b := range Backends() {
		if b.Kind == kind {
			return b, true
		}
	}
	return Backend{}, false
}

// BackendKinds names the kinds, for messages: "ResourceGroup or ConfigMap".
func BackendKinds() string {
	var kinds []string
	for _, b := range Backends() {
		kinds = append(kinds, b.Kind)
	}
	return strings.Join(kinds, " or ")
}

// IsInventory reports whether an object of group and kind with labels is
// an inventory object.
func IsInventory(group, kind string, labels map[string]string) bool {
	for _, b := range Backends() {
		if b.Group == group && b.Kind == kind {
			return !b.Labelled || labels[InventoryIDLabel] != ""
		}
	}
	return false
}
