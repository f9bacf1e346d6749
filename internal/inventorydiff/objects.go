package inventorydiff

import (
	"fmt"
	"maps"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// Masks that stand for a Secret's values in printed YAML: the key stays,
// the value never shows. A value that differs from the other side's is
// masked differently, so a diff still shows that it changed.
const (
	maskHidden  = "(hidden)"
	maskChanged = "(hidden, changed)"
)

// lastApplied holds a copy of the whole object, values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// objectsYAML prints the objects of keys as kustomize build does.
func objectsYAML(inv *inventory.ObjectSet, keys []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		o := inv.Object(k)
		if o == nil {
			continue
		}
		m, err := o.Node.Map()
		if err != nil {
			out[k] = fmt.Sprintf("# %s cannot be printed: %v\n", k, err)
			continue
		}
		// As rendered: a namespace the target defaults is in the key and
		// the name shown, not in the YAML kustomize build prints.
		if isSecret(o.ID) {
			m = maskSecret(m, nil)
		}
		out[k] = printYAML(m)
	}
	return out
}

// printYAML prints an object as kustomize build and kplan render do
// (sorted keys, sigs.k8s.io/yaml).
func printYAML(m map[string]any) string {
	data, err := sigsyaml.Marshal(m)
	if err != nil {
		return fmt.Sprintf("# cannot be printed: %v\n", err)
	}
	return string(data)
}

// maskSecret returns a copy of a Secret with every value of data and
// stringData, and the last-applied annotation (a copy of them), replaced
// by a mask; other is the other side of a change (nil for none): a value
// that differs from other's gets maskChanged.
func maskSecret(m, other map[string]any) map[string]any {
	m = maps.Clone(m)
	for _, section := range []string{"data", "stringData"} {
		v, ok := m[section]
		if !ok {
			continue
		}
		o, _ := other[section].(map[string]any)
		kv, ok := v.(map[string]any)
		if !ok {
			m[section] = mask(v, other[section], other != nil)
			continue
		}
		masked := make(map[string]any, len(kv))
		for k, val := range kv {
			ov, inOther := o[k]
			masked[k] = mask(val, ov, other != nil && inOther)
		}
		m[section] = masked
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			if v, ok := ann[lastApplied]; ok {
				var ov any
				if omd, ok := other["metadata"].(map[string]any); ok {
					if oann, ok := omd["annotations"].(map[string]any); ok {
						ov = oann[lastApplied]
					}
				}
				md, ann = maps.Clone(md), maps.Clone(ann)
				ann[lastApplied] = mask(v, ov, ov != nil)
				md["annotations"] = ann
				m["metadata"] = md
			}
		}
	}
	return m
}

// mask is the mask of v; compare says other is v's counterpart.
func mask(v, other any, compare bool) string {
	if compare && encode(v) != encode(other) {
		return maskChanged
	}
	return maskHidden
}
