package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kplan-dev/kplan/internal/testcluster"
)

// kplan init, then kplan apply (dry run first), as the README says.
func TestInitAndApply(t *testing.T) {
	c := testcluster.Start(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"app/kustomization.yaml": "namespace: cli-apply\nresources: [ns.yaml, cm.yaml]\n",
		"app/ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: cli-apply}\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: info}\n",
	})
	t.Chdir(dir)

	// No inventory yet: the error says what to do.
	_, _, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "app")
	if err == nil || !strings.Contains(err.Error(), "kplan init app") {
		t.Fatalf("apply without an inventory: %v", err)
	}
	out, _, err := kplan(t, nil, "init", "--namespace", "cli-apply", "app")
	if err != nil || !strings.Contains(out, filepath.Join("app", "resourcegroup.yaml")) {
		t.Fatalf("init: %v %s", err, out)
	}
	out, stderr, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--dry-run", "app")
	if err != nil {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, stderr)
	}
	if !strings.Contains(out, "dry run: nothing changed") || !strings.Contains(out, "2 created") {
		t.Errorf("dry run output:\n%s", out)
	}
	out, stderr, err = kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--timeout", "30s", "app")
	if err != nil {
		t.Fatalf("apply: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{"created              ~G_v1_ConfigMap|cli-apply|settings  [Current]", "2 created, 0 configured"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	// Each object as cli-utils reported it, while the apply ran.
	for _, want := range []string{"kplan apply: Namespace cli-apply applied\n", "kplan apply: ConfigMap settings (cli-apply) applied\n", "kplan apply: ConfigMap settings (cli-apply) reconciled\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("apply's stderr lacks %q:\n%s", want, stderr)
		}
	}
	// Remove the ConfigMap from the overlay: the next apply prunes it.
	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte("namespace: cli-apply\nresources: [ns.yaml]\n"), 0o644)
	out, stderr, err = kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--format", "json", "app")
	if err != nil || !strings.Contains(out, `"action": "pruned"`) || !strings.Contains(stderr, "kplan apply: ConfigMap settings (cli-apply) pruned\n") {
		t.Errorf("prune: %v\n%s\n%s", err, out, stderr)
	}
}

// cp -r staging prod, resourcegroup.yaml included: applying prod would
// prune all of staging. It is refused (dry run too) and staging stays;
// --allow-replace-inventory goes ahead. Renaming the inventory afterwards
// leaves prod's objects to the old inventory: the apply says so and how
// to fix it.
func TestApplyCopiedAndRenamedInventory(t *testing.T) {
	c := testcluster.Start(t)
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"staging/kustomization.yaml": "namePrefix: staging-\nresources: [cm.yaml, role.yaml]\n",
		"staging/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: info}\n",
		"staging/role.yaml":          "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader}\nrules: []\n",
	})
	t.Chdir(dir)
	if _, _, err := kplan(t, nil, "init", "staging"); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "staging")
	apply := func(args ...string) (string, error) {
		t.Helper()
		out, stderr, err := kplan(t, nil, append([]string{"apply", "--kubeconfig", c.Kubeconfig, "--timeout", "30s"}, args...)...)
		return out + stderr, err
	}
	if out, err := apply("staging"); err != nil {
		t.Fatalf("apply staging: %v\n%s", err, out)
	}

	// The copy, with only its prefix changed.
	if out, err := exec.Command("cp", "-r", "staging", "prod").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	write(t, dir, map[string]string{"prod/kustomization.yaml": "namePrefix: prod-\nresources: [cm.yaml, role.yaml]\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "prod, copied from staging")
	for _, args := range [][]string{{"--dry-run", "prod"}, {"prod"}} {
		out, err := apply(args...)
		if err == nil {
			t.Fatalf("apply %v was not refused:\n%s", args, out)
		}
		for _, want := range []string{"refusing to apply", "would prune all 2 objects ResourceGroup default/inventory-", "ConfigMap default/staging-settings", "Role.rbac.authorization.k8s.io default/staging-reader", "kplan init", "--allow-replace-inventory"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("apply %v: the refusal lacks %q:\n%v", args, want, err)
			}
		}
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default")
	roles := dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}).Namespace("default")
	ctx := context.Background()
	if _, err := cms.Get(ctx, "staging-settings", metav1.GetOptions{}); err != nil {
		t.Errorf("staging's ConfigMap after the refusal: %v", err)
	}
	if _, err := roles.Get(ctx, "staging-reader", metav1.GetOptions{}); err != nil {
		t.Errorf("staging's Role after the refusal: %v", err)
	}
	if _, err := cms.Get(ctx, "prod-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("prod's ConfigMap after the refusal: %v", err)
	}

	// Told to, it replaces.
	out, err := apply("--allow-replace-inventory", "prod")
	if err != nil || !strings.Contains(out, "2 created, 0 configured, 0 unchanged, 2 pruned") {
		t.Fatalf("apply --allow-replace-inventory: %v\n%s", err, out)
	}

	// Rename prod's inventory: the objects still belong to the old one.
	rg, _ := os.ReadFile("prod/resourcegroup.yaml")
	renamed := regexp.MustCompile(`name: inventory-\d+`).ReplaceAll(rg, []byte("name: inventory-renamed"))
	write(t, dir, map[string]string{"prod/resourcegroup.yaml": string(renamed)})
	out, err = apply("prod")
	if err == nil {
		t.Fatalf("apply with a renamed inventory succeeded:\n%s", out)
	}
	for _, want := range []string{"skipped", "warning: 2 objects this overlay renders belong to another inventory", "ResourceGroup default/inventory-renamed", "did not exist in the cluster before", "restore its name", "--inventory-policy adopt-all"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply with a renamed inventory lacks %q:\n%s", want, out)
		}
	}
	if _, err := cms.Get(ctx, "prod-settings", metav1.GetOptions{}); err != nil {
		t.Errorf("prod's ConfigMap after the renamed apply: %v", err)
	}
}

// kplan apply -n apps puts namespaced objects rendered without a
// namespace, and the inventory, into apps; cluster-scoped ones stay so.
func TestApplyNamespaceFlag(t *testing.T) {
	c := testcluster.Start(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"app/kustomization.yaml": "resources: [ns.yaml, cm.yaml, cr.yaml, resourcegroup.yaml]\n",
		"app/ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: info}\n",
		"app/cr.yaml":            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: apps-reader}\nrules: []\n",
		"app/resourcegroup.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000007}\n",
	})
	t.Chdir(dir)
	out, stderr, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--timeout", "30s", "-n", "apps", "app")
	if err != nil {
		t.Fatalf("apply -n apps: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"ResourceGroup apps/inventory-00000007", "created              ~G_v1_ConfigMap|apps|settings", "created              rbac.authorization.k8s.io_v1_ClusterRole||apps-reader"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -n apps lacks %q:\n%s", want, out)
		}
	}
}

// kplan apply --dry-run after an apply says unchanged for what would not
// change, names objects as the plan does and shows the fields it would
// change on the live objects: it said "configured" for every object, by
// seed key, with no field.
func TestApplyDryRunSaysUnchangedAndShowsFieldsAgainstLive(t *testing.T) {
	c := testcluster.Start(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"app/kustomization.yaml": "namespace: dry-run\nresources: [ns.yaml, cm.yaml, rg.yaml]\n",
		"app/ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: dry-run}\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: info}\n",
		"app/rg.yaml":            "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-dry-run}\n",
	})
	t.Chdir(dir)
	if out, stderr, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--timeout", "30s", "app"); err != nil {
		t.Fatalf("apply: %v\n%s\n%s", err, out, stderr)
	}
	out, stderr, err := kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--dry-run", "app")
	if err != nil {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{"(dry run: nothing changed)", "  = Namespace dry-run: unchanged\n", "  = ConfigMap settings (dry-run): unchanged\n", "0 created, 0 configured, 2 unchanged"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run after the apply lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "~G_v1_") {
		t.Errorf("dry run shows seed keys:\n%s", out)
	}
	write(t, dir, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: debug}\n"})
	out, stderr, err = kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--dry-run", "app")
	if err != nil {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, stderr)
	}
	for _, want := range []string{"  ~ ConfigMap settings (dry-run): configured\n      ~ data.level: \"info\" → \"debug\"\n", "0 created, 1 configured, 1 unchanged"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run of a change lacks %q:\n%s", want, out)
		}
	}
	// Nothing was written.
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("dry-run").Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil || cm.Object["data"].(map[string]any)["level"] != "info" {
		t.Errorf("the dry run changed the ConfigMap: %v %v", err, cm)
	}
}
