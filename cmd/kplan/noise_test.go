package main

import (
	"strings"
	"testing"
)

// TestVersionLabelOnlyChangeIsHiddenAndCounted pins the default noise
// set on a release bump that only rewrites chart and version labels: the
// plan shows no change and says what it hid, where it read "1 to change";
// --no-default-ignore and .kplan.yaml's ignore.defaults: false show it.
func TestVersionLabelOnlyChangeIsHiddenAndCounted(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	svc := func(v string) string {
		return "apiVersion: v1\nkind: Service\nmetadata:\n  name: istiod\n  labels: {app.kubernetes.io/version: '" + v + "', helm.sh/chart: istiod-" + v + "}\nspec: {ports: [{port: 443}]}\n"
	}
	write(t, dir, map[string]string{"istio/kustomization.yaml": "resources: [svc.yaml]\n", "istio/svc.yaml": svc("1.22.1")})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	write(t, dir, map[string]string{"istio/svc.yaml": svc("1.22.2")})
	git(t, dir, "commit", "-qam", "bump")

	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "HEAD~", "--head", "HEAD", "--exit-code")
	if err != nil {
		t.Fatalf("a label-only bump: %v (want exit 0: nothing to review)\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		"Hidden by default: 2 fields in 1 object (metadata.labels.app.kubernetes.io/version, metadata.labels.helm.sh/chart); --no-default-ignore shows them.",
		"Plan: 0 to add, 0 to change, 0 to prune in 0 of 1 overlays.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = kplan(t, nil, "diff", "-C", dir, "--base", "HEAD~", "--head", "HEAD", "--no-default-ignore")
	if !strings.Contains(out, `metadata.labels.helm.sh/chart: "istiod-1.22.1" → "istiod-1.22.2"`) || strings.Contains(out, "Hidden by default") {
		t.Errorf("--no-default-ignore:\n%s", out)
	}
	// .kplan.yaml on head turns it off too.
	write(t, dir, map[string]string{".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\nignore: {defaults: false}\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "show every label")
	out, _, _ = kplan(t, nil, "diff", "-C", dir, "--base", "HEAD~2", "--head", "HEAD")
	if !strings.Contains(out, "1 to change") || strings.Contains(out, "Hidden by default") {
		t.Errorf(".kplan.yaml ignore.defaults: false:\n%s", out)
	}
}
