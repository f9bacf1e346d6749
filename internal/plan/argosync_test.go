package plan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/test/gittest"
)

// planStep commits what change did to dir and plans it against its
// parent, changed-only and --full alike; it returns the plan's
// Application name.
func planStep(t *testing.T, dir, name string, change func()) *inventorydiff.Overlay {
	t.Helper()
	change()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", name)
	opts := Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}}
	p, _, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	opts.Full = true
	full, _, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatalf("%s --full: %v", name, err)
	}
	sameChanges(t, name, full, p)
	for i := range p.Overlays {
		if p.Overlays[i].Path == "argocd/plain" {
			return &p.Overlays[i]
		}
	}
	t.Fatalf("%s: no argocd/plain in the plan", name)
	return nil
}

func argoCM(name, annotations string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations: {" + annotations + "}\ndata: {k: v}\n"
}

func hasNote(o *inventorydiff.Overlay, s string) bool {
	return slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, s) })
}

// Argo CD's sync options that change what a prune does: an object with
// Prune=false (or under an Application whose syncOptions say so) stays
// in the cluster, counted as left there, not pruned, and said why; an
// object with Delete=false outlives its deleted Application; removing
// such a protection is a finding; IgnoreExtraneous is said.
func TestArgoCDSyncOptionsChangeWhatPruneDoes(t *testing.T) {
	dir := argoRepo(t)
	write := func(files map[string]string) func() { return func() { gittest.Write(t, dir, files) } }
	planStep(t, dir, "objects", write(map[string]string{
		"plain/keep.yaml":    argoCM("keep", "argocd.argoproj.io/sync-options: 'Validate=false, Prune=false'"),
		"plain/gone.yaml":    argoCM("gone", ""),
		"plain/quiet.yaml":   argoCM("quiet", "argocd.argoproj.io/compare-options: IgnoreExtraneous"),
		"plain/retain.yaml":  argoCM("retain", "argocd.argoproj.io/sync-options: Delete=false"),
		"plain/unguard.yaml": argoCM("unguard", "argocd.argoproj.io/sync-options: Prune=false"),
		"plain/confirm.yaml": argoCM("confirm", "argocd.argoproj.io/sync-options: Prune=confirm"),
	}))

	o := planStep(t, dir, "removals", func() {
		for _, f := range []string{"keep", "gone", "quiet", "confirm"} {
			if err := os.Remove(filepath.Join(dir, "plain", f+".yaml")); err != nil {
				t.Fatal(err)
			}
		}
		gittest.Write(t, dir, map[string]string{"plain/unguard.yaml": argoCM("unguard", "")})
	})
	if !slices.Equal(o.Pruned, []string{"~G_v1_ConfigMap|plain|gone", "~G_v1_ConfigMap|plain|quiet"}) {
		t.Errorf("pruned %q, want gone and quiet: Prune=false and Prune=confirm objects are not pruned", o.Pruned)
	}
	if !slices.Equal(o.Detached, []string{"~G_v1_ConfigMap|plain|confirm", "~G_v1_ConfigMap|plain|keep"}) {
		t.Errorf("left in the cluster %q, want confirm and keep", o.Detached)
	}
	for _, want := range []string{
		"ConfigMap keep (plain) stays in the cluster: its argocd.argoproj.io/sync-options says Prune=false",
		"ConfigMap confirm (plain) stays in the cluster: its argocd.argoproj.io/sync-options says Prune=confirm",
		"ConfigMap quiet (plain) carries argocd.argoproj.io/compare-options: IgnoreExtraneous",
	} {
		if !hasNote(o, want) {
			t.Errorf("notes %q, want %q", o.Notes, want)
		}
	}
	if i := slices.IndexFunc(o.Dangerous, func(f danger.Finding) bool { return f.Rule == danger.ArgoCDProtectionRemoved }); i < 0 ||
		o.Dangerous[i].Object != "~G_v1_ConfigMap|plain|unguard" || !strings.Contains(o.Dangerous[i].Reason, "loses its Argo CD sync option Prune=false") {
		t.Errorf("findings %v, want unguard's Prune=false removed", o.Dangerous)
	}

	// The Application's own Prune=false keeps what leaves it; dropping
	// it is a finding.
	original := readFile(t, dir, "apps/plain.yaml")
	app := func(opts string) func() {
		return write(map[string]string{"apps/plain.yaml": strings.Replace(original,
			"    namespace: plain\n---", "    namespace: plain\n  syncPolicy: {syncOptions: ["+opts+"]}\n---", 1)})
	}
	planStep(t, dir, "app Prune=false", func() { app("Prune=false")(); write(map[string]string{"plain/gone.yaml": argoCM("gone", "")})() })
	o = planStep(t, dir, "prune under the app's Prune=false", func() { os.Remove(filepath.Join(dir, "plain/gone.yaml")) })
	if len(o.Pruned) != 0 || !slices.Equal(o.Detached, []string{"~G_v1_ConfigMap|plain|gone"}) ||
		!hasNote(o, "ConfigMap gone (plain) stays in the cluster: the Application's spec.syncPolicy.syncOptions says Prune=false") {
		t.Errorf("pruned %q, left %q, notes %q; want gone left in the cluster by the Application's Prune=false", o.Pruned, o.Detached, o.Notes)
	}
	o = planStep(t, dir, "app drops Prune=false", app("Validate=false"))
	if !slices.ContainsFunc(o.Dangerous, func(f danger.Finding) bool {
		return f.Rule == danger.ArgoCDProtectionRemoved && f.Object == "" && strings.Contains(f.Reason, "drops its sync option Prune=false")
	}) {
		t.Errorf("findings %v, want the Application's Prune=false dropped", o.Dangerous)
	}

	// Deleting the Application: with the resources finalizer, Argo CD
	// deletes its objects but the Delete=false one; without, none.
	doc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: plain\n  namespace: argocd\n"
	apps := readFile(t, dir, "apps/plain.yaml")
	planStep(t, dir, "finalizer", write(map[string]string{"apps/plain.yaml": strings.Replace(apps, doc, doc+"  finalizers: [resources-finalizer.argocd.argoproj.io]\n", 1)}))
	withFinalizer := readFile(t, dir, "apps/plain.yaml")
	rest := withFinalizer[strings.Index(withFinalizer, "---\n")+4:]
	o = planStep(t, dir, "delete the Application", write(map[string]string{"apps/plain.yaml": rest}))
	if !slices.Equal(o.Detached, []string{"~G_v1_ConfigMap|plain|retain"}) || len(o.Pruned) == 0 ||
		!hasNote(o, "ConfigMap retain (plain) stays in the cluster: its argocd.argoproj.io/sync-options says Delete=false") {
		t.Errorf("pruned %q, left %q, notes %q; want all pruned but retain", o.Pruned, o.Detached, o.Notes)
	}
	git(t, dir, "reset", "-q", "--hard", "HEAD~2")
	o = planStep(t, dir, "delete the Application without the finalizer", write(map[string]string{"apps/plain.yaml": apps[strings.Index(apps, "---\n")+4:]}))
	if len(o.Pruned) != 0 || len(o.Detached) < 3 || !hasNote(o, "without the resources-finalizer.argocd.argoproj.io finalizer") {
		t.Errorf("pruned %q, left %q, notes %q; want every object left in the cluster", o.Pruned, o.Detached, o.Notes)
	}
}

func readFile(t *testing.T, dir, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
