package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A change nothing here reads is never a bare "no change": a README is
// listed as unread; a file reached only through a Flux Kustomization's
// spec.components (as onedr0p/home-ops' shared backup component is) is
// planned in Flux mode, and without it listed as unread with a hint; a
// file an overlay reads is not listed, nor is the ResourceGroup file the
// plan reads for an overlay's inventory.
func TestDiffListsChangedFilesNoOverlayReads(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"apps/web/kustomization.yaml":          "resources: [cm.yaml]\n",
		"apps/web/cm.yaml":                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {k: v}\n",
		"components/backup/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [pvc.yaml]\n",
		"components/backup/pvc.yaml":           "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: backup}\nspec: {resources: {requests: {storage: 1Gi}}}\n",
		"flux/web.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: web, namespace: flux-system}\n" +
			"spec: {path: ./apps/web, components: [../../components/backup], sourceRef: {kind: GitRepository, name: flux-system}}\n",
		"README.md": "# ops\n",
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	base := git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{
		"components/backup/pvc.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: backup}\nspec: {resources: {requests: {storage: 5Gi}}}\n",
		"README.md":                  "# ops\n\nBackups are 5Gi now.\n",
	})
	git(t, dir, "commit", "-qam", "bigger backups")

	// Flux mode (detected from the Flux Kustomization): the component is
	// read by the Flux target and planned; only the README is unread.
	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD")
	if err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "1 changed file no overlay reads") || !strings.Contains(out, "  README.md\n") || strings.Contains(out, "  components/backup/pvc.yaml —") ||
		!strings.Contains(out, "flux-system/web") {
		t.Errorf("Flux mode:\n%s", out)
	}
	// Without Flux mode nothing kplan plans reads the component.
	out, stderr, err = kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "--flux=false")
	if err != nil {
		t.Fatalf("kplan diff --flux=false: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"No overlay reads these changed files",
		"  README.md\n",
		"  components/backup/pvc.yaml — YAML beside the kustomizations under components/",
		"Plan: 0 to add, 0 to change, 0 to prune in 0 of 1 overlays; 2 changed files no overlay reads.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text plan lacks %q:\n%s", want, out)
		}
	}
	md, _, _ := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "-o", "markdown", "--flux=false")
	if !strings.Contains(md, "**No overlay reads these changed files** (2)") || !strings.Contains(md, "- ⚠️ `components/backup/pvc.yaml` — YAML beside") {
		t.Errorf("Markdown plan:\n%s", md)
	}
	js, _, _ := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "-o", "json", "--flux=false")
	var p struct {
		Summary string
		Unread  []struct{ Path, Hint string }
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil || len(p.Unread) != 2 || p.Unread[0].Path != "README.md" || p.Unread[0].Hint != "" ||
		p.Unread[1].Path != "components/backup/pvc.yaml" || p.Unread[1].Hint == "" {
		t.Errorf("JSON unread %+v (%v)", p.Unread, err)
	}

	// A file the overlay reads is planned, not listed.
	write(t, dir, map[string]string{"apps/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {k: v2}\n"})
	git(t, dir, "commit", "-qam", "web")
	out, _, _ = kplan(t, nil, "diff", "-C", dir, "--base", "HEAD~", "--head", "HEAD", "--flux=false")
	if strings.Contains(out, "No overlay reads") || !strings.Contains(out, "0 to add, 1 to change, 0 to prune in 1 of 1 overlays.") {
		t.Errorf("a read file:\n%s", out)
	}

	// kplan init's file beside the overlay: planned as the inventory it
	// gives, not listed as unread.
	if _, stderr, err := kplan(t, nil, "init", filepath.Join(dir, "apps/web"), "--name", "web-inv"); err != nil {
		t.Fatalf("kplan init: %v\n%s", err, stderr)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "inventory")
	js, _, _ = kplan(t, nil, "diff", "-C", dir, "--base", "HEAD~", "--head", "HEAD", "-o", "json", "--flux=false")
	var inv struct {
		Unread   []struct{ Path string }
		Overlays []struct {
			Head struct{ Inventory *struct{ Name string } }
		}
	}
	if err := json.Unmarshal([]byte(js), &inv); err != nil || len(inv.Unread) != 0 || len(inv.Overlays) != 1 ||
		inv.Overlays[0].Head.Inventory == nil || inv.Overlays[0].Head.Inventory.Name != "web-inv" {
		t.Errorf("a ResourceGroup file added: %v\n%s", err, js)
	}
}
