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

// Lists are read as their items, as kubectl, Helm and Argo CD read them;
// what Split skips is counted; One reads a single object only.
func TestObjectsSplitOne(t *testing.T) {
	cases := map[string]struct {
		data    string
		objects []string
		others  int
		one     string // "" when One refuses data
	}{
		"one object":                 {"kind: ConfigMap\nmetadata:\n  name: a\n", []string{"a"}, 0, "a"},
		"a List":                     {"apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems:\n- kind: A\n  metadata: {name: a}\n- x\n- kind: B\n  metadata: {name: b}\n", []string{"a", "b"}, 0, "l"},
		"a List among documents":     {"kind: A\nmetadata: {name: a}\n---\nkind: ConfigMapList\nitems:\n- kind: C\n  metadata: {name: c}\n", []string{"a", "c"}, 0, ""},
		"a List whose items is text": {"kind: List\nitems: x\nmetadata: {name: l}\n", []string{"l"}, 0, "l"},
		"a path, not a config":       {"patch.yaml\n", nil, 1, ""},
		"a patch list and an object": {"- op: remove\n  path: /a\n---\nkind: A\nmetadata: {name: a}\n---\n", []string{"a"}, 1, ""},
		"nothing":                    {"", nil, 0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Objects([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range objs {
				names = append(names, o.GetName())
			}
			if !slices.Equal(names, tc.objects) {
				t.Errorf("Objects: names %q, want %q", names, tc.objects)
			}
			if _, others, _ := Split([]byte(tc.data)); others != tc.others {
				t.Errorf("Split: %d other documents, want %d", others, tc.others)
			}
			one, err := One([]byte(tc.data))
			switch {
			case tc.one == "" && err == nil:
				t.Errorf("One: read %q, want a refusal", one.GetName())
			case tc.one != "" && err != nil:
				t.Errorf("One: %v", err)
			case tc.one != "" && one.GetName() != tc.one:
				t.Errorf("One: %q, want %q", one.GetName(), tc.one)
			}
		})
	}
}

// Whatever a manifest stream holds, the objects read (Lists expanded) are
// mappings on which kyaml's getters do not panic.
func FuzzObjects(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/fuzz-seeds/*") {
		f.Add(s)
	}
	f.Add([]byte("kind: List\nitems:\n- kind: A\n- [x]\n- ~\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Objects(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.YNode().Kind != yaml.MappingNode {
				t.Fatalf("an object of kind %v", o.YNode().Kind)
			}
			o.GetKind()
			o.GetApiVersion()
			o.GetName()
			_, _ = o.Map()
		}
	})
}

// Whatever a single-object file (a kustomization, a Kptfile) holds, One
// gives a mapping or an error, never a panic, and agrees with Split.
func FuzzOne(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/fuzz-seeds/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, others, splitErr := Split(data)
		one, err := One(data)
		if (err == nil) != (splitErr == nil && len(docs) == 1 && others == 0) {
			t.Fatalf("One error %v, Split %d mappings %d others error %v", err, len(docs), others, splitErr)
		}
		if err != nil {
			return
		}
		if one.YNode().Kind != yaml.MappingNode {
			t.Fatalf("kind %v", one.YNode().Kind)
		}
		one.GetKind()
		_ = one.Field("inventory")
	})
}

// A mapping whose metadata (or its labels or annotations) is not a
// mapping is no object: kyaml's GetName panicked on `metadata:\n-`
// (found by FuzzChartManifest).
func TestMetadataNotAMapping(t *testing.T) {
	for _, data := range []string{
		"!00 #0\nmetadata:\n-",
		"kind: A\nmetadata: [a]\n",
		"kind: A\nmetadata:\n  name: a\n  labels: [x]\n",
		"kind: A\nmetadata:\n  name: a\nmetadata: text\n",
		"kind: A\nmetadata:\n  name: a\n  annotations: &x [1]\n",
	} {
		docs, others, err := Split([]byte(data))
		if err != nil || len(docs) != 0 || others != 1 {
			t.Errorf("%q: %d mappings, %d others, error %v; want one other", data, len(docs), others, err)
		}
	}
	docs, _, _ := Split([]byte("kind: A\nmetadata:\n  name: a\n  labels: ~\n"))
	if len(docs) != 1 || docs[0].GetName() != "a" {
		t.Errorf("null labels: %d mappings", len(docs))
	}
}
