package plan

import (
	"reflect"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

func inv(t *testing.T, docs ...string) *inventory.ObjectSet {
	t.Helper()
	var nodes []*yaml.RNode
	for _, d := range docs {
		n, err := yaml.Parse(d)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	i, err := inventory.New(nodes, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// Thinning identical objects does not change what the comparison says.
func TestThinKeepsThePlan(t *testing.T) {
	same := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\ndata:\n  k: v\n"
	cases := []struct {
		name       string
		base, head []string
	}{
		{"identical", []string{same}, []string{same}},
		{"changed value", []string{same, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"},
			[]string{same, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: w\n"}},
		{"style only", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  k: \"1\"\n"},
			[]string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  k: '1'\n"}},
		{"added and pruned", []string{same, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: gone-abcdefghij\n"},
			[]string{same, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: new\n"}},
		{"replaced generated", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: g-h2b2f6tfhm\ndata:\n  k: v\n"},
			[]string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: g-b5t95f8ttc\ndata:\n  k: w\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := inventorydiff.Compare("b", "h",
				map[string]inventorydiff.Side{"o": {Inventory: inv(t, tc.base...)}},
				map[string]inventorydiff.Side{"o": {Inventory: inv(t, tc.head...)}})
			b, h := inv(t, tc.base...), inv(t, tc.head...)
			thin(b, h)
			got := inventorydiff.Compare("b", "h",
				map[string]inventorydiff.Side{"o": {Inventory: b}},
				map[string]inventorydiff.Side{"o": {Inventory: h}})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("thinned plan\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}
