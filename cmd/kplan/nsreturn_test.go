package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/kplan-dev/kplan/internal/testcluster"
)

// Issue 10: an overlay whose inventory lives in a Namespace it renders.
// Taking the Namespace and the objects in it out of the overlay, applying,
// and putting them back must apply every returning object with plain
// `kplan apply` — before, the Namespace (kept for the inventory) and
// everything in it were skipped on every apply.
func TestApplyNamespaceRoundTrip(t *testing.T) {
	c := testcluster.Start(t)
	dir := t.TempDir()
	full := "resources: [ns.yaml, cm.yaml, role.yaml, resourcegroup.yaml]\n"
	write(t, dir, map[string]string{
		"app/kustomization.yaml": full,
		"app/ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: returns}\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: returns}\ndata: {level: info}\n",
		"app/role.yaml":          "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: returns-reader}\nrules: []\n",
		"app/resourcegroup.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000010, namespace: returns}\n",
	})
	t.Chdir(dir)
	apply := func(step string) map[string]string {
		t.Helper()
		out, stderr, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--timeout", "30s", "-o", "json", "app")
		if err != nil {
			t.Fatalf("%s: kplan apply: %v\n%s%s", step, err, out, stderr)
		}
		var res struct {
			Objects []struct{ Key, Action, Reason string }
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v in %s", step, err, out)
		}
		got := map[string]string{}
		for _, o := range res.Objects {
			got[o.Key] = o.Action
		}
		return got
	}
	const ns, cm, role = "~G_v1_Namespace||returns", "~G_v1_ConfigMap|returns|settings", "rbac.authorization.k8s.io_v1_ClusterRole||returns-reader"
	check := func(step string, got, want map[string]string) {
		t.Helper()
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", step, got, want)
		}
	}
	check("first apply", apply("first apply"), map[string]string{ns: "created", cm: "created", role: "created"})

	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte("resources: [role.yaml, resourcegroup.yaml]\n"), 0o644)
	check("namespace out", apply("namespace out"), map[string]string{ns: "left in the cluster", cm: "pruned", role: "unchanged"})

	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte(full), 0o644)
	check("namespace back", apply("namespace back"), map[string]string{ns: "configured", cm: "created", role: "unchanged"})
	check("again", apply("again"), map[string]string{ns: "unchanged", cm: "unchanged", role: "unchanged"})
}
