package deploy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// An overlay copied with its inventory (cp -r staging prod) would prune
// every object of the original: refused, in a dry run too, naming what it
// would have pruned; allowed with AllowReplaceInventory.
func TestCopiedInventoryIsRefused(t *testing.T) {
	// In default, which every run shares: the inventory and the objects
	// are this run's by their names, the ClusterRole too.
	invName := unique(t, "inventory-00000010")
	inv := rg("default", invName)
	prefix := unique(t, "copy")
	// One cluster-scoped object, listed first; no Namespace, whose prune
	// would never finish without a controller-manager.
	roleName := prefix + "-staging"
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + roleName + "}\nrules: []"
	stagingName := func(i int) string { return fmt.Sprintf("%s-staging-c%02d", prefix, i) }
	staging := []string{role}
	for i := range 25 {
		staging = append(staging, cm("default", stagingName(i), "1"))
	}
	mustRun(t, inv, staging, Options{})
	prodName := func(i int) string { return fmt.Sprintf("%s-prod-c%02d", prefix, i) }
	prod := []string{cm("default", prodName(0), "1"), cm("default", prodName(1), "1")}
	for _, dry := range []bool{true, false} {
		_, err := run(t, cluster, inv, prod, Options{DryRun: dry})
		var re *ReplaceInventoryError
		if !errors.As(err, &re) {
			t.Fatalf("dry run %v: %v, want a ReplaceInventoryError", dry, err)
		}
		msg := err.Error()
		for _, want := range []string{invName, "pruned:\n  ClusterRole.rbac.authorization.k8s.io " + roleName + "\n  ConfigMap default/" + stagingName(0) + "\n", "… and 6 more", "kplan init", "--allow-replace-inventory"} {
			if !strings.Contains(msg, want) {
				t.Errorf("dry run %v: the refusal lacks %q:\n%s", dry, want, msg)
			}
		}
		if strings.Contains(msg, "default/"+stagingName(24)) {
			t.Errorf("the refusal lists more than %d objects:\n%s", maxListed, msg)
		}
	}
	for i := range 25 {
		if !exists(t, cluster, cmGVR, "default", stagingName(i)) {
			t.Fatalf("a refused apply pruned %s", stagingName(i))
		}
	}
	if exists(t, cluster, cmGVR, "default", prodName(0)) {
		t.Errorf("a refused apply created %s", prodName(0))
	}
	// An ordinary change that keeps one object is not the signature.
	mustRun(t, inv, []string{role, cm("default", prefix+"-new", "1")}, Options{DryRun: true})
	// Told to, it replaces.
	res := mustRun(t, inv, prod, Options{AllowReplaceInventory: true})
	if n := len(res.Keys(Pruned)); n != 26 {
		t.Errorf("the allowed replacement pruned %d objects, want staging's 26", n)
	}
	if exists(t, cluster, cmGVR, "default", stagingName(0)) || !exists(t, cluster, cmGVR, "default", prodName(0)) {
		t.Error("the allowed replacement did not replace")
	}
}

// A renamed inventory leaves the cluster's objects to the old one: the
// apply touches none of them and says why and what to do.
func TestRenamedInventoryIsExplained(t *testing.T) {
	ns := unique(t, "renamed")
	docs := []string{nsObj(ns), cm(ns, "a", "1"), cm(ns, "b", "1")}
	mustRun(t, rg(ns, "inventory-old"), docs, Options{})
	res, err := run(t, cluster, rg(ns, "inventory-new"), docs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed() || len(res.Keys(Skipped)) != 3 {
		t.Errorf("apply with the renamed inventory: %+v", res.Objects)
	}
	if len(res.Warnings) != 1 {
		t.Fatalf("warnings %q, want one", res.Warnings)
	}
	for _, want := range []string{"3 objects", "inventory-id inventory-old-" + ns, "ResourceGroup " + ns + "/inventory-old", "did not exist in the cluster before", "renamed the overlay's inventory", "cli-utils.sigs.k8s.io/inventory-id: inventory-old-" + ns, "adopt-all"} {
		if !strings.Contains(res.Warnings[0], want) {
			t.Errorf("the warning lacks %q:\n%s", want, res.Warnings[0])
		}
	}
	eq(t, "old ResourceGroup", rgResources(t, cluster, ns, "inventory-old"), []string{"ConfigMap/a", "ConfigMap/b", "Namespace/" + ns})
}

// Namespaced objects rendered without a namespace go to the target's
// namespace, the inventory too; cluster-scoped objects and custom
// resources of a CRD in the same render follow their scope.
func TestDefaultNamespace(t *testing.T) {
	ns := unique(t, "defaulted")
	// Cluster-scoped: the CRD (its group) and the ClusterRole are this run's too.
	group := unique(t, "defaulted") + ".example.com"
	reader := unique(t, "defaulted-reader")
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.` + group + `}
spec:
  group: ` + group + `
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`
	inv := "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000011}"
	docs := []string{nsObj(ns), crd, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}", "apiVersion: " + group + "/v1\nkind: Gadget\nmetadata: {name: g}",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + reader + "}\nrules: []"}
	res := mustRun(t, inv, docs, Options{Namespace: ns, ReconcileTimeout: time.Minute})
	eq(t, "created", res.Keys(Created), []string{
		"apiextensions.k8s.io_v1_CustomResourceDefinition||gadgets." + group, group + "_v1_Gadget|" + ns + "|g",
		"rbac.authorization.k8s.io_v1_ClusterRole||" + reader, "~G_v1_ConfigMap|" + ns + "|plain", "~G_v1_Namespace||" + ns})
	if res.Inventory.Namespace != ns || !exists(t, cluster, rgGVR, ns, "inventory-00000011") {
		t.Errorf("inventory %s, want it in %s", res.Inventory, ns)
	}
}
