package deploy

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/common"
	"sigs.k8s.io/cli-utils/pkg/inventory"
)

func namespaceAnnotations(t *testing.T, name string) map[string]string {
	t.Helper()
	u, err := dyn(t, cluster).Resource(namespacesGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	if u.GetDeletionTimestamp() != nil {
		t.Fatalf("namespace %s is being deleted", name)
	}
	return u.GetAnnotations()
}

func sorted(keys ...string) []string {
	slices.Sort(keys)
	return keys
}

func actions(res *Result) map[string]Action {
	out := map[string]Action{}
	for _, o := range res.Objects {
		out[o.Key] = o.Action
	}
	return out
}

// An overlay whose inventory lives in a Namespace it renders: taking the
// Namespace and its objects out of the overlay keeps the Namespace (it
// holds the inventory) and prunes the objects; putting them back applies
// every one of them, and a later removal keeps the Namespace again.
func TestNamespaceRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		// legacy: the Namespace was kept by a kplan without the
		// kept-for-inventory annotation (only on-remove: keep, written
		// by kplan's merge patch).
		legacy bool
	}{{"kept by kplan", false}, {"kept before the annotation existed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			base := "round-trip"
			if tc.legacy {
				base = "round-trip-legacy"
			}
			ns := unique(t, base)
			invName := "inventory-" + ns
			inv := rg(ns, invName)
			id := invName + "-" + ns
			outside := cm("default", ns+"-outside", "1")
			all := []string{nsObj(ns), cm(ns, "a", "1"), cm(ns, "b", "1"), outside}
			nsKey, aKey, bKey, outKey := "~G_v1_Namespace||"+ns, "~G_v1_ConfigMap|"+ns+"|a", "~G_v1_ConfigMap|"+ns+"|b", "~G_v1_ConfigMap|default|"+ns+"-outside"
			res := mustRun(t, inv, all, Options{})
			eq(t, "created", res.Keys(Created), sorted(aKey, bKey, outKey, nsKey))

			// Out: the objects are pruned, the Namespace stays (it holds
			// the inventory), marked as kept for this inventory.
			res = mustRun(t, inv, []string{outside}, Options{})
			eq(t, "pruned", res.Keys(Pruned), []string{aKey, bKey})
			eq(t, "left in the cluster", res.Keys(Kept), []string{nsKey})
			ann := namespaceAnnotations(t, ns)
			if ann[KeptForInventoryAnnotation] != id || ann[common.OnRemoveAnnotation] != common.OnRemoveKeep {
				t.Fatalf("kept namespace annotations %v, want %s=%s and on-remove keep", ann, KeptForInventoryAnnotation, id)
			}
			if _, owned := ann[inventory.OwningInventoryKey]; owned {
				t.Fatalf("cli-utils left the kept namespace owned: %v", ann)
			}
			eq(t, "ResourceGroup", rgResources(t, cluster, ns, invName), []string{"ConfigMap/" + ns + "-outside"})
			if tc.legacy {
				// Another client removes kplan's annotation: only the
				// managed fields say that kplan wrote on-remove: keep.
				patch := []byte(`{"metadata":{"annotations":{"` + KeptForInventoryAnnotation + `":null}}}`)
				if _, err := dyn(t, cluster).Resource(namespacesGVR).Patch(context.Background(), ns, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
					t.Fatal(err)
				}
			}

			// Back, in a dry run first: nothing is skipped, nothing changes.
			res = mustRun(t, inv, all, Options{DryRun: true})
			if res.Failed() {
				t.Errorf("dry run of the return fails: %+v", res.Objects)
			}
			eq(t, "would create", res.Keys(Created), []string{aKey, bKey})
			eq(t, "would configure", res.Keys(Configured), sorted(outKey, nsKey))
			if exists(t, cluster, cmGVR, ns, "a") {
				t.Fatal("a dry run created a")
			}
			if _, owned := namespaceAnnotations(t, ns)[inventory.OwningInventoryKey]; owned {
				t.Fatal("a dry run returned the namespace to the inventory")
			}

			// Back: every returning object applies, without flags.
			res = mustRun(t, inv, all, Options{})
			if res.Failed() {
				t.Fatalf("the return fails: %+v", res.Objects)
			}
			eq(t, "created", res.Keys(Created), []string{aKey, bKey})
			eq(t, "configured", res.Keys(Configured), []string{nsKey})
			ann = namespaceAnnotations(t, ns)
			if ann[inventory.OwningInventoryKey] != id {
				t.Errorf("returned namespace owned by %q, want %q", ann[inventory.OwningInventoryKey], id)
			}
			for _, k := range []string{common.OnRemoveAnnotation, KeptForInventoryAnnotation} {
				if _, ok := ann[k]; ok {
					t.Errorf("returned namespace still has %s: %v", k, ann)
				}
			}
			eq(t, "ResourceGroup", rgResources(t, cluster, ns, invName), []string{"ConfigMap/a", "ConfigMap/b", "ConfigMap/" + ns + "-outside", "Namespace/" + ns})

			// And again: all unchanged, nothing skipped.
			res = mustRun(t, inv, all, Options{})
			eq(t, "unchanged", res.Keys(Unchanged), sorted(aKey, bKey, outKey, nsKey))

			// The protection holds on the next removal.
			res = mustRun(t, inv, []string{outside}, Options{})
			eq(t, "left in the cluster", res.Keys(Kept), []string{nsKey})
			namespaceAnnotations(t, ns)
			if !exists(t, cluster, rgGVR, ns, invName) {
				t.Error("the inventory is gone")
			}
		})
	}
}

// A Namespace that another inventory owns, or that someone else marked to
// be kept, is not taken: the inventory policy still decides.
func TestReturningNamespaceOfSomeoneElse(t *testing.T) {
	ns := unique(t, "not-ours")
	inv := rg(ns, "inventory-not-ours")
	// Someone else's: created and annotated to be kept by another client.
	u := obj(t, nsObj(ns))
	u.SetAnnotations(map[string]string{common.OnRemoveAnnotation: common.OnRemoveKeep})
	if _, err := dyn(t, cluster).Resource(namespacesGVR).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	res, err := run(t, cluster, inv, []string{nsObj(ns), cm(ns, "a", "1")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res)["~G_v1_Namespace||"+ns]; got != Skipped {
		t.Errorf("someone else's namespace: %s, want skipped by the inventory policy (%+v)", got, res.Objects)
	}
	if _, owned := namespaceAnnotations(t, ns)[inventory.OwningInventoryKey]; owned {
		t.Error("kplan took a namespace it did not keep")
	}
}

func managed(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestKeptForInventory(t *testing.T) {
	const keepField = `{"f:metadata":{"f:annotations":{"f:cli-utils.sigs.k8s.io/on-remove":{}}}}`
	keep := map[string]string{common.OnRemoveAnnotation: common.OnRemoveKeep}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name    string
		ann     map[string]string
		managed []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"kept for this inventory", with(keep, KeptForInventoryAnnotation, "me"), nil, true},
		{"kept for this inventory, still owned by it", with(keep, KeptForInventoryAnnotation, "me", inventory.OwningInventoryKey, "me"), nil, true},
		{"kept for another inventory", with(keep, KeptForInventoryAnnotation, "other"), nil, false},
		{"owned by another inventory", with(keep, KeptForInventoryAnnotation, "me", inventory.OwningInventoryKey, "other"), nil, false},
		{"legacy: keep written by kplan's patch", keep, []metav1.ManagedFieldsEntry{managed(FieldManager, metav1.ManagedFieldsOperationUpdate, keepField)}, true},
		{"keep written by another client", keep, []metav1.ManagedFieldsEntry{managed("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, keepField)}, false},
		{"keep rendered in the overlay (kplan's apply)", keep, []metav1.ManagedFieldsEntry{managed(FieldManager, metav1.ManagedFieldsOperationApply, keepField)}, false},
		{"kplan's patch wrote something else", keep, []metav1.ManagedFieldsEntry{managed(FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{}}}`)}, false},
		{"no annotations", nil, nil, false},
		{"legacy, but owned", with(keep, inventory.OwningInventoryKey, "me"), []metav1.ManagedFieldsEntry{managed(FieldManager, metav1.ManagedFieldsOperationUpdate, keepField)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
			u.SetName("ns")
			u.SetAnnotations(tc.ann)
			u.SetManagedFields(tc.managed)
			if got := keptForInventory(u, "me"); got != tc.want {
				raw, _ := json.Marshal(u.Object)
				t.Errorf("keptForInventory = %v, want %v for %s", got, tc.want, raw)
			}
		})
	}
}
