package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// These tests pin that the plan is what the merge does to the cluster:
// object identity, targets, inventories, failures and moves, each run with
// the real CLI on a real git repository, changed-only and --full.

// commitRepo makes a repository whose main holds base, then commits head
// over it (a "" value deletes a file); it returns the directory.
func commitRepo(t *testing.T, base, head map[string]string) string {
	t.Helper()
	dir := initRepo(t, base)
	change(t, dir, head)
	return dir
}

// initRepo makes a repository whose main holds files.
func initRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, files)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	return dir
}

func change(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if content == "" {
			git(t, dir, "rm", "-rq", name)
			delete(files, name)
		}
	}
	write(t, dir, files)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "head")
}

// bothModes runs kplan diff changed-only and --full on main~1..main, and
// checks both agree on what each overlay's status is.
func bothModes(t *testing.T, dir string, args ...string) jsonPlan {
	t.Helper()
	args = append([]string{"-C", dir, "--base", "main~1", "--head", "main", "--fail-on-error=false"}, args...)
	fast := diffJSON(t, args...)
	full := diffJSON(t, append(args, "--full")...)
	// (A failure an overlay the change cannot affect has on both sides is
	// reported by --full only, as the README says.)
	status := func(p jsonPlan) map[string]string {
		m := map[string]string{}
		for _, o := range p.Overlays {
			if o.Failure == "introduced" || (o.Status != "unchanged" && o.Status != "error") {
				m[o.Path] = o.Status + " " + o.Failure
			}
		}
		return m
	}
	if a, b := status(fast), status(full); !mapsEqual(a, b) {
		t.Fatalf("changed-only plan %v differs from --full %v", a, b)
	}
	return fast
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

const (
	hpaV1 = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: 3\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
	hpaV2 = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: 3\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
	fluxB = "apiVersion: kustomize.toolkit.fluxcd.io/v1beta2\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n"
	fluxV = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n"
)

func TestPlanAPIVersionBumpIsAChangeNotPruneAndAdd(t *testing.T) {
	dir := commitRepo(t,
		map[string]string{"app/kustomization.yaml": "resources: [hpa.yaml, flux.yaml]\n", "app/hpa.yaml": hpaV1, "app/flux.yaml": fluxB},
		map[string]string{"app/hpa.yaml": hpaV2, "app/flux.yaml": fluxV})
	o := bothModes(t, dir).overlay(t, "app")
	if len(o.Added)+len(o.Pruned) != 0 || len(o.Dangerous) != 0 {
		t.Fatalf("an apiVersion bump planned as add %q / prune %q, dangerous %q", o.Added, o.Pruned, o.Dangerous)
	}
	want := []string{"autoscaling_v2_HorizontalPodAutoscaler|default|web", "kustomize.toolkit.fluxcd.io_v1_Kustomization|flux-system|apps"}
	if !slices.Equal(o.Changed, want) {
		t.Fatalf("changed %q, want %q", o.Changed, want)
	}
	f := o.Fields["autoscaling_v2_HorizontalPodAutoscaler|default|web"]
	if len(f) != 1 || f[0].Path != "apiVersion" || f[0].Old != `"autoscaling/v1"` || f[0].New != `"autoscaling/v2"` {
		t.Errorf("HPA field changes %+v, want only apiVersion autoscaling/v1 → autoscaling/v2", f)
	}
}

func TestPlanExplicitDefaultNamespaceIsNoChange(t *testing.T) {
	pvc := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n%sspec:\n  resources: {requests: {storage: 1Gi}}\n"
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: %s\n  names: {kind: %s, plural: %s}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	files := func(ns string) map[string]string {
		return map[string]string{
			"app/kustomization.yaml": "resources: [pvc.yaml, crds.yaml, objs.yaml]\n",
			"app/pvc.yaml":           strings.Replace(pvc, "%s", ns, 1),
			"app/crds.yaml": strings.NewReplacer("%s", "Namespaced").Replace(strings.Replace(strings.Replace(crd, "%s", "Namespaced", 1), "%s", "Widget", 1)) + "---\n" +
				strings.Replace(strings.Replace(strings.Replace(strings.Replace(crd, "widgets", "globals", 1), "%s", "Cluster", 1), "%s", "Global", 1), "%s", "globals", 1),
			"app/objs.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n---\napiVersion: example.com/v1\nkind: Global\nmetadata:\n  name: g\n",
		}
	}
	dir := initRepo(t, map[string]string{"README.md": "config\n"})
	change(t, dir, files(""))
	// Keys say where objects land: the default namespace for namespaced
	// kinds (built in, or from a CRD in the render), none for cluster ones.
	out, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"~G_v1_PersistentVolumeClaim|default|data"`, `"example.com_v1_Widget|default|w"`, `"example.com_v1_Global||g"`} {
		if !strings.Contains(out, want) {
			t.Errorf("plan of the new overlay lacks %s:\n%s", want, out)
		}
	}
	change(t, dir, map[string]string{"app/pvc.yaml": strings.Replace(pvc, "%s", "  namespace: default\n", 1)})
	o := bothModes(t, dir).overlay(t, "app")
	if o.Status != "unchanged" || len(o.Added)+len(o.Pruned)+len(o.Changed) != 0 || len(o.Dangerous) != 0 {
		t.Fatalf("adding namespace: default planned %+v, want no change", o)
	}
}

func TestPlanOverlayUsedAsBaseIsPlannedWhenNamed(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata: {k: %s}\n"
	dir := commitRepo(t,
		map[string]string{
			"overlays/staging/kustomization.yaml": "resources: [cm.yaml]\n",
			"overlays/staging/cm.yaml":            strings.NewReplacer("%s", "app").Replace(cm),
		},
		map[string]string{
			// prod starts to build on staging, and staging changes.
			"overlays/prod/kustomization.yaml": "resources: [../staging]\nnamePrefix: prod-\n",
			"overlays/staging/cm.yaml":         strings.Replace(strings.Replace(cm, "%s", "app", 1), "%s", "v2", 1),
		})
	p := bothModes(t, dir)
	// staging, listed by prod on head only, is still planned on both
	// sides: a change, not "removed: prunes every object".
	if o := p.overlay(t, "overlays/staging"); o.Status != "changed" || len(o.Pruned) != 0 || !slices.Equal(o.Changed, []string{"~G_v1_ConfigMap|default|app"}) {
		t.Errorf("staging: %+v, want one change and no prune", o)
	}
	if o := p.overlay(t, "overlays/prod"); o.Status != "new" {
		t.Errorf("prod: %+v, want new", o)
	}
	// Once both sides list it, staging is planned when named.
	change(t, dir, map[string]string{"overlays/staging/cm.yaml": strings.Replace(strings.Replace(cm, "%s", "app", 1), "%s", "v3", 1)})
	if p := bothModes(t, dir); len(p.Overlays) != 1 || p.Overlays[0].Path != "overlays/prod" {
		t.Errorf("by default only prod is an overlay: %+v", p.Overlays)
	}
	p = bothModes(t, dir, "--overlays", "overlays/staging")
	if o := p.overlay(t, "overlays/staging"); o.Status != "changed" {
		t.Errorf("--overlays overlays/staging: %+v, want staging changed", o)
	}
}

func TestPlanTargetsFromKplanYAML(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata: {k: %s}\n"
	dir := commitRepo(t,
		map[string]string{
			".kplan.yaml":                         "targets:\n  - name: staging\n    overlay: overlays/staging\n    namespace: apps\n  - name: prod\n    overlay: overlays/prod\n",
			"overlays/staging/kustomization.yaml": "resources: [cm.yaml]\n",
			"overlays/staging/cm.yaml":            strings.Replace(cm, "%s", "v1", 1),
			"overlays/prod/kustomization.yaml":    "resources: [../staging]\nnamePrefix: prod-\n",
			"scratch/kustomization.yaml":          "resources: [cm.yaml]\n",
			"scratch/cm.yaml":                     strings.Replace(cm, "%s", "v1", 1),
		},
		map[string]string{"overlays/staging/cm.yaml": strings.Replace(cm, "%s", "v2", 1), "scratch/cm.yaml": strings.Replace(cm, "%s", "v2", 1)})
	p := bothModes(t, dir)
	if len(p.Overlays) != 2 {
		t.Fatalf("planned %d overlays, want the 2 targets (not scratch): %+v", len(p.Overlays), p.Overlays)
	}
	st := p.overlay(t, "overlays/staging")
	if !slices.Equal(st.Targets, []string{"staging"}) || !slices.Equal(st.Changed, []string{"~G_v1_ConfigMap|apps|app"}) {
		t.Errorf("staging: targets %q changed %q, want target staging and the ConfigMap in its namespace apps", st.Targets, st.Changed)
	}
	if pr := p.overlay(t, "overlays/prod"); !slices.Equal(pr.Changed, []string{"~G_v1_ConfigMap|default|prod-app"}) {
		t.Errorf("prod changed %q", pr.Changed)
	}
	out, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main")
	if err != nil || !strings.Contains(out, "target staging (overlays/staging)") {
		t.Errorf("text plan does not name the target (%v):\n%s", err, out)
	}
	// A new target is deployed for the first time: everything is added. A
	// target taken out is no longer deployed: nothing is pruned.
	change(t, dir, map[string]string{".kplan.yaml": "targets:\n  - name: prod\n    overlay: overlays/prod\n  - name: scratch\n    overlay: scratch\n"})
	p = bothModes(t, dir)
	if o := p.overlay(t, "scratch"); o.Status != "new" || !slices.Equal(o.Added, []string{"~G_v1_ConfigMap|default|app"}) {
		t.Errorf("a new target: %+v, want new with its ConfigMap added", o)
	}
	if o := p.overlay(t, "overlays/staging"); o.Status != "removed" || len(o.Pruned) != 0 || !slices.Equal(o.Detached, []string{"~G_v1_ConfigMap|apps|app"}) || len(o.Dangerous) != 0 {
		t.Errorf("a target taken out: %+v, want its objects left in the cluster, nothing pruned", o)
	}
	// A broken file is an error naming it.
	change(t, dir, map[string]string{".kplan.yaml": "targets:\n  - name: x\n    overlays: typo\n"})
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main"); err == nil || !strings.Contains(err.Error(), ".kplan.yaml") {
		t.Errorf("a broken .kplan.yaml: err %v, want one naming the file", err)
	}
}

func rg(name, id string) string {
	s := "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: " + name + "\n  namespace: default\n"
	if id != "" {
		s += "  labels:\n    cli-utils.sigs.k8s.io/inventory-id: " + id + "\n"
	}
	return s
}

func TestPlanCopiedInventoryIsFlaggedOnBoth(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata: {k: v}\n"
	dir := commitRepo(t,
		map[string]string{
			"staging/kustomization.yaml": "resources: [cm.yaml]\n",
			"staging/resourcegroup.yaml": rg("inventory-staging", ""),
			"staging/cm.yaml":            strings.Replace(cm, "%s", "a", 1),
			"other/kustomization.yaml":   "resources: [cm.yaml]\n",
			"other/cm.yaml":              strings.Replace(cm, "%s", "o", 1),
		},
		// cp -r staging prod, then prod's object renamed.
		map[string]string{
			"prod/kustomization.yaml": "resources: [cm.yaml]\n",
			"prod/resourcegroup.yaml": rg("inventory-staging", ""),
			"prod/cm.yaml":            strings.Replace(cm, "%s", "b", 1),
		})
	p := bothModes(t, dir)
	for path, other := range map[string]string{"staging": "prod", "prod": "staging"} {
		o := p.overlay(t, path)
		if !slices.Equal(o.SharedInventoryWith, []string{other}) || o.Failure != "introduced" || !strings.Contains(o.Error, "prunes the other's objects") {
			t.Errorf("%s: shared with %q, failure %q, error %q; want shared with %s, introduced, saying what applying does", path, o.SharedInventoryWith, o.Failure, o.Error, other)
		}
		if o.Head.Inventory == nil || o.Head.Inventory.ID != "inventory-staging-default" {
			t.Errorf("%s: inventory %+v", path, o.Head.Inventory)
		}
	}
	if len(p.overlay(t, "other").SharedInventoryWith) != 0 {
		t.Error("other has no inventory to share")
	}
	// Targets in different environments (clusters) may share one; the
	// environment defaults to the target's name.
	for i, tc := range []struct {
		env  string
		want []string
	}{{", environment: staging", []string{"staging"}}, {"", nil}} {
		first := git(t, dir, "rev-parse", "main~1")
		git(t, dir, "checkout", "-qb", fmt.Sprint("targets", i), first)
		change(t, dir, map[string]string{
			".kplan.yaml":             "targets:\n  - {name: staging, overlay: staging}\n  - {name: prod, overlay: prod" + tc.env + "}\n",
			"prod/kustomization.yaml": "resources: [cm.yaml]\n", "prod/resourcegroup.yaml": rg("inventory-staging", ""), "prod/cm.yaml": strings.Replace(cm, "%s", "b", 1),
		})
		for _, full := range []string{"--full=false", "--full"} {
			o := diffJSON(t, "-C", dir, "--base", first, "--head", "HEAD", full).overlay(t, "prod")
			if !slices.Equal(o.SharedInventoryWith, tc.want) {
				t.Errorf("targets %q %s: prod shares its inventory with %q, want %q", tc.env, full, o.SharedInventoryWith, tc.want)
			}
		}
		git(t, dir, "checkout", "-q", "main")
	}
	_, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main")
	if !errors.Is(err, exitError(1)) {
		t.Errorf("a shared inventory the change brings: err %v, want exit 1", err)
	}
	out, _, _ := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main", "--format", "markdown")
	if !strings.Contains(out, "Cannot be applied safely") || !strings.Contains(out, "inventory-id inventory-staging-default is also the inventory of staging") {
		t.Errorf("the comment does not say the inventory is shared:\n%s", out)
	}
}

func TestPlanRenamedInventoryIsDangerous(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {k: v}\n"
	for _, tc := range []struct{ name, head, want string }{
		{"new inventory-id", rg("inventory-app", "other-id"), "skips them"},
		{"same inventory-id", rg("renamed", "inventory-app-default"), "same inventory-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := commitRepo(t,
				map[string]string{"app/kustomization.yaml": "resources: [cm.yaml, resourcegroup.yaml]\n", "app/resourcegroup.yaml": rg("inventory-app", ""), "app/cm.yaml": cm},
				map[string]string{"app/resourcegroup.yaml": tc.head})
			o := bothModes(t, dir).overlay(t, "app")
			if len(o.Dangerous) != 1 || !strings.Contains(o.Dangerous[0], "changes from ResourceGroup default/inventory-app") || !strings.Contains(o.Dangerous[0], tc.want) {
				t.Errorf("dangerous %q, want the inventory change saying %q", o.Dangerous, tc.want)
			}
		})
	}
}

func TestPlanPreexistingFailureDoesNotFail(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {k: %s}\n"
	dir := commitRepo(t,
		map[string]string{
			"broken/kustomization.yaml": "resources: [cm.yaml, missing.yaml]\n",
			"broken/cm.yaml":            strings.Replace(cm, "%s", "v1", 1),
			"good/kustomization.yaml":   "resources: [cm.yaml]\n",
			"good/cm.yaml":              strings.Replace(cm, "%s", "v1", 1),
		},
		map[string]string{"broken/cm.yaml": strings.Replace(cm, "%s", "v2", 1), "good/cm.yaml": strings.Replace(cm, "%s", "v2", 1)})
	o := bothModes(t, dir).overlay(t, "broken")
	if o.Failure != "existing" {
		t.Errorf("broken: failure %q, want existing", o.Failure)
	}
	out, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main")
	if err != nil || !strings.Contains(out, "already failing on base") {
		t.Errorf("a failure already on base: err %v, want exit 0 and the plan saying so:\n%s", err, out)
	}
	change(t, dir, map[string]string{"good/kustomization.yaml": "resources: [cm.yaml, gone.yaml]\n"})
	if o := bothModes(t, dir).overlay(t, "good"); o.Failure != "introduced" {
		t.Errorf("good: failure %q, want introduced", o.Failure)
	}
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main"); !errors.Is(err, exitError(1)) {
		t.Errorf("a failure the change brings: err %v, want exit 1", err)
	}
}

func TestPlanMoveIsNotMassDeletion(t *testing.T) {
	ns := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n"
	pvc := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: app\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"same inventory", map[string]string{"kustomization.yaml": "resources: [ns.yaml, pvc.yaml]\n", "resourcegroup.yaml": rg("inventory-app", ""), "ns.yaml": ns, "pvc.yaml": pvc}},
		{"same objects", map[string]string{"kustomization.yaml": "resources: [ns.yaml, pvc.yaml]\n", "ns.yaml": ns, "pvc.yaml": pvc}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := map[string]string{}
			for f, c := range tc.files {
				base["clusters/old/"+f] = c
			}
			dir := initRepo(t, base)
			git(t, dir, "mv", "clusters/old", "clusters/new")
			change(t, dir, map[string]string{"clusters/new/pvc.yaml": pvc + "spec:\n  resources: {requests: {storage: 2Gi}}\n"})
			p := bothModes(t, dir)
			if len(p.Overlays) != 1 {
				t.Fatalf("overlays %+v, want one moved overlay", p.Overlays)
			}
			o := p.Overlays[0]
			if o.Status != "moved" || o.Path != "clusters/new" || o.MovedFrom != "clusters/old" {
				t.Fatalf("status %s path %s from %s, want clusters/new moved from clusters/old", o.Status, o.Path, o.MovedFrom)
			}
			if len(o.Pruned)+len(o.Added)+len(o.Dangerous) != 0 || !slices.Equal(o.Changed, []string{"~G_v1_PersistentVolumeClaim|app|data"}) {
				t.Errorf("a move planned add %q prune %q dangerous %q changed %q; want only the PVC change", o.Added, o.Pruned, o.Dangerous, o.Changed)
			}
		})
	}
}

func TestPlanReportsKustomizationCycles(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	dir := commitRepo(t,
		map[string]string{"a/kustomization.yaml": "resources: [cm.yaml]\n", "a/cm.yaml": cm, "b/kustomization.yaml": "resources: [cm.yaml]\n", "b/cm.yaml": cm},
		map[string]string{"a/kustomization.yaml": "resources: [cm.yaml, ../b]\n", "b/kustomization.yaml": "resources: [cm.yaml, ../a]\n"})
	o := bothModes(t, dir).overlay(t, "a")
	if o.Failure != "introduced" || !strings.Contains(o.Error, "a → b → a") {
		t.Errorf("a cycle: %+v, want an introduced failure naming a → b → a", o)
	}
}
