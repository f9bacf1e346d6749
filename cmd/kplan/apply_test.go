package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	// Remove the ConfigMap from the overlay: the next apply prunes it.
	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte("namespace: cli-apply\nresources: [ns.yaml]\n"), 0o644)
	out, _, err = kplan(t, nil, "apply", "--kubeconfig", c.Kubeconfig, "--format", "json", "app")
	if err != nil || !strings.Contains(out, `"action": "pruned"`) {
		t.Errorf("prune: %v\n%s", err, out)
	}
}
