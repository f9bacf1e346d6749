package inventory

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The digest names what an apply puts in the cluster: order and YAML
// style do not change it; a value, a namespace default or the inventory
// object do.
func TestDigestIsTheAppliedContent(t *testing.T) {
	const (
		cm  = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n  j: w\n"
		cmF = "{kind: ConfigMap, data: {j: w, k: v}, metadata: {name: a}, apiVersion: v1}\n"
		ns  = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"
		rg  = "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: inv\n  namespace: x\n"
	)
	digest := func(namespace string, docs ...string) string {
		t.Helper()
		var nodes []*yaml.RNode
		for _, d := range docs {
			nodes = append(nodes, yaml.MustParse(d))
		}
		inv, err := New(nodes, Options{Namespace: namespace, Scope: func(string, string) (bool, bool) { return true, true }})
		if err != nil {
			t.Fatal(err)
		}
		d, err := inv.Digest()
		if err != nil || !strings.HasPrefix(d, "sha256:") {
			t.Fatalf("digest %q: %v", d, err)
		}
		return d
	}
	base := digest("", cm, ns, rg)
	for _, tc := range []struct {
		name string
		got  string
		same bool
	}{
		{"again", digest("", cm, ns, rg), true},
		{"other order", digest("", rg, ns, cm), true},
		{"flow style, other key order", digest("", ns, cmF, rg), true},
		{"a value changed", digest("", strings.Replace(cm, "k: v", "k: v2", 1), ns, rg), false},
		{"namespace defaulted", digest("prod", cm, ns, rg), false},
		{"another inventory", digest("", cm, ns, strings.Replace(rg, "name: inv", "name: inv2", 1)), false},
		{"no inventory", digest("", cm, ns), false},
		{"an object less", digest("", cm, rg), false},
	} {
		if (tc.got == base) != tc.same {
			t.Errorf("%s: digest %s, base %s, want same=%v", tc.name, tc.got, base, tc.same)
		}
	}
}
