package deploy

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
)

func result(docs ...string) render.Result {
	r := render.Result{Path: "overlays/prod"}
	for _, d := range docs {
		r.Objects = append(r.Objects, yaml.MustParse(d))
	}
	return r
}

const (
	cmA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: app}"
	rg1 = "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000001, namespace: app}"
	rg2 = "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: other, namespace: app, labels: {cli-utils.sigs.k8s.io/inventory-id: custom}}"
)

func TestTargetOf(t *testing.T) {
	// One rendered ResourceGroup: it is the inventory, id <name>-<namespace>.
	tg, err := TargetOf(result(cmA, rg1), Source{})
	if err != nil {
		t.Fatal(err)
	}
	if inv := inventoryOf(tg.Inventory); inv.ID != "inventory-00000001-app" || len(tg.Objects) != 1 {
		t.Errorf("inventory %+v, %d objects", inv, len(tg.Objects))
	}
	// The file supplies it when the render has none; the label wins.
	tg, err = TargetOf(result(cmA), Source{RGFile: []byte(rg2)})
	if err != nil || inventoryOf(tg.Inventory).ID != "custom" {
		t.Errorf("from file: %v %+v", err, tg)
	}
	// The default file beside a rendered one is not a second inventory
	// (an overlay may list it under resources).
	tg, err = TargetOf(result(cmA, rg1), Source{RGFile: []byte(rg2)})
	if err != nil || inventoryOf(tg.Inventory).Name != "inventory-00000001" {
		t.Errorf("default file and rendered inventory: %v", err)
	}
	// Two, with --rg-file: an error that lists both.
	_, err = TargetOf(result(cmA, rg1), Source{RGFile: []byte(rg2), RGFileExplicit: true})
	var multi *MultipleInventoriesError
	if !errors.As(err, &multi) || !strings.Contains(err.Error(), "inventory-00000001") || !strings.Contains(err.Error(), "other") {
		t.Errorf("two inventories: %v", err)
	}
	// None: say kplan init, or kplan migrate when a Kptfile has one.
	_, err = TargetOf(result(cmA), Source{})
	if err == nil || !strings.Contains(err.Error(), "kplan init overlays/prod") {
		t.Errorf("no inventory: %v", err)
	}
	_, err = TargetOf(result(cmA), Source{HasKptfile: true})
	if err == nil || !strings.Contains(err.Error(), "kplan migrate overlays/prod") {
		t.Errorf("no inventory with a Kptfile: %v", err)
	}
	// The seed's inventory directive maps to a ConfigMap inventory.
	r := result(cmA)
	r.Inventory = &render.InventoryDirective{Type: "ConfigMap"}
	r.Inventory.ConfigMap.Name, r.Inventory.ConfigMap.Namespace = "root-cm", "default"
	tg, err = TargetOf(r, Source{})
	if err != nil {
		t.Fatal(err)
	}
	if inv := inventoryOf(tg.Inventory); inv.Kind != "ConfigMap" || inv.ID != "root-cm-default" {
		t.Errorf("directive inventory %+v", inv)
	}
}

// An inventory object of every backend, named by an identity; an unknown
// kind is an error naming the kinds there are.
func TestInventoryObject(t *testing.T) {
	for _, tc := range []struct {
		id                 kinv.Identity
		apiVersion, wantID string
	}{
		{kinv.Identity{Name: "inv", Namespace: "app"}, "kpt.dev/v1alpha1", ""},
		{kinv.Identity{Kind: "ResourceGroup", Name: "inv", Namespace: "app", ID: "x"}, "kpt.dev/v1alpha1", "x"},
		{kinv.Identity{Kind: "ConfigMap", Name: "inv"}, "v1", "inv-default"},
		{kinv.Identity{Kind: "ConfigMap", Name: "inv", Namespace: "app", ID: "y"}, "v1", "y"},
	} {
		u, err := InventoryObject(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if u.GetAPIVersion() != tc.apiVersion || u.GetLabels()[kinv.InventoryIDLabel] != tc.wantID || !isInventoryObject(u) {
			t.Errorf("%+v: %s %v", tc.id, u.GetAPIVersion(), u.GetLabels())
		}
		// The identity read back is the one asked for, defaults filled in.
		back := inventoryOf(u)
		if back.Name != tc.id.Name || (tc.id.Kind != "" && back.Kind != tc.id.Kind) {
			t.Errorf("%+v read back as %+v", tc.id, back)
		}
	}
	if _, err := InventoryObject(kinv.Identity{Kind: "Secret", Name: "x"}); err == nil || !strings.Contains(err.Error(), "ResourceGroup or ConfigMap") {
		t.Errorf("unknown kind: %v", err)
	}
}
