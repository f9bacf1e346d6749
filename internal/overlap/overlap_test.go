package overlap

import (
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

func id(name string) *inventory.Identity {
	return &inventory.Identity{Kind: "ResourceGroup", Namespace: "default", Name: name, ID: name + "-default"}
}

// planned is an overlay rendered on both sides with inventory base, then
// head (nil: none).
func planned(path string, base, head *inventory.Identity) inventorydiff.Overlay {
	return inventorydiff.Overlay{Path: path, Status: inventorydiff.Unchanged, BaseInventory: base, HeadInventory: head, HeadHash: "h"}
}

// notRendered is an overlay the change cannot affect.
func notRendered(path string) inventorydiff.Overlay {
	return inventorydiff.Overlay{Path: path, Status: inventorydiff.Unchanged}
}

func TestInventories(t *testing.T) {
	prod := Clusters{Targets: true, Environments: map[string][]string{"a": {"prod"}, "b": {"prod", "staging"}, "c": {"staging"}}}
	for _, tc := range []struct {
		name     string
		overlays []inventorydiff.Overlay
		ids      map[string]*inventory.Identity
		clusters Clusters
		// shared is each overlay's SharedWith; before, its SharedBefore.
		shared map[string][]string
		before map[string]bool
	}{
		{
			name:     "an inventory-id copied into an overlay not rendered",
			overlays: []inventorydiff.Overlay{planned("b", nil, id("x")), notRendered("a")},
			ids:      map[string]*inventory.Identity{"a": id("x")},
			shared:   map[string][]string{"a": {"b"}, "b": {"a"}},
		},
		{
			// Whichever of the pair comes first: an overlay whose
			// inventory is filled in from ids did not change it.
			name:     "a pair not rendered, in either order, shared before",
			overlays: []inventorydiff.Overlay{notRendered("a"), notRendered("b"), planned("c", nil, id("c"))},
			ids:      map[string]*inventory.Identity{"a": id("x"), "b": id("x"), "c": id("c")},
			shared:   map[string][]string{"a": {"b"}, "b": {"a"}},
			before:   map[string]bool{"a": true, "b": true},
		},
		{
			name:     "a pair sharing an inventory-id when no overlay changes its own is not checked",
			overlays: []inventorydiff.Overlay{planned("a", id("x"), id("x")), planned("b", id("x"), id("x"))},
		},
		{
			name:     "targets of other environments may share one",
			overlays: []inventorydiff.Overlay{planned("a", nil, id("x")), planned("b", nil, id("x")), planned("c", nil, id("x"))},
			clusters: prod,
			shared:   map[string][]string{"a": {"b"}, "b": {"a", "c"}, "c": {"b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range []string{"given", "reversed"} {
				overlays := slices.Clone(tc.overlays)
				if order == "reversed" {
					slices.Reverse(overlays)
				}
				Inventories(overlays, tc.ids, tc.clusters)
				for _, o := range overlays {
					if !slices.Equal(o.SharedWith, tc.shared[o.Path]) || o.SharedBefore != tc.before[o.Path] {
						t.Errorf("%s order: %s shares with %q (before %t), want %q (before %t)", order, o.Path, o.SharedWith, o.SharedBefore, tc.shared[o.Path], tc.before[o.Path])
					}
					if len(o.SharedWith) > 0 && o.HeadInventory == nil {
						t.Errorf("%s order: %s shares an inventory it does not name", order, o.Path)
					}
				}
			}
		})
	}
}

func TestDuplicates(t *testing.T) {
	const x, y = "~G_v1_ConfigMap|default|x", "~G_v1_ConfigMap|default|y"
	adding := func(path string, keys ...string) inventorydiff.Overlay {
		return inventorydiff.Overlay{Path: path, Status: inventorydiff.Changed, Added: keys}
	}
	for _, tc := range []struct {
		name     string
		overlays []inventorydiff.Overlay
		keys     map[string][]string
		clusters Clusters
		want     map[string]string // overlay: the others its finding names
		notes    map[string]string // overlay: the others its note names
	}{
		{
			name:     "an object another target of the environment renders",
			overlays: []inventorydiff.Overlay{adding("a", x), notRendered("c")},
			keys:     map[string][]string{"a": {x}, "c": {x, y}},
			clusters: Clusters{Targets: true, Environments: map[string][]string{"a": {"prod"}, "c": {"prod"}}},
			want:     map[string]string{"a": "also rendered by c,"},
		},
		{
			name:     "an object a variant renders, without targets: a note",
			overlays: []inventorydiff.Overlay{adding("a", x), notRendered("c")},
			keys:     map[string][]string{"a": {x}, "c": {x, y}},
			notes:    map[string]string{"a": "also rendered by c:"},
		},
		{
			name:     "an object two overlays start rendering together",
			overlays: []inventorydiff.Overlay{adding("a", x), adding("b", x)},
			keys:     map[string][]string{"a": {x}, "b": {x}},
		},
		{
			name:     "an object an overlay of another environment renders",
			overlays: []inventorydiff.Overlay{adding("a", x), notRendered("c"), notRendered("d")},
			keys:     map[string][]string{"a": {x}, "c": {x}, "d": {x}},
			clusters: Clusters{Targets: true, Environments: map[string][]string{"a": {"prod"}, "c": {"staging"}, "d": {"prod"}}},
			want:     map[string]string{"a": "also rendered by d,"},
		},
		{
			name: "an object of an overlay sharing the inventory",
			overlays: []inventorydiff.Overlay{{Path: "a", Status: inventorydiff.Changed, Added: []string{x}, SharedWith: []string{"c"}},
				notRendered("c")},
			keys: map[string][]string{"a": {x}, "c": {x}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Duplicates(tc.overlays, tc.keys, tc.clusters)
			for _, o := range tc.overlays {
				var got []string
				for _, f := range o.Dangerous {
					got = append(got, f.Reason)
				}
				want := tc.want[o.Path]
				if (want == "") != (len(got) == 0) || len(got) > 1 || want != "" && !strings.Contains(got[0], want) {
					t.Errorf("%s: findings %q, want one saying %q", o.Path, got, want)
				}
				note := tc.notes[o.Path]
				if (note == "") != (len(o.Notes) == 0) || len(o.Notes) > 1 || note != "" && !strings.Contains(o.Notes[0], note) {
					t.Errorf("%s: notes %q, want one saying %q", o.Path, o.Notes, note)
				}
			}
		})
	}
}

// Facts of two shares add up to the facts of the whole plan.
func TestFactsAdd(t *testing.T) {
	var f Facts
	f.Add(Facts{Keys: map[string][]string{"a": {"k"}}})
	f.Add(Facts{Clusters: Clusters{Targets: true, Environments: map[string][]string{"b": {"prod"}}}, IDs: map[string]*inventory.Identity{"c": id("c")}, NoDuplicates: true})
	if !f.Targets || !f.NoDuplicates || len(f.Keys["a"]) != 1 || f.IDs["c"] == nil || !slices.Equal(f.Environments["b"], []string{"prod"}) {
		t.Errorf("Add: %+v", f)
	}
}
