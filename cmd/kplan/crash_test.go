package main

import (
	"strings"
	"testing"
)

// fluxReplacementsRepo is a Flux repository whose app reads a kustomize
// replacements file: a YAML list at the top level, naming the Flux group
// in its text (as one on a real Flux repository did). Head changes the
// app's ConfigMap.
func fluxReplacementsRepo(t *testing.T) string {
	t.Helper()
	return commitRepo(t, map[string]string{
		"apps/web/kustomization.yaml": "resources: [cm.yaml]\nreplacements:\n- path: replacements.yaml\n",
		"apps/web/cm.yaml":            configMap("web", "host: a"),
		"apps/web/replacements.yaml": "# copies the host into the Flux Kustomization (kustomize.toolkit.fluxcd.io) too\n" +
			"- source: {kind: ConfigMap, name: web, fieldPath: data.host}\n" +
			"  targets:\n  - select: {kind: ConfigMap, name: web}\n    fieldPaths: [data.copy]\n    options: {create: true}\n",
		"flux/web.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: web, namespace: flux-system}\n" +
			"spec: {path: ./apps/web, sourceRef: {kind: GitRepository, name: flux-system}}\n",
	}, map[string]string{"apps/web/cm.yaml": configMap("web", "host: b")})
}

// A top-level YAML list naming the Flux group is legal YAML, not a Flux
// Kustomization: Flux discovery skips it, and the change is planned,
// changed-only and --full, the replacements applied, with --exit-code's
// 2 meaning changes.
func TestFluxReplacementsListIsPlanned(t *testing.T) {
	dir := fluxReplacementsRepo(t)
	for _, mode := range [][]string{nil, {"--full"}} {
		args := append([]string{"diff", "-C", dir, "--base", "main~1", "--head", "main", "--exit-code"}, mode...)
		out, stderr, err := kplan(t, nil, args...)
		if code := exitOf(t, err, stderr); code != 2 {
			t.Errorf("kplan %s: exit %d, want 2 (changes)\n%s%s", strings.Join(mode, " "), code, out, stderr)
		}
		for _, want := range []string{"flux-system/web: 0 to add, 1 to change", `~ data.copy: "a" → "b"`} {
			if !strings.Contains(out, want) {
				t.Errorf("kplan %s: the plan lacks %q:\n%s%s", strings.Join(mode, " "), want, out, stderr)
			}
		}
	}
}
