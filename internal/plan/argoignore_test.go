package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/test/gittest"
)

// An Application's spec.ignoreDifferences are noise rules of its target:
// a JSON pointer and a jq path expression hide the changes Argo CD's diff
// leaves out, in the objects they name only, counted per rule; an
// expression kplan cannot evaluate and managedFieldsManagers are said in
// the target's notes, their changes shown.
func TestArgoCDIgnoreDifferencesAreCountedNoise(t *testing.T) {
	dir := argoRepo(t)
	app := readFile(t, dir, "apps/kustomize.yaml")
	ignore := "  ignoreDifferences:\n" +
		"    - group: apps\n      kind: Deployment\n      jsonPointers: [/spec/replicas]\n" +
		"      jqPathExpressions: ['.spec.template.spec.containers[] | select(.name == \"ui\") | .image', '.spec | nosuchfunction(1)']\n" +
		"    - kind: Service\n      name: nothing-here\n      jsonPointers: [/spec/ports]\n" +
		"    - group: '*'\n      kind: ConfigMap\n      managedFieldsManagers: [kube-controller-manager]\n"
	withIgnore := strings.Replace(app, "  destination:\n", ignore+"  destination:\n", 1)
	gittest.Write(t, dir, map[string]string{"apps/kustomize.yaml": withIgnore})
	git(t, dir, "commit", "-qam", "ignoreDifferences")

	// Replicas 3 → 5, ui's image 2.0 → 2.1, the cache's image and the
	// Service's port: only the first two are Argo CD's noise.
	changed := strings.NewReplacer("count: 3", "count: 5", "guestbook:2.0", "guestbook:2.1", "redis:7.2", "redis:7.4").Replace(withIgnore)
	gittest.Write(t, dir, map[string]string{
		"apps/kustomize.yaml":         changed,
		"guestbook/base/service.yaml": strings.Replace(readFile(t, dir, "guestbook/base/service.yaml"), "port: 80", "port: 8080", 1),
	})
	git(t, dir, "commit", "-qam", "the pull request")
	opts := Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}}
	p, _, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var o *inventorydiff.Overlay
	for i := range p.Overlays {
		if p.Overlays[i].Path == "argocd/guestbook" {
			o = &p.Overlays[i]
		}
	}
	if o == nil {
		t.Fatalf("no argocd/guestbook in %+v", p.Overlays)
	}
	var fields []string
	for _, c := range o.Changed {
		for _, f := range c.Fields {
			fields = append(fields, inventorydiff.Name(c.Key)+" "+f.Path)
		}
	}
	// The cache's image and the Service's port (named by the port, on
	// each side) stay; replicas and ui's image are hidden.
	if len(fields) < 2 || fields[0] != "Deployment prod-guestbook-ui-v1 (shop) spec.template.spec.containers[name=cache].image" ||
		slices.ContainsFunc(fields[1:], func(f string) bool { return !strings.HasPrefix(f, "Service prod-guestbook-ui-v1 (shop) spec.ports") }) {
		t.Errorf("changes shown %q, want the cache's image and the Service's port only", fields)
	}
	rules := map[string]inventorydiff.IgnoredRule{}
	for _, r := range p.Ignored {
		rules[r.Rule] = r
	}
	for rule, n := range map[string]int{
		"jsonPointers /spec/replicas of apps/Deployment":                                                         1,
		`jqPathExpressions .spec.template.spec.containers[] | select(.name == "ui") | .image of apps/Deployment`: 1,
		"jsonPointers /spec/ports of Service nothing-here":                                                       0,
	} {
		r, ok := rules[rule]
		if !ok || r.Fields != n || r.Source != "Argo CD Application argocd/guestbook spec.ignoreDifferences" {
			t.Errorf("rule %q: %+v (present %v), want %d fields hidden, counted under the Application", rule, r, ok, n)
		}
	}
	for _, note := range []string{
		`jqPathExpressions ".spec | nosuchfunction(1)" cannot be evaluated`,
		"managedFieldsManagers kube-controller-manager: the fields those managers own are known only in the cluster",
		"without the sync option RespectIgnoreDifferences=true",
	} {
		if !hasNote(o, note) {
			t.Errorf("notes %q, want %q", o.Notes, note)
		}
	}
}
