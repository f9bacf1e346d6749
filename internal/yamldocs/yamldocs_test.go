package yamldocs

import (
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// Only mapping documents are read, whatever else a file holds.
func TestMappings(t *testing.T) {
	cases := map[string]struct {
		data  string
		names []string
	}{
		"objects":                {"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: Secret\nmetadata:\n  name: b\n", []string{"a", "b"}},
		"a JSON 6902 patch":      {"- op: add\n  path: /spec/clientSecret\n  value: x\n", nil},
		"a list, then an object": {"- Secret\n---\nkind: Secret\nmetadata:\n  name: c\n", []string{"c"}},
		"scalars and empties":    {"--- Secret\n---\n---\n# only a comment\n", nil},
		"a document of null":     {"~\n", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			docs, err := Mappings([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range docs {
				names = append(names, d.GetName())
			}
			if !slices.Equal(names, tc.names) {
				t.Errorf("names %q, want %q", names, tc.names)
			}
		})
	}
	if _, err := Mappings([]byte("a: [unclosed\n")); err == nil {
		t.Error("YAML that does not parse: no error")
	}
}

// Whatever a repository file holds, the documents read are mappings on
// which kyaml's getters do not panic.
func FuzzMappings(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/fuzz-seeds/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Mappings(data)
		if err != nil {
			return
		}
		for _, d := range docs {
			if d.YNode().Kind != yaml.MappingNode {
				t.Fatalf("a document of kind %v", d.YNode().Kind)
			}
			d.GetKind()
			d.GetApiVersion()
			d.GetName()
			d.GetNamespace()
			_, _ = d.Map()
		}
	})
}
