package render

import (
	"maps"
	"reflect"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// TestDiscoverChangeEqualsDiscoverAll: head's discovery made from base's
// and the changed paths, decoding the JSON the closures share, finds what
// discovering head on its own finds, whatever the change does to the
// kustomizations.
func TestDiscoverChangeEqualsDiscoverAll(t *testing.T) {
	base := map[string]string{
		"base/kustomization.yaml":         "resources: [cm.yaml]\n",
		"base/cm.yaml":                    "kind: ConfigMap\n",
		"overlays/dev/kustomization.yaml": "resources: [../../base]\n",
		"overlays/prd/kustomization.yaml": "resources: [../../base, https://example.com/x.yaml]\n",
		"comp/kustomization.yaml":         "kind: Component\n",
		"a/kustomization.yaml":            "resources: [../b]\n",
		"b/kustomization.yaml":            "resources: []\n",
	}
	for _, tc := range []struct {
		name   string
		change map[string]string // "" deletes
		extra  map[string]string // in both sides
	}{
		{"no kustomization", map[string]string{"base/cm.yaml": "kind: Secret\n"}, nil},
		{"a new overlay", map[string]string{"overlays/stg/kustomization.yaml": "resources: [../../base]\n"}, nil},
		{"an overlay becomes a base", map[string]string{"overlays/prd/kustomization.yaml": "resources: [../dev]\n"}, nil},
		{"an overlay removed", map[string]string{"overlays/dev/kustomization.yaml": ""}, nil},
		{"a second kustomization file", map[string]string{"overlays/dev/Kustomization": "resources: []\n"}, nil},
		{"the first of two files removed", map[string]string{"a/Kustomization": ""}, map[string]string{"a/Kustomization": "resources: [../comp]\n"}},
		{"a cycle", map[string]string{"b/kustomization.yaml": "resources: [../a]\n"}, nil},
		{"names YAML reads as numbers", map[string]string{"overlays/dev/kustomization.yaml": "resources: [1.10, ../../base]\nkind: 2\n"}, nil},
		{"not YAML", map[string]string{"comp/kustomization.yaml": "kind: [\n"}, nil},
		{"a component becomes an overlay", map[string]string{"comp/kustomization.yaml": "resources: []\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := maps.Clone(base)
			maps.Copy(base, tc.extra)
			head := maps.Clone(base)
			for p, c := range tc.change {
				if c == "" {
					delete(head, p)
				} else {
					head[p] = c
				}
			}
			b, h := testkit.Snapshot(t, "test", base), testkit.Snapshot(t, "test", head)
			filters := [2]Filter{{}, {Exclude: []string{"overlays/prd"}}}
			got, err := DiscoverChange(b.FS, h.FS, snapshot.Changed(b.Index, h.Index), filters, closure.NewMemo())
			if err != nil {
				t.Fatal(err)
			}
			want, err := DiscoverAll([]filesys.FileSystem{b.FS, h.FS}, filters[:])
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("side %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
		})
	}
}
