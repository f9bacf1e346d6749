package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/common"
	"sigs.k8s.io/cli-utils/pkg/inventory"
	"sigs.k8s.io/cli-utils/pkg/object"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// KeptForInventoryAnnotation marks the Namespace kplan kept in the cluster,
// when it left its overlay, because it holds the inventory named by the
// value (an inventory-id). It lets the next apply that renders the
// Namespace again take it back.
const KeptForInventoryAnnotation = "kplan.dev/kept-for-inventory"

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// inventoryNamespaceID is the Namespace that holds inv.
func inventoryNamespaceID(inv kinv.Identity) object.ObjMetadata {
	return object.ObjMetadata{GroupKind: schema.GroupKind{Kind: "Namespace"}, Name: inv.Namespace}
}

// protectInventoryNamespace keeps the Namespace that holds the inventory
// from being pruned: deleting it would delete the inventory itself. The
// live Namespace is annotated to be kept, which cli-utils honours by
// leaving it in the cluster and dropping it from the inventory (it
// "abandons" it: its owning-inventory annotation goes too). The second
// annotation says kplan did this for inv, so that the Namespace returns
// to the inventory when the overlay renders it again (takeBackNamespace).
func protectInventoryNamespace(ctx context.Context, dyn dynamic.Interface, inv kinv.Identity, prev []object.ObjMetadata, objs []*unstructured.Unstructured, dryRun bool) error {
	nsID := inventoryNamespaceID(inv)
	if rendered(nsID, objs) != nil {
		return nil // still rendered: not a prune
	}
	if inv.Namespace == "" || !slices.Contains(prev, nsID) || dryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		common.OnRemoveAnnotation:  common.OnRemoveKeep,
		KeptForInventoryAnnotation: inv.ID,
	}}})
	if err != nil {
		return err
	}
	_, err = dyn.Resource(namespacesGVR).Patch(ctx, inv.Namespace, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("protect namespace %s, which holds %s: %w", inv.Namespace, inv, err)
	}
	return nil
}

// takeBackNamespace undoes protectInventoryNamespace when the overlay
// renders the inventory's Namespace again. Without it the Namespace, which
// no inventory owns any more, is skipped by the must-match policy, and so
// is every object in it, on every apply.
//
// Only a Namespace kplan itself kept for this inventory is taken back: one
// that another inventory owns, or that someone else annotated to be kept,
// is left to the inventory policy. It reports whether the Namespace is
// (or, in a dry run, would be) taken back; a dry run changes nothing.
func takeBackNamespace(ctx context.Context, dyn dynamic.Interface, inv kinv.Identity, objs []*unstructured.Unstructured, dryRun bool) (bool, error) {
	if inv.Namespace == "" || rendered(inventoryNamespaceID(inv), objs) == nil {
		return false, nil
	}
	live, err := dyn.Resource(namespacesGVR).Get(ctx, inv.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil // created afresh by this apply
	}
	if err != nil {
		return false, fmt.Errorf("read namespace %s, which holds %s: %w", inv.Namespace, inv, err)
	}
	if !keptForInventory(live, inv.ID) {
		return false, nil
	}
	if dryRun {
		return true, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		inventory.OwningInventoryKey: inv.ID,
		common.OnRemoveAnnotation:    nil,
		KeptForInventoryAnnotation:   nil,
	}}})
	if err != nil {
		return false, err
	}
	// The resourceVersion makes the patch fail rather than take a
	// Namespace that changed hands since it was read.
	patch, err = withResourceVersion(patch, live.GetResourceVersion())
	if err != nil {
		return false, err
	}
	if _, err := dyn.Resource(namespacesGVR).Patch(ctx, inv.Namespace, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return false, fmt.Errorf("return namespace %s, which kplan kept for %s when it left the overlay, to the inventory (apply again; if it persists, annotate the namespace %s=%s): %w",
			inv.Namespace, inv, inventory.OwningInventoryKey, inv.ID, err)
	}
	return true, nil
}

func withResourceVersion(patch []byte, rv string) ([]byte, error) {
	var m map[string]map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"]["resourceVersion"] = rv
	return json.Marshal(m)
}

// keptForInventory says whether kplan kept the live Namespace ns for the
// inventory with inventory-id id and nothing has claimed it since: no
// other inventory owns it, and either kplan's annotation names id, or
// (Namespaces kept before that annotation existed) its on-remove: keep
// annotation was written by kplan's protection, a merge patch, not by a
// user or an apply.
func keptForInventory(ns *unstructured.Unstructured, id string) bool {
	ann := ns.GetAnnotations()
	owner, owned := ann[inventory.OwningInventoryKey]
	if kept, ok := ann[KeptForInventoryAnnotation]; ok {
		// Still owned by id: the apply that kept it failed before
		// cli-utils abandoned it; the marks go all the same.
		return kept == id && (!owned || owner == id)
	}
	if owned {
		return false
	}
	if ann[common.OnRemoveAnnotation] != common.OnRemoveKeep {
		return false
	}
	field := "f:" + common.OnRemoveAnnotation
	for _, mf := range ns.GetManagedFields() {
		if mf.Manager != FieldManager || mf.Operation != metav1.ManagedFieldsOperationUpdate || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]any `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) == nil {
			if _, ok := fields.Metadata.Annotations[field]; ok {
				return true
			}
		}
	}
	return false
}

// takenBackResult is what a dry run reports, instead of cli-utils' skip,
// for an object the real apply reaches once takeBackNamespace has run: the
// Namespace itself, or an object in it (skipped as its dependent). ok is
// false for every other skip.
func takenBackResult(id object.ObjMetadata, reason error, nsID object.ObjMetadata, before map[object.ObjMetadata]existing) (ObjectResult, bool) {
	switch {
	case id == nsID:
		return ObjectResult{Action: Configured, Reason: "kept for the inventory when it left the overlay; the apply returns it to the inventory"}, true
	case id.Namespace == nsID.Name && reason != nil && strings.Contains(reason.Error(), "dependency apply actuation skipped"):
		r := ObjectResult{Action: Configured, Reason: "in a namespace the apply returns to the inventory; not checked by the server"}
		if _, ok := before[id]; !ok {
			r.Action = Created
		}
		return r, true
	}
	return ObjectResult{}, false
}

// rendered finds the object with identity id among objs.
func rendered(id object.ObjMetadata, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	for _, o := range objs {
		if object.UnstructuredToObjMetadata(o) == id {
			return o
		}
	}
	return nil
}
