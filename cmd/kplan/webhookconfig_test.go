package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhookConfigSaysWhichOverlaysMeet pins the duplicate-object rule's
// third source of clusters: overlays the webhook's configuration deploys
// to one cluster meet there, so an object both render is dangerous; to
// two clusters, or without the file (kustomize variants, nothing says
// where they go), it is not.
func TestWebhookConfigSaysWhichOverlaysMeet(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	ui := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui, namespace: shop}\ndata: {v: '1'}\n"
	write(t, dir, map[string]string{
		"demo/kustomization.yaml": "resources: [ui.yaml]\n", "demo/ui.yaml": ui,
		"odh/kustomization.yaml": "resources: [cm.yaml]\n",
		"odh/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: odh, namespace: shop}\n",
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	base := git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{"odh/kustomization.yaml": "resources: [cm.yaml, ui.yaml]\n", "odh/ui.yaml": ui})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "odh renders the UI too")

	config := func(odhContext string) string {
		f := filepath.Join(t.TempDir(), "webhook.yaml")
		y := "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\nrepositories:\n  - name: octo/shop\n    branches:\n      - name: main\n        targets:\n" +
			"          - {name: demo, overlay: demo, context: prod}\n" +
			"          - {name: odh, overlay: odh, context: " + odhContext + "}\n"
		if err := os.WriteFile(f, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	diff := func(extra ...string) string {
		t.Helper()
		out, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", base, "--head", "HEAD"}, extra...)...)
		if err != nil {
			t.Fatalf("kplan diff %q: %v\n%s", extra, err, stderr)
		}
		return out
	}
	const dangerous = "[duplicate-object]"
	if out := diff(); strings.Contains(out, dangerous) {
		t.Errorf("variants without a webhook configuration are flagged:\n%s", out)
	}
	if out := diff("--webhook-config", config("prod")); !strings.Contains(out, dangerous) || !strings.Contains(out, "ConfigMap shop/ui") {
		t.Errorf("two overlays the webhook deploys to one cluster render ConfigMap shop/ui; want it flagged:\n%s", out)
	}
	if out := diff("--webhook-config", config("staging")); strings.Contains(out, dangerous) {
		t.Errorf("overlays the webhook deploys to two clusters are flagged:\n%s", out)
	}
	_, _, err := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "--webhook-config", config("prod"), "--repository", "octo/other")
	if err == nil || !strings.Contains(err.Error(), "does not configure repository octo/other") {
		t.Errorf("--repository the file does not configure: %v", err)
	}
}

// With the webhook's configuration, the plan says how each changed
// overlay rolls out on merge: after the targets it depends on (the
// order), only in its deploy windows.
func TestWebhookConfigShowsTheRollout(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	cm := func(ns, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: " + ns + "}\ndata: {v: '" + v + "'}\n"
	}
	write(t, dir, map[string]string{
		"staging/kustomization.yaml": "resources: [cm.yaml]\n", "staging/cm.yaml": cm("staging", "1"),
		"prod/kustomization.yaml": "resources: [cm.yaml]\n", "prod/cm.yaml": cm("prod", "1"),
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	base := git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{"staging/cm.yaml": cm("staging", "2"), "prod/cm.yaml": cm("prod", "2")})
	git(t, dir, "commit", "-qam", "v2")
	f := filepath.Join(t.TempDir(), "webhook.yaml")
	os.WriteFile(f, []byte(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
repositories:
  - name: octo/shop
    branches:
      - name: main
        targets:
          - {name: staging, overlay: staging}
          - name: prod
            overlay: prod
            dependsOn: [staging]
            deployWindows: [{days: [Mon-Fri], hours: "09:00-17:00", timeZone: Europe/Berlin}]
`), 0o644)
	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", "HEAD", "--webhook-config", f)
	if err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"webhook: target prod deploys a merge into main after staging has (dependsOn; order staging → prod), and not if it fails",
		"webhook: target prod deploys a merge into main only in its deploy windows (Mon,Tue,Wed,Thu,Fri 09:00-17:00 Europe/Berlin); outside them it waits (or a writer adds the label kplan/deploy-now)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "target staging deploys") {
		t.Errorf("the plan gives staging, which waits for nothing, a rollout note:\n%s", out)
	}
}
