// Package liveplan says what applying a render would do to a live cluster
// now: a server-side dry-run of apply and prune per object, compared with
// the live objects, drift from the last applied render, and the API
// server's own refusals as typed findings. It never writes to a cluster.
package liveplan

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// noiseAnnotations are set by servers and controllers, never by a render:
// a difference in them is not something apply would change.
var noiseAnnotations = map[string]bool{
	"kubectl.kubernetes.io/last-applied-configuration": true,
	"deployment.kubernetes.io/revision":                true,
	"control-plane.alpha.kubernetes.io/leader":         true,
}

// Comparable is obj as the comparison sees it, as Flux's ssa package
// prepares objects for its drift check: status and the server-set
// metadata (managedFields, resourceVersion, generation, uid,
// creationTimestamp, ...) removed, keeping what a manifest sets: name,
// namespace, labels and annotations (without the noise annotations).
// obj is not modified.
func Comparable(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "status", "metadata":
		default:
			out[k] = deepCopy(v)
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	keep := map[string]any{}
	for _, f := range []string{"name", "namespace"} {
		if v, ok := md[f]; ok {
			keep[f] = v
		}
	}
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		keep["labels"] = deepCopy(l)
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		ann := map[string]any{}
		for k, v := range a {
			if !noiseAnnotations[k] {
				ann[k] = v
			}
		}
		if len(ann) > 0 {
			keep["annotations"] = ann
		}
	}
	out["metadata"] = keep
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// Diff compares a live object with what the server-side dry-run of an
// apply returned for it, field by field, after Comparable: what apply
// would change. Secret data and stringData values are never shown
// (inventorydiff hides them). nil means apply changes nothing.
func Diff(live, dryRun *unstructured.Unstructured) []inventorydiff.FieldChange {
	if live == nil || dryRun == nil {
		return nil
	}
	l, err1 := single(Comparable(live.Object))
	d, err2 := single(Comparable(dryRun.Object))
	if err1 != nil || err2 != nil {
		return []inventorydiff.FieldChange{{Path: "(object)", Op: "~", Old: "unreadable", New: "unreadable"}}
	}
	o := inventorydiff.CompareOne("", inventorydiff.Side{Inventory: l}, true, inventorydiff.Side{Inventory: d}, true)
	if len(o.Changed) == 0 {
		return nil
	}
	return o.Changed[0].Fields
}

// single is the inventory of one object, for inventorydiff's rules.
func single(m map[string]any) (*inventory.ObjectSet, error) {
	n, err := yaml.FromMap(m)
	if err != nil {
		return nil, err
	}
	return inventory.New([]*yaml.RNode{n}, inventory.Options{})
}

// Key names an object as the plan does (group_Kind_namespace_name).
func Key(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	return inventory.ID{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}.Key()
}

// isSecret reports whether obj is a core Secret, whose values are never
// shown.
func isSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// redact hides secrets in s: an API server message may quote the
// object it refuses.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "(hidden)")
		}
	}
	return s
}
