package helm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/strvals"
	sigsyaml "sigs.k8s.io/yaml"
)

// ValuesSource is a ConfigMap or Secret valuesFrom may name, as the
// repository defines it.
type ValuesSource struct {
	Data   map[string]string // a Secret's decoded
	Secret bool
	// Unknown says why its data cannot be known offline (SOPS).
	Unknown string
}

// Tokenize replaces a value that came from a Secret in the composed
// values: name is where it came from ("Secret ns/name key K" and, for a
// YAML document, LeafPath and the value's path in it), v the value. Rendering with
// every such value replaced by a token (the twin) says which rendered
// fields the Secrets made.
type Tokenize func(name string, v any) any

// values composes a release's values as helm-controller does
// (ChartValuesFromReferences): each valuesFrom in order, merged over the
// ones before (a targetPath entry set at its path as `--set` does), then
// spec.values on top. Chart defaults are merged later by Helm.
// tokenize, if not nil, stands in for every value a Secret gave.
func (r *Release) values(lookup func(kind, ns, name string) (*ValuesSource, bool), tokenize Tokenize) (map[string]any, []string, error) {
	out := map[string]any{}
	var secrets []string
	for i, ref := range r.Spec.ValuesFrom {
		what := fmt.Sprintf("HelmRelease %s: spec.valuesFrom[%d] %s %s/%s", r.ID(), i, ref.Kind, r.Namespace, ref.Name)
		if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
			return nil, nil, fmt.Errorf("%s: unsupported kind (ConfigMap or Secret)", what)
		}
		var src *ValuesSource
		ok := false
		if lookup != nil {
			src, ok = lookup(ref.Kind, r.Namespace, ref.Name)
		}
		field := fmt.Sprintf("spec.valuesFrom[%d] %s %s/%s", i, ref.Kind, r.Namespace, ref.Name)
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, nil, &UnavailableError{Release: r.ID(), Reason: field + " is not in the repository (helm-controller reads it from the cluster)"}
		}
		if src.Unknown != "" {
			return nil, nil, &UnavailableError{Release: r.ID(), Reason: field + ": " + src.Unknown}
		}
		key := ref.ValuesKey
		if key == "" {
			key = "values.yaml"
		}
		data, ok := src.Data[key]
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, nil, fmt.Errorf("%s: it has no key %s", what, key)
		}
		source := fmt.Sprintf("%s %s/%s key %s", ref.Kind, r.Namespace, ref.Name, key)
		if ref.TargetPath != "" {
			if src.Secret {
				secrets = append(secrets, source)
				if tokenize != nil {
					data = fmt.Sprint(tokenize(source, data))
				}
			}
			if err := setPath(out, ref.TargetPath, data); err != nil {
				if src.Secret {
					return nil, nil, fmt.Errorf("%s: set targetPath %s: the value is not valid there (not shown: it is a Secret's)", what, ref.TargetPath)
				}
				return nil, nil, fmt.Errorf("%s: set targetPath %s: %w", what, ref.TargetPath, err)
			}
			continue
		}
		var parsed map[string]any
		if err := sigsyaml.Unmarshal([]byte(data), &parsed); err != nil {
			if src.Secret {
				return nil, nil, fmt.Errorf("%s: key %s is not a YAML mapping (the error is not shown: it may quote the Secret)", what, key)
			}
			return nil, nil, fmt.Errorf("%s: key %s: %w", what, key, err)
		}
		if src.Secret {
			for _, leaf := range leaves(parsed, "") {
				secrets = append(secrets, source+LeafPath+leaf)
			}
			if tokenize != nil {
				parsed = tokenizeTree(parsed, source+LeafPath, "", tokenize).(map[string]any)
			}
		}
		out = MergeMaps(out, parsed)
	}
	return MergeMaps(out, r.Spec.Values), secrets, nil
}

// LeafPath joins a values document's source ("Secret ns/name key K") and
// the path of one of its values, in the name a Tokenize is given.
const LeafPath = " path "

// Leaf is the value at path (as leaves names it, dots in keys escaped)
// of the YAML values document data, encoded as JSON; ok is false when
// the document has no value there.
func Leaf(data, path string) (string, bool) {
	var doc map[string]any
	if sigsyaml.Unmarshal([]byte(data), &doc) != nil {
		return "", false
	}
	found, ok := "", false
	walkLeaves(doc, "", func(p string, v any) {
		if p == path {
			b, _ := json.Marshal(v)
			found, ok = string(b), true
		}
	})
	return found, ok
}

// setPath sets value at a dot path as helm-controller's ReplacePathValue:
// Helm's --set parser, a quoted value kept a string.
func setPath(values map[string]any, path, value string) error {
	if len(value) >= 2 && (value[0] == '\'' || value[0] == '"') && value[len(value)-1] == value[0] {
		return strvals.ParseIntoString(path+"="+value[1:len(value)-1], values)
	}
	return strvals.ParseInto(path+"="+value, values)
}

// MergeMaps merges b over a, recursively where both hold a map at a key
// (Flux's transform.MergeMaps).
func MergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	maps.Copy(out, a)
	for k, v := range b {
		if vm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = MergeMaps(am, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// leaves are the paths of the scalar values in v, sorted.
func leaves(v any, prefix string) []string {
	var out []string
	walkLeaves(v, prefix, func(p string, _ any) { out = append(out, p) })
	return out
}

// walkLeaves calls fn with the path and value of each scalar in v, maps'
// keys sorted.
func walkLeaves(v any, prefix string, fn func(path string, v any)) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			walkLeaves(t[k], join(prefix, k), fn)
		}
	case []any:
		for i, e := range t {
			walkLeaves(e, prefix+"["+strconv.Itoa(i)+"]", fn)
		}
	default:
		fn(prefix, v)
	}
}

func join(prefix, k string) string {
	k = strings.ReplaceAll(k, ".", `\.`)
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// tokenizeTree is a copy of v with every scalar replaced by tokenize.
func tokenizeTree(v any, source, prefix string, tokenize Tokenize) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = tokenizeTree(e, source, join(prefix, k), tokenize)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = tokenizeTree(e, source, prefix+"["+strconv.Itoa(i)+"]", tokenize)
		}
		return out
	}
	return tokenize(source+prefix, v)
}
