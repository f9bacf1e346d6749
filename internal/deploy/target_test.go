package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/declared"
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

// files serves an overlay's files from a map.
func files(m map[string]string) declared.Files {
	return func(name string) ([]byte, error) {
		if d, ok := m[name]; ok {
			return []byte(d), nil
		}
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
}

// NewTarget picks an overlay's inventory for kplan apply and the webhook
// alike, and declared.Identity names the same one for an overlay that
// renders none.
func TestNewTarget(t *testing.T) {
	directive := result(cmA)
	directive.Inventory = &render.InventoryDirective{Type: "ConfigMap"}
	directive.Inventory.ConfigMap.Name, directive.Inventory.ConfigMap.Namespace = "root-cm", "default"
	withNS := directive
	withNS.Inventory = &render.InventoryDirective{}
	withNS.Inventory.ConfigMap.Name = "root-cm"
	override := &kinv.Identity{Kind: "ConfigMap", Name: "configured", Namespace: "kplan", ID: "configured-kplan"}
	rgFile := files(map[string]string{"resourcegroup.yaml": rg2})
	for _, tc := range []struct {
		name    string
		r       render.Result
		files   declared.Files
		opts    TargetOptions
		want    string // the inventory's String, or
		wantErr string // a part of the error
		objects int
	}{
		{"one rendered ResourceGroup, id <name>-<namespace>", result(cmA, rg1), nil, TargetOptions{},
			"ResourceGroup app/inventory-00000001 (inventory-id inventory-00000001-app)", "", 1},
		{"the file when the render has none; its label wins", result(cmA), rgFile, TargetOptions{},
			"ResourceGroup app/other (inventory-id custom)", "", 1},
		{"the default file beside a rendered one is not a second inventory", result(cmA, rg1), rgFile, TargetOptions{},
			"ResourceGroup app/inventory-00000001 (inventory-id inventory-00000001-app)", "", 1},
		{"a named file beside a rendered one: both listed", result(cmA, rg1), rgFile, TargetOptions{RGFileExplicit: true},
			"", "found 2: ResourceGroup app/inventory-00000001 (inventory-id inventory-00000001-app); ResourceGroup app/other", 0},
		{"a named file under another name", result(cmA), files(map[string]string{"inv/rg.yaml": rg2}), TargetOptions{RGFile: "inv/rg.yaml", RGFileExplicit: true},
			"ResourceGroup app/other (inventory-id custom)", "", 1},
		{"a file that is not a ResourceGroup", result(cmA), files(map[string]string{"resourcegroup.yaml": cmA}), TargetOptions{},
			"", "the ResourceGroup file resourcegroup.yaml of overlays/prod is not a ResourceGroup", 0},
		{"a file that cannot be read", result(cmA), func(string) ([]byte, error) { return nil, errors.New("disk on fire") }, TargetOptions{},
			"", "read the ResourceGroup file resourcegroup.yaml of overlays/prod: disk on fire", 0},
		{"none: kplan init", result(cmA), rgFile, TargetOptions{RGFile: "missing.yaml"}, "", "run `kplan init overlays/prod`", 0},
		{"none, with a Kptfile: kplan migrate", result(cmA), nil, TargetOptions{HasKptfile: true}, "", "run `kplan migrate overlays/prod`", 0},
		{"the seed's directive: a ConfigMap inventory", directive, nil, TargetOptions{},
			"ConfigMap default/root-cm (inventory-id root-cm-default)", "", 1},
		{"the directive without a namespace: the target's", withNS, nil, TargetOptions{Namespace: "team"},
			"ConfigMap team/root-cm (inventory-id root-cm-team)", "", 1},
		{"the file before the directive", directive, rgFile, TargetOptions{},
			"ResourceGroup app/other (inventory-id custom)", "", 1},
		{"the configured inventory whatever the overlay renders", result(cmA, rg1, rg2), rgFile, TargetOptions{Inventory: override},
			"ConfigMap kplan/configured (inventory-id configured-kplan)", "", 1},
		{"a rendered inventory without a namespace: the target's", result(cmA, "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inv}"), nil, TargetOptions{Namespace: "team"},
			"ResourceGroup team/inv (inventory-id inv-team)", "", 1},
	} {
		tg, err := NewTarget(tc.r, tc.files, tc.opts)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := inventoryOf(tg.Inventory).String(); got != tc.want || len(tg.Objects) != tc.objects {
			t.Errorf("%s: %s with %d objects, want %s with %d", tc.name, got, len(tg.Objects), tc.want, tc.objects)
		}
		// The planner's name for it agrees, for overlays that render none.
		rendersOne := slices.ContainsFunc(tc.r.Objects, kinv.IsInventoryObject)
		if rendersOne && tc.opts.Inventory == nil {
			continue
		}
		decl, err := declared.Identity(tc.r, tc.files, declared.Options{Inventory: tc.opts.Inventory, RGFile: tc.opts.RGFile, Namespace: tc.opts.Namespace})
		if err != nil || decl == nil || decl.String() != tc.want {
			t.Errorf("%s: declared %v (%v), want %s", tc.name, decl, err, tc.want)
		}
	}
	// No file, no directive, nothing configured: nothing declared.
	if decl, err := declared.Identity(result(cmA), files(nil), declared.Options{}); decl != nil || err != nil {
		t.Errorf("declared %v (%v), want none", decl, err)
	}
	// An explicit --rg-file beside a rendered inventory is an error.
	var multi *MultipleInventoriesError
	if _, err := NewTarget(result(cmA, rg1), files(map[string]string{"resourcegroup.yaml": rg2}), TargetOptions{RGFileExplicit: true}); !errors.As(err, &multi) {
		t.Errorf("NewTarget with --rg-file and a rendered inventory: %v", err)
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
		u, err := declared.InventoryObject(tc.id)
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
	if _, err := declared.InventoryObject(kinv.Identity{Kind: "Secret", Name: "x"}); err == nil || !strings.Contains(err.Error(), "ResourceGroup or ConfigMap") {
		t.Errorf("unknown kind: %v", err)
	}
}
