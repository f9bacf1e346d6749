package resourcegroup

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// DefaultFile is the ResourceGroup file name of seeds/002_96cdce1014c23446.md.
const DefaultFile = kinv.ResourceGroupFile

// InventoryLabel is the label that identifies an inventory.
const InventoryLabel = "cli-utils.sigs.k8s.io/inventory-id"

// Spec is what a resourcegroup.yaml says.
type Spec struct {
	Name, Namespace string
	// InventoryID becomes the inventory-id label; empty leaves the label
	// out, and the id is then <name>-<namespace> at apply time.
	InventoryID string
}

// DefaultName is "inventory-" and 8 random digits, as kpt's init does.
func DefaultName() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(100_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("inventory-%08d", n.Int64()), nil
}

// YAML is the ResourceGroup object of spec.
func (s Spec) YAML() (string, error) {
	rg, err := yaml.Parse("apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: placeholder\n")
	if err != nil {
		return "", err
	}
	if err := rg.SetName(s.Name); err != nil {
		return "", err
	}
	if err := rg.SetNamespace(s.Namespace); err != nil {
		return "", err
	}
	if s.InventoryID != "" {
		if err := rg.SetLabels(map[string]string{InventoryLabel: s.InventoryID}); err != nil {
			return "", err
		}
	}
	return rg.String()
}

// Init writes the ResourceGroup file into dir (kplan init). It refuses to
// overwrite an existing file: that would orphan what it tracks.
func Init(dir, file string, s Spec) (string, error) {
	if file == "" {
		file = DefaultFile
	}
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.Name == "" {
		name, err := DefaultName()
		if err != nil {
			return "", err
		}
		s.Name = name
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err == nil {
		return "", fmt.Errorf("%s already exists: it may track objects in a cluster, so kplan init will not replace it", p)
	}
	return p, write(p, s)
}

func write(p string, s Spec) error {
	data, err := s.YAML()
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// KptfileInventory reads the inventory section of dir/Kptfile; ok is
// false when there is no Kptfile or no inventory in it.
func KptfileInventory(dir string) (s Spec, ok bool, err error) {
	p := filepath.Join(dir, "Kptfile")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	node, err := yamldocs.One(data)
	if err != nil {
		return s, false, fmt.Errorf("parse %s: %w", p, err)
	}
	inv := node.Field("inventory")
	if inv == nil || inv.Value == nil {
		return s, false, nil
	}
	get := func(k string) string {
		if f := inv.Value.Field(k); f != nil && f.Value != nil {
			return yaml.GetValue(f.Value)
		}
		return ""
	}
	s = Spec{Name: get("name"), Namespace: get("namespace"), InventoryID: get("inventoryID")}
	if s.Name == "" || s.Namespace == "" {
		return s, false, fmt.Errorf("%s: inventory needs name and namespace", p)
	}
	return s, true, nil
}

// Migrate converts dir/Kptfile's inventory into a ResourceGroup file and
// removes it from the Kptfile (kplan migrate): name, namespace and
// inventoryID map to metadata.name, metadata.namespace and the
// inventory-id label, so the cluster's objects keep their owner.
func Migrate(dir, file string) (string, error) {
	if file == "" {
		file = DefaultFile
	}
	s, ok, err := KptfileInventory(dir)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s has no Kptfile with an inventory to migrate: run kplan init instead", dir)
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err == nil {
		return "", fmt.Errorf("%s already exists: remove it or choose another --rg-file", p)
	}
	if err := write(p, s); err != nil {
		return "", err
	}
	kp := filepath.Join(dir, "Kptfile")
	data, err := os.ReadFile(kp)
	if err != nil {
		return "", err
	}
	node, err := yamldocs.One(data)
	if err != nil {
		return "", err
	}
	if _, err := node.Pipe(yaml.Clear("inventory")); err != nil {
		return "", err
	}
	out, err := node.String()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(kp, []byte(out), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", kp, err)
	}
	return p, nil
}
