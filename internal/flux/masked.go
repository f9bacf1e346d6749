package flux

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/helm"
)

// maskPattern finds the masks maskOf prints: the Secret's namespace,
// name and key, and a Helm values leaf's path.
var maskPattern = regexp.MustCompile(`\(value from Secret ([^/ ]+)/([^ ]+) key ([^ ,]+)(?:` + helm.LeafPath + `(.*?))?, hidden\)`)

// Masked says, for each mask in an object of t (as maskOf and
// maskDerived print them), a fingerprint of the value it hides, read
// from the Secrets of t's cluster on this side: the plan compares the
// two sides' fingerprints of a field masked alike on both and plans it
// changed when they differ (inventorydiff.Side.Masked). The fingerprints
// stay in memory: no output, cache entry or digest holds them.
func (r *Result) Masked(t *Target) func(obj *yaml.RNode) map[string]string {
	pool := r.pools[t.Cluster]
	return func(obj *yaml.RNode) map[string]string {
		var out map[string]string
		walkScalars(obj.YNode(), func(s string) {
			if !strings.Contains(s, "(value from ") {
				return
			}
			if out == nil {
				out = map[string]string{}
			}
			for _, m := range maskPattern.FindAllStringSubmatch(s, -1) {
				if _, done := out[m[0]]; !done {
					out[m[0]] = maskedValue(pool, m[1], m[2], m[3], m[4])
				}
			}
			if strings.Contains(s, maskDerived) {
				if _, done := out[maskDerived]; !done {
					out[maskDerived] = derivedValue(pool, t)
				}
			}
		})
		return out
	}
}

// maskedValue is the fingerprint of the value of key of Secret ns/name
// in pool (at leaf, for a Helm values document), "" when the pool does
// not hold it.
func maskedValue(pool varPool, ns, name, key, leaf string) string {
	vs := pool[poolKey("Secret", ns, name)]
	if vs == nil {
		return ""
	}
	v, ok := vs.values[key]
	if !ok {
		return ""
	}
	if leaf != "" {
		if v, ok = helm.Leaf(v, leaf); !ok {
			return ""
		}
	}
	return fingerprint(v)
}

// derivedValue is the fingerprint of every Secret value t substitutes
// or its HelmReleases take values from: a field maskDerived stands for
// was made by one of them, which one is not known.
func derivedValue(pool varPool, t *Target) string {
	set := map[string]bool{}
	add := func(ns string, refs []any) {
		for _, r := range refs {
			if m, ok := r.(map[string]any); ok && m["kind"] == "Secret" {
				name, _ := m["name"].(string)
				set[poolKey("Secret", ns, name)] = true
			}
		}
	}
	subs, _, _ := unstructured.NestedSlice(t.Object, "spec", "postBuild", "substituteFrom")
	add(t.Namespace, subs)
	for _, o := range t.Objects {
		if helm.Is(o.GetApiVersion(), o.GetKind()) {
			if m, err := asMap(o); err == nil {
				from, _, _ := unstructured.NestedSlice(m, "spec", "valuesFrom")
				add(cmp.Or(o.GetNamespace(), "default"), from)
			}
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(set)) {
		b.WriteString(k + "\x00")
		if vs := pool[k]; vs != nil {
			for _, key := range slices.Sorted(maps.Keys(vs.values)) {
				b.WriteString(key + "\x00" + vs.values[key] + "\x00")
			}
		}
	}
	return fingerprint(b.String())
}

func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:16])
}

// walkScalars calls fn with the text of every scalar of n, keys included.
func walkScalars(n *yaml.Node, fn func(string)) {
	if n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode {
		fn(n.Value)
		return
	}
	for _, c := range n.Content {
		walkScalars(c, fn)
	}
}
