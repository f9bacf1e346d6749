// Package inventory computes what an overlay's render puts in the cluster:
// the object keys, who refers to whom, and the inventory hash, in the
// format of seeds/000_0a72809845e5c0c8.md.
package inventory

import (
	"crypto/sha256"
	"encoding/hex"
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

// Ref is an object's identity in the cluster: group, kind, namespace and
// name, as the API server and cli-utils match objects. The version is not
// part of it: autoscaling/v1 and autoscaling/v2 of one HPA are one object.
func (id ID) Ref() string {
	return id.Group + "|" + id.Kind + "|" + id.Namespace + "|" + id.Name
}

// Object is one rendered object with its identity.
type Object struct {
	ID  ID
	Key string // the seed key, version included
	// Node is the object as rendered; a namespace the plan gave it
	// (Defaulted) is in ID, not in Node.
	Node      *yaml.RNode
	Defaulted bool // ID.Namespace is the default namespace, not rendered
}

// ObjectSet is the set of objects one overlay renders, as a plan sees
// it: what an apply puts in the cluster, recorded in Inventories (the
// inventory objects; "inventory" alone names those, and this package).
type ObjectSet struct {
	// Objects by identity (ID.Ref).
	Objects map[string]*Object
	// Keys are the objects' seed keys, sorted: the list the hash is
	// computed from.
	Keys []string
	// Refs are the objects' identities, sorted.
	Refs []string
	// Referrers of each seed key (nil when nothing refers to it).
	Referrers map[string][]ID
	// Hash of Keys, as the seed's InventoryHash annotation.
	Hash string
	// Inventories are the inventory objects the overlay renders: what
	// an apply records the objects in (none, one, or an error to apply).
	Inventories []Identity
}

// Identity names an inventory object: what cli-utils uses to decide which
// objects an apply owns and may prune.
type Identity struct {
	Kind      string `json:"kind"` // ResourceGroup or ConfigMap
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ID is the cli-utils.sigs.k8s.io/inventory-id label, default
	// <name>-<namespace>.
	ID string `json:"id"`
}

func (i Identity) String() string {
	return fmt.Sprintf("%s %s/%s (inventory-id %s)", i.Kind, i.Namespace, i.Name, i.ID)
}

// IdentityOf names an inventory object; an empty namespace is namespace.
func IdentityOf(kind, name, ns string, labels map[string]string, namespace string) Identity {
	if ns == "" {
		ns = namespace
	}
	id := Identity{Kind: kind, Namespace: ns, Name: name, ID: labels[InventoryIDLabel]}
	if id.ID == "" {
		id.ID = name + "-" + ns
	}
	return id
}

// Scope says whether a kind is namespaced; known is false for kinds it
// does not know.
type Scope func(apiVersion, kind string) (namespaced, known bool)

// Options say how rendered objects land in the cluster.
type Options struct {
	// Namespace is where namespaced objects rendered without a namespace
	// go (the target's namespace); "" keeps them as rendered.
	Namespace string
	// Scope knows built-in kinds; kinds defined by a CustomResourceDefinition
	// in the same render are known from it. Unknown kinds are kept as
	// rendered.
	Scope Scope
}

// New builds the inventory of rendered objects. Two objects with one
// identity, which one apply cannot hold, are an error. An inventory object
// the overlay renders (a ResourceGroup, or a ConfigMap with the
// inventory-id label) records the others and is not one of them, as the
// seed's inventory ConfigMap is not in its own key list.
func New(nodes []*yaml.RNode, opts Options) (*ObjectSet, error) {
	inv := &ObjectSet{Objects: map[string]*Object{}, Referrers: map[string][]ID{}}
	scope := crdScopes(nodes)
	for _, n := range nodes {
		if IsInventoryObject(n) {
			inv.Inventories = append(inv.Inventories, IdentityOf(n.GetKind(), n.GetName(), n.GetNamespace(), n.GetLabels(), cmpOr(opts.Namespace, "default")))
			continue
		}
		o := &Object{ID: IDOf(n), Node: n}
		if o.ID.Namespace == "" && opts.Namespace != "" && namespaced(o.ID, n.GetApiVersion(), scope, opts.Scope) {
			o.ID.Namespace, o.Defaulted = opts.Namespace, true
		}
		o.Key = o.ID.Key()
		ref := o.ID.Ref()
		if prev, dup := inv.Objects[ref]; dup {
			return nil, fmt.Errorf("object %s is rendered twice (as %s and %s): one apply can hold it once", displayID(o.ID), prev.ID.Group+"/"+prev.ID.Version, o.ID.Group+"/"+o.ID.Version)
		}
		inv.Objects[ref] = o
		inv.Keys = append(inv.Keys, o.Key)
		inv.Refs = append(inv.Refs, ref)
	}
	slices.Sort(inv.Keys)
	slices.Sort(inv.Refs)
	inv.Hash = Hash(inv.Keys)
	inv.Referrers = referrers(inv)
	return inv, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func displayID(id ID) string {
	s := id.Kind + " " + id.Name
	if id.Namespace != "" {
		s += " (namespace " + id.Namespace + ")"
	}
	return s
}

// crdScopes reads the scope of the kinds defined by CRDs in a render, by
// group and kind.
func crdScopes(nodes []*yaml.RNode) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		if n.GetKind() != "CustomResourceDefinition" || !strings.HasPrefix(n.GetApiVersion(), "apiextensions.k8s.io/") {
			continue
		}
		group, _ := n.GetString("spec.group")
		kind, _ := n.GetString("spec.names.kind")
		scope, _ := n.GetString("spec.scope")
		if kind != "" {
			out[group+"|"+kind] = scope != "Cluster"
		}
	}
	return out
}

// CRDScope is the Scope the CustomResourceDefinitions among nodes define:
// their kinds known by group and kind, every other kind unknown. An
// engine whose targets' kinds are defined in other targets' files (an
// Argo CD Application of custom resources whose CRDs another syncs)
// scopes them with it.
func CRDScope(nodes []*yaml.RNode) Scope {
	crds := crdScopes(nodes)
	return func(apiVersion, kind string) (bool, bool) {
		group := ""
		if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
			group = apiVersion[:i]
		}
		ns, ok := crds[group+"|"+kind]
		return ns, ok
	}
}

func namespaced(id ID, apiVersion string, crds map[string]bool, scope Scope) bool {
	if ns, ok := crds[id.Group+"|"+id.Kind]; ok {
		return ns
	}
	if scope == nil {
		return false
	}
	ns, known := scope(apiVersion, id.Kind)
	return known && ns
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
func (inv *ObjectSet) AnnotationValue() string {
	cur := make(map[string][]ID, len(inv.Keys))
	for _, k := range inv.Keys {
		cur[k] = inv.Referrers[k] // nil marshals as null, as in the seed
	}
	data, _ := json.Marshal(annotationJSON{Current: cur}) // maps of strings always marshal
	return string(data)
}

// ConfigMap is the inventory object that the seed's inventory directive
// asks kustomize build to emit.
func (inv *ObjectSet) ConfigMap(name, namespace string) (*yaml.RNode, error) {
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

// Object returns the object with the seed key key, or nil.
func (inv *ObjectSet) Object(key string) *Object {
	id, err := ParseKey(key)
	if err != nil {
		return nil
	}
	o := inv.Objects[id.Ref()]
	if o == nil || o.Key != key {
		return nil
	}
	return o
}

// Identity is the one inventory the objects are recorded in; nil for
// none, an unknown inventory (nil Inventory), or several.
func (inv *ObjectSet) Identity() *Identity {
	if inv == nil || len(inv.Inventories) != 1 {
		return nil
	}
	id := inv.Inventories[0]
	return &id
}

// Digest names exactly what an apply of this inventory puts in the
// cluster: every object as rendered (canonical JSON, keys sorted) under
// its identity, namespace defaults included, and the inventory object
// that records them. It does not depend on render order, machine or
// run, so a plan and a later deploy of the same render agree on it.
func (inv *ObjectSet) Digest() (string, error) {
	h := sha256.New()
	for _, id := range inv.Inventories {
		fmt.Fprintf(h, "inventory %s %s %s %s\n", id.Kind, id.Namespace, id.Name, id.ID)
	}
	for _, ref := range inv.Refs {
		o := inv.Objects[ref]
		m, err := o.Node.Map()
		if err != nil {
			return "", fmt.Errorf("digest of %s: %w", displayID(o.ID), err)
		}
		// encoding/json sorts map keys: the same object always gives the
		// same bytes, whatever the YAML's order or style.
		data, err := json.Marshal(m)
		if err != nil {
			return "", fmt.Errorf("digest of %s: %w", displayID(o.ID), err)
		}
		fmt.Fprintf(h, "%s %d\n", o.Key, len(data))
		h.Write(data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
