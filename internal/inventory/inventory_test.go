package inventory

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// The hash of the seed's own key list is the seed's InventoryHash.
func TestHashOfSeedKeys(t *testing.T) {
	keys := []string{
		"~G_v1_Service|default|mysql",
		"apps_v1_Deployment|default|mysql",
		"~G_v1_Secret|default|pass-dfg7h97cf6",
	}
	if got := Hash(keys); got != "7mgt867b75" {
		t.Errorf("Hash = %s, want 7mgt867b75 (seeds/000_0a72809845e5c0c8.md)", got)
	}
	if keys[0] != "~G_v1_Service|default|mysql" {
		t.Error("Hash must not reorder its argument")
	}
	if Hash(keys[:2]) == Hash(keys) {
		t.Error("removing a key must change the hash")
	}
}

func TestKeys(t *testing.T) {
	cases := []struct {
		yaml string
		key  string
	}{
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: mysql, namespace: default}", "apps_v1_Deployment|default|mysql"},
		{"apiVersion: v1\nkind: Secret\nmetadata: {name: pass-x, namespace: default}", "~G_v1_Secret|default|pass-x"},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: prod}", "~G_v1_Namespace||prod"},
		{"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.io}", "apiextensions.k8s.io_v1_CustomResourceDefinition||a.b.io"},
	}
	for _, tc := range cases {
		n := yaml.MustParse(tc.yaml)
		id := IDOf(n)
		if id.Key() != tc.key {
			t.Errorf("Key = %q, want %q", id.Key(), tc.key)
		}
		back, err := ParseKey(tc.key)
		if err != nil || back != id {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", tc.key, back, err, id)
		}
	}
	for _, bad := range []string{"", "apps_v1_Deployment|default", "Deployment|a|b"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) must fail", bad)
		}
	}
}

// The seed's mysql example: three objects, the Secret referred to by the
// Deployment, and the inventory ConfigMap with both annotations.
func TestSeedMysqlExample(t *testing.T) {
	s, err := snapshot.FromFS(os.DirFS("testdata"), "testdata")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	results, err := render.Render(context.Background(), s.FS, tree, tree.Overlays, render.Options{})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("render: %v %+v", err, results)
	}
	r := results[0]
	inv, err := New(r.Objects, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Keys) != 3 {
		t.Fatalf("keys = %q, want 3", inv.Keys)
	}
	var secretKey string
	for _, k := range inv.Keys {
		if strings.HasPrefix(k, "~G_v1_Secret|default|pass-") {
			secretKey = k
		}
	}
	want := []string{"apps_v1_Deployment|default|mysql", secretKey, "~G_v1_Service|default|mysql"}
	if secretKey == "" || !slices.Equal(inv.Keys, want) {
		t.Fatalf("keys = %q, want %q", inv.Keys, want)
	}
	refs := inv.Referrers[secretKey]
	if len(refs) != 1 || refs[0] != (ID{Group: "apps", Version: "v1", Kind: "Deployment", Name: "mysql", Namespace: "default"}) {
		t.Errorf("referrers of the Secret = %+v, want Deployment mysql", refs)
	}
	if len(inv.Referrers["~G_v1_Service|default|mysql"]) != 0 {
		t.Errorf("nothing refers to the Service, got %+v", inv.Referrers["~G_v1_Service|default|mysql"])
	}

	if r.Inventory == nil {
		t.Fatal("the inventory directive was not read")
	}
	cm, err := inv.ConfigMap(r.Inventory.ConfigMap.Name, r.Inventory.ConfigMap.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if cm.GetName() != "root-cm" || cm.GetNamespace() != "default" || cm.GetKind() != "ConfigMap" {
		t.Errorf("inventory ConfigMap is %s %s/%s", cm.GetKind(), cm.GetNamespace(), cm.GetName())
	}
	ann := cm.GetAnnotations()
	wantJSON := `{"current":{"apps_v1_Deployment|default|mysql":null,"` + secretKey +
		`":[{"group":"apps","version":"v1","kind":"Deployment","name":"mysql","namespace":"default"}],"~G_v1_Service|default|mysql":null}}`
	if ann[InventoryAnnotation] != wantJSON {
		t.Errorf("Inventory annotation =\n%s\nwant\n%s", ann[InventoryAnnotation], wantJSON)
	}
	if ann[InventoryHashAnnotation] != Hash(want) || len(ann[InventoryHashAnnotation]) != 10 {
		t.Errorf("InventoryHash = %s, want %s", ann[InventoryHashAnnotation], Hash(want))
	}
	var parsed annotationJSON
	if err := json.Unmarshal([]byte(ann[InventoryAnnotation]), &parsed); err != nil || len(parsed.Current) != 3 {
		t.Errorf("annotation does not parse back: %v", err)
	}
}

func TestReferrers(t *testing.T) {
	objs := []string{
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, namespace: a}",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bind}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}\nsubjects: [{kind: ServiceAccount, name: sa, namespace: a}]",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: a}",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: b}",
		"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: job, namespace: a}\nspec: {jobTemplate: {spec: {template: {spec: {serviceAccountName: sa, containers: [{name: c, envFrom: [{configMapRef: {name: cfg}}]}]}}}}}",
	}
	var nodes []*yaml.RNode
	for _, o := range objs {
		nodes = append(nodes, yaml.MustParse(o))
	}
	inv, err := New(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"~G_v1_ServiceAccount|a|sa":                             {"batch_v1_CronJob|a|job", "rbac.authorization.k8s.io_v1_ClusterRoleBinding||bind"},
		"rbac.authorization.k8s.io_v1_ClusterRole||reader":      {"rbac.authorization.k8s.io_v1_ClusterRoleBinding||bind"},
		"~G_v1_ConfigMap|a|cfg":                                 {"batch_v1_CronJob|a|job"},
		"~G_v1_ConfigMap|b|cfg":                                 nil,
		"rbac.authorization.k8s.io_v1_ClusterRoleBinding||bind": nil,
	}
	for key, want := range cases {
		var got []string
		for _, id := range inv.Referrers[key] {
			got = append(got, id.Key())
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("referrers of %s = %q, want %q", key, got, want)
		}
	}
	withInv, err := New(append(nodes,
		yaml.MustParse("apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inv, namespace: a}"),
		yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inv2, namespace: a, labels: {cli-utils.sigs.k8s.io/inventory-id: x}}")), Options{})
	if err != nil || withInv.Hash != inv.Hash || len(withInv.Keys) != len(inv.Keys) {
		t.Errorf("inventory objects must not be listed in the inventory: %v %q", err, withInv.Keys)
	}
	if _, err := New(append(nodes, yaml.MustParse(objs[0])), Options{}); err == nil {
		t.Error("a duplicate object must be an error")
	}
}
