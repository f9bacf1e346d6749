package resourcegroup

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

func TestInitDefaults(t *testing.T) {
	dir := t.TempDir()
	p, err := Init(dir, "", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "resourcegroup.yaml" {
		t.Errorf("wrote %s, want resourcegroup.yaml", p)
	}
	data, _ := os.ReadFile(p)
	rg := yaml.MustParse(string(data))
	if rg.GetApiVersion() != "kpt.dev/v1alpha1" || rg.GetKind() != "ResourceGroup" {
		t.Errorf("wrote %s %s", rg.GetApiVersion(), rg.GetKind())
	}
	if !regexp.MustCompile(`^inventory-\d{8}$`).MatchString(rg.GetName()) || rg.GetNamespace() != "default" {
		t.Errorf("name %q namespace %q, want inventory-<8 digits> in default", rg.GetName(), rg.GetNamespace())
	}
	if len(rg.GetLabels()) != 0 {
		t.Errorf("labels %v: without --inventory-id there is no label", rg.GetLabels())
	}
	if _, err := Init(dir, "", Spec{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second init: %v, want a refusal", err)
	}
}

func TestInitWithFlags(t *testing.T) {
	dir := t.TempDir()
	p, err := Init(dir, "rg.yaml", Spec{Name: "shop", Namespace: "prod", InventoryID: "legacy-id"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	rg := yaml.MustParse(string(data))
	if rg.GetName() != "shop" || rg.GetNamespace() != "prod" || rg.GetLabels()[InventoryLabel] != "legacy-id" {
		t.Errorf("got %s", data)
	}
}

func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	kptfile := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app # keep me\ninventory:\n  name: inv-name\n  namespace: inv-ns\n  inventoryID: 1234-abcd\n"
	os.WriteFile(filepath.Join(dir, "Kptfile"), []byte(kptfile), 0o644)
	p, err := Migrate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	rg := yaml.MustParse(string(data))
	if rg.GetName() != "inv-name" || rg.GetNamespace() != "inv-ns" || rg.GetLabels()[InventoryLabel] != "1234-abcd" {
		t.Errorf("ResourceGroup = %s", data)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "Kptfile"))
	if strings.Contains(string(after), "inventory") || !strings.Contains(string(after), "name: app # keep me") {
		t.Errorf("Kptfile after migrate:\n%s", after)
	}
	if _, err := Migrate(dir, ""); err == nil {
		t.Error("a second migrate must fail: the Kptfile has no inventory any more")
	}
	if _, err := Migrate(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "kplan init") {
		t.Errorf("migrate without Kptfile: %v", err)
	}
}

// A Kptfile is the repository's text: any of it reads as an inventory, no
// inventory, or an error naming the file, never a panic (a Kptfile that
// is a list or a scalar used to reach kyaml's getters).
func FuzzKptfileInventory(f *testing.F) {
	f.Add([]byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\ninventory:\n  name: inv\n  namespace: ns\n  inventoryID: x\n"))
	f.Add([]byte("- inventory\n"))
	f.Add([]byte("inventory: text\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Kptfile"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _ = KptfileInventory(dir)
	})
}
