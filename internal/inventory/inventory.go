// Package inventory computes what an overlay's render puts in the cluster:
// the object keys, who refers to whom, and the inventory hash, in the
// format of seeds/000_0a72809845e5c0c8.md.
package inventory

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/hasher"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Annotations of the inventory ConfigMap (seeds/000_0a72809845e5c0c8.md).
const (
	InventoryAnnotation     = "kustomize.config.k8s.io/Inventory"
	InventoryHashAnnotation = "kustomize.config.k8s.io/InventoryHash"
)

// ID names one object. Field order is the JSON order of the seed.
type ID struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Key is the seed's object key: group_version_kind|namespace|name, with
// "~G" for the core group ("~V", "~K" for a missing version or kind). The
// namespace part is metadata.namespace as rendered, empty for objects
// without one (cluster-scoped objects).
func (id ID) Key() string {
	g, v, k := id.Group, id.Version, id.Kind
	if g == "" {
		g = "~G"
	}
	if v == "" {
		v = "~V"
	}
	if k == "" {
		k = "~K"
	}
	return g + "_" + v + "_" + k + "|" + id.Namespace + "|" + id.Name
}

// ParseKey is the inverse of Key.
func ParseKey(key string) (ID, error) {
	parts := strings.SplitN(key, "|", 3)
	if len(parts) != 3 {
		return ID{}, fmt.Errorf("object key %q: want group_version_kind|namespace|name", key)
	}
	gvk := strings.Split(parts[0], "_")
	if len(gvk) < 3 {
		return ID{}, fmt.Errorf("object key %q: want group_version_kind before the first |", key)
	}
	// Groups may not contain "_" but kinds never do either; take the
	// last two fields as version and kind.
	id := ID{
		Group:     strings.Join(gvk[:len(gvk)-2], "_"),
		Version:   gvk[len(gvk)-2],
		Kind:      gvk[len(gvk)-1],
		Namespace: parts[1],
		Name:      parts[2],
	}
	for _, f := range []*string{&id.Group, &id.Version, &id.Kind} {
		if strings.HasPrefix(*f, "~") {
			*f = ""
		}
	}
	return id, nil
}

// IDOf reads an object's ID from its apiVersion, kind and metadata.
func IDOf(n *yaml.RNode) ID {
	group, version := "", n.GetApiVersion()
	if i := strings.LastIndex(version, "/"); i >= 0 {
		group, version = version[:i], version[i+1:]
	}
	return ID{Group: group, Version: version, Kind: n.GetKind(), Name: n.GetName(), Namespace: n.GetNamespace()}
}

// Object is one rendered object with its identity.
type Object struct {
	ID   ID
	Key  string
	Node *yaml.RNode
}

// Inventory is the set of objects one overlay produces.
type Inventory struct {
	// Objects by key.
	Objects map[string]*Object
	// Keys sorted, the list the hash is computed from.
	Keys []string
	// Referrers of each key (nil when nothing refers to it).
	Referrers map[string][]ID
	// Hash of Keys, as the seed's InventoryHash annotation.
	Hash string
}

// New builds the inventory of rendered objects. Duplicate IDs, which
// kustomize itself rejects, are an error here too. An inventory object the
// overlay renders (a ResourceGroup, or a ConfigMap with the inventory-id
// label) records the others and is not one of them, as the seed's
// inventory ConfigMap is not in its own key list.
func New(nodes []*yaml.RNode) (*Inventory, error) {
	inv := &Inventory{Objects: map[string]*Object{}, Referrers: map[string][]ID{}}
	for _, n := range nodes {
		if IsInventoryObject(n) {
			continue
		}
		o := &Object{ID: IDOf(n), Node: n}
		o.Key = o.ID.Key()
		if _, dup := inv.Objects[o.Key]; dup {
			return nil, fmt.Errorf("object %s is rendered twice", o.Key)
		}
		inv.Objects[o.Key] = o
		inv.Keys = append(inv.Keys, o.Key)
	}
	slices.Sort(inv.Keys)
	inv.Hash = Hash(inv.Keys)
	inv.Referrers = referrers(inv)
	return inv, nil
}

// InventoryIDLabel marks a cli-utils inventory object.
const InventoryIDLabel = "cli-utils.sigs.k8s.io/inventory-id"

// IsInventoryObject reports whether a rendered object is an inventory: a
// kpt ResourceGroup (seeds/002_96cdce1014c23446.md) or a cli-utils
// ConfigMap inventory.
func IsInventoryObject(n *yaml.RNode) bool {
	id := IDOf(n)
	return IsInventory(id.Group, id.Kind, n.GetLabels())
}

// IsInventory is IsInventoryObject on an object's group, kind and labels.
func IsInventory(group, kind string, labels map[string]string) bool {
	switch {
	case group == "kpt.dev" && kind == "ResourceGroup":
		return true
	case group == "" && kind == "ConfigMap":
		return labels[InventoryIDLabel] != ""
	}
	return false
}

// Hash is the seed's InventoryHash of a key list: kustomize's
// SortArrayAndComputeHash, so that kplan and the seed agree.
func Hash(keys []string) string {
	sorted := slices.Clone(keys)
	h, err := hasher.SortArrayAndComputeHash(sorted)
	if err != nil {
		// Only fails on a hex string shorter than 10 characters, which
		// sha256 never produces.
		return ""
	}
	return h
}

// annotationJSON is the seed's Inventory annotation value.
type annotationJSON struct {
	Current map[string][]ID `json:"current"`
}

// AnnotationValue is the JSON of the seed's Inventory annotation.
func (inv *Inventory) AnnotationValue() string {
	cur := make(map[string][]ID, len(inv.Keys))
	for _, k := range inv.Keys {
		cur[k] = inv.Referrers[k] // nil marshals as null, as in the seed
	}
	data, _ := json.Marshal(annotationJSON{Current: cur}) // maps of strings always marshal
	return string(data)
}

// ConfigMap is the inventory object that the seed's inventory directive
// asks kustomize build to emit.
func (inv *Inventory) ConfigMap(name, namespace string) (*yaml.RNode, error) {
	cm, err := yaml.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: placeholder\n")
	if err != nil {
		return nil, err
	}
	if err := cm.SetName(name); err != nil {
		return nil, err
	}
	if namespace != "" {
		if err := cm.SetNamespace(namespace); err != nil {
			return nil, err
		}
	}
	err = cm.SetAnnotations(map[string]string{
		InventoryAnnotation:     inv.AnnotationValue(),
		InventoryHashAnnotation: inv.Hash,
	})
	return cm, err
}
