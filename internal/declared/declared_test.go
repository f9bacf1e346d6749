package declared

import (
	"io/fs"
	"os"
	"strings"
	"testing"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// only reads one file, name.
func only(name string, data []byte) Files {
	return func(n string) ([]byte, error) {
		if n != name || data == nil {
			return nil, fs.ErrNotExist
		}
		return data, nil
	}
}

func seed(t *testing.T, name string) []byte {
	data, err := os.ReadFile("testdata/rg/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The inventory of an overlay that renders none: the configured one,
// else its ResourceGroup file, else its inventory: directive, else none;
// a file that is no ResourceGroup is an error naming it.
func TestDeclaredInventory(t *testing.T) {
	directive := &render.InventoryDirective{}
	directive.ConfigMap.Name = "seed-inventory"
	for _, tc := range []struct {
		name, want, err string
		files           Files
		opts            Options
		directive       *render.InventoryDirective
	}{
		{name: "configured wins", files: only("resourcegroup.yaml", seed(t, "plain.yaml")), directive: directive,
			opts: Options{Inventory: &kinv.Identity{Kind: "ConfigMap", Name: "cfg", Namespace: "ops", ID: "x"}}, want: "ConfigMap ops/cfg (inventory-id x)"},
		{name: "the ResourceGroup file", files: only("resourcegroup.yaml", seed(t, "plain.yaml")), directive: directive, want: "ResourceGroup apps/inventory-12345678 (inventory-id inventory-12345678-apps)"},
		{name: "its namespace is the target's", files: only("resourcegroup.yaml", seed(t, "labelled.yaml")), opts: Options{Namespace: "prod"}, want: "ResourceGroup prod/inventory-12345678 (inventory-id taken-over)"},
		{name: "a file named otherwise", files: only("rg.yaml", seed(t, "plain.yaml")), opts: Options{RGFile: "rg.yaml"}, want: "ResourceGroup apps/inventory-12345678 (inventory-id inventory-12345678-apps)"},
		{name: "the directive", files: only("resourcegroup.yaml", nil), directive: directive, want: "ConfigMap default/seed-inventory (inventory-id seed-inventory-default)"},
		{name: "nothing", files: only("resourcegroup.yaml", nil)},
		{name: "no ResourceGroup", files: only("resourcegroup.yaml", seed(t, "configmap.yaml")), err: "resourcegroup.yaml of app is not a ResourceGroup"},
	} {
		id, err := Identity(render.Result{Path: "app", Inventory: tc.directive}, tc.files, tc.opts)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && id != nil, tc.want != "" && (id == nil || id.String() != tc.want):
			t.Errorf("%s: %v, want %q", tc.name, id, tc.want)
		}
	}
}

// FuzzRGFile: any resourcegroup.yaml in a repository is read as a
// ResourceGroup or refused with an error, never a panic, and what it
// reads is a ResourceGroup.
func FuzzRGFile(f *testing.F) {
	for _, data := range fuzzseed.Files(f, "testdata/rg/*") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rg, err := RGFile("app", only("resourcegroup.yaml", data), "")
		if err == nil && (rg == nil || rg.GetKind() != kinv.DefaultBackend) {
			t.Fatalf("read %v from %q", rg, data)
		}
	})
}
