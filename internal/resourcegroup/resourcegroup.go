// Package resourcegroup is the kpt ResourceGroup inventory of
// seeds/002_96cdce1014c23446.md: its CRD, the cli-utils inventory client
// that stores an apply's object set in it, and the resourcegroup.yaml file
// that `kplan init` and `kplan migrate` write.
package resourcegroup

import (
	_ "embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/cli-utils/pkg/apis/actuation"
	"sigs.k8s.io/cli-utils/pkg/inventory"
	"sigs.k8s.io/cli-utils/pkg/object"
)

// CRD is the ResourceGroup CustomResourceDefinition.
//
//go:embed crd.yaml
var CRD []byte

// GVK of ResourceGroup objects.
var GVK = schema.GroupVersionKind{Group: "kpt.dev", Version: "v1alpha1", Kind: "ResourceGroup"}

// CRDName is the CRD's metadata.name.
const CRDName = "resourcegroups.kpt.dev"

// ClientFactory makes cli-utils inventory clients that keep the inventory
// in a ResourceGroup: spec.resources lists the objects, and
// status.resourceStatuses how their actuation and reconciliation went.
type ClientFactory struct{}

var _ inventory.ClientFactory = ClientFactory{}

// NewClient implements inventory.ClientFactory. The CRD must be installed.
func (ClientFactory) NewClient(f cmdutil.Factory) (inventory.Client, error) {
	return inventory.NewUnstructuredClient(f, fromUnstructured, toUnstructured, toUnstructuredStatus, GVK)
}

type objRef struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func fromUnstructured(rg *unstructured.Unstructured) (*inventory.SingleObjectInventory, error) {
	inv := inventory.NewSingleObjectInventory(rg)
	refs, _, err := unstructured.NestedSlice(rg.Object, "spec", "resources")
	if err != nil {
		return nil, fmt.Errorf("ResourceGroup %s/%s: spec.resources: %w", rg.GetNamespace(), rg.GetName(), err)
	}
	for i, r := range refs {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ResourceGroup %s/%s: spec.resources[%d] is not an object", rg.GetNamespace(), rg.GetName(), i)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		inv.ObjectRefs = append(inv.ObjectRefs, object.ObjMetadata{
			GroupKind: schema.GroupKind{Group: str("group"), Kind: str("kind")},
			Name:      str("name"), Namespace: str("namespace"),
		})
	}
	statuses, _, err := unstructured.NestedSlice(rg.Object, "status", "resourceStatuses")
	if err != nil {
		return nil, fmt.Errorf("ResourceGroup %s/%s: status.resourceStatuses: %w", rg.GetNamespace(), rg.GetName(), err)
	}
	for _, s := range statuses {
		m, ok := s.(map[string]any)
		if !ok {
			continue // status is advisory; a malformed entry must not block an apply
		}
		str := func(k string) string { v, _ := m[k].(string); return v }
		inv.ObjectStatuses = append(inv.ObjectStatuses, actuation.ObjectStatus{
			ObjectReference: actuation.ObjectReference{Group: str("group"), Kind: str("kind"), Name: str("name"), Namespace: str("namespace")},
			Strategy:        actuation.ActuationStrategy(str("strategy")),
			Actuation:       actuation.ActuationStatus(str("actuation")),
			Reconcile:       actuation.ReconcileStatus(str("reconcile")),
		})
	}
	return inv, nil
}

func toUnstructured(rg *unstructured.Unstructured, inv *inventory.SingleObjectInventory) (*unstructured.Unstructured, error) {
	refs := make([]any, 0, len(inv.GetObjectRefs()))
	for _, o := range inv.GetObjectRefs() {
		r := map[string]any{"group": o.GroupKind.Group, "kind": o.GroupKind.Kind, "name": o.Name, "namespace": o.Namespace}
		refs = append(refs, r)
	}
	if err := unstructured.SetNestedSlice(rg.Object, refs, "spec", "resources"); err != nil {
		return nil, err
	}
	return rg, nil
}

func toUnstructuredStatus(rg *unstructured.Unstructured, inv *inventory.SingleObjectInventory) (*unstructured.Unstructured, error) {
	sts := make([]any, 0, len(inv.GetObjectStatuses()))
	for _, s := range inv.GetObjectStatuses() {
		sts = append(sts, map[string]any{
			"group": s.Group, "kind": s.Kind, "name": s.Name, "namespace": s.Namespace,
			"strategy": s.Strategy.String(), "actuation": s.Actuation.String(), "reconcile": s.Reconcile.String(),
		})
	}
	if err := unstructured.SetNestedSlice(rg.Object, sts, "status", "resourceStatuses"); err != nil {
		return nil, err
	}
	unstructured.SetNestedField(rg.Object, rg.GetGeneration(), "status", "observedGeneration")
	return rg, nil
}
