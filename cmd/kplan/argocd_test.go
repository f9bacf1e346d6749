package main

import (
	"os"
	"strings"
	"testing"
)

// An Argo CD repository's pull request is planned per Application, by
// its name, with the Application's own settings: a new image tag in an
// Application's kustomize.images changes its Deployment; the comment,
// the text and the JSON name the Application, and say that without
// automated sync Argo CD applies it when someone syncs. With
// --argocd=false the same change reads as no change of the kustomize
// directory (Argo CD's settings are not in it).
func TestDiffPlansArgoCDApplications(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../internal/argocd/testdata/repo")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "git@github.com:example/deploy.git")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	app, err := os.ReadFile(dir + "/apps/kustomize.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"apps/kustomize.yaml": strings.Replace(string(app), "guestbook:2.0", "guestbook:2.1", 1)})
	git(t, dir, "commit", "-qam", "guestbook 2.1")

	p := diffJSON(t, "-C", dir, "--base", "main~", "--head", "HEAD")
	o := p.overlay(t, "argocd/guestbook")
	if o.Status != "changed" || len(o.Changed) != 1 || !strings.Contains(o.Changed[0], "Deployment|shop|prod-guestbook-ui-v1") {
		t.Errorf("argocd/guestbook: %+v", o)
	}
	for _, f := range o.Fields[o.Changed[0]] {
		if !strings.Contains(string(f.New), "registry.example.com/guestbook:2.1") && !strings.Contains(f.Path, "image") {
			t.Errorf("field %+v, want the image", f)
		}
	}
	if p.Totals.ChangedOverlays != 1 || p.Totals.Overlays != 4 {
		t.Errorf("totals %+v, want 1 of the 4 Applications changed", p.Totals)
	}
	text, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~", "--head", "HEAD")
	if err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	for _, want := range []string{"argocd/guestbook: 0 to add, 1 to change", "registry.example.com/guestbook:2.1", "in 1 of 4 overlays",
		// What Argo CD will not do on its own at the merge.
		"  note: Argo CD: no automated sync (spec.syncPolicy.automated)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text plan lacks %q:\n%s", want, text)
		}
	}
	md, _, _ := kplan(t, nil, "diff", "-C", dir, "--base", "main~", "--head", "HEAD", "-o", "markdown")
	if !strings.Contains(md, "argocd/guestbook") || !strings.Contains(md, "> Argo CD:\n> - no automated sync") {
		t.Errorf("Markdown plan lacks the Application:\n%s", md)
	}

	off := diffJSON(t, "-C", dir, "--base", "main~", "--head", "HEAD", "--argocd=false")
	if o := off.overlay(t, "guestbook/base"); o.Status != "unchanged" {
		t.Errorf("--argocd=false: guestbook/base %+v, want unchanged (the settings are the Application's)", o)
	}
}
