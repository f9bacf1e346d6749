package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
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

// A panic in kplan outside any overlay's planning (here, reading its
// environment) exits 1 with the panic, its stack and where to report
// it: never 2, which --exit-code means as "the plan has changes".
func TestCrashExitsOneNeverTwo(t *testing.T) {
	dir := fluxReplacementsRepo(t)
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { panic("injected: getenv " + k) }
	code := runMain(context.Background(), []string{"diff", "-C", dir, "--base", "main~1", "--exit-code"}, getenv, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"kplan crashed (a bug): " + crash.Marker + "injected: getenv KPLAN_DEBUG (please report it at " + crash.ReportURL + ")\n",
		"\npanic(", // the stack, from the panic
		"kplan crashed (a bug): please report it, with the lines above, at " + crash.ReportURL + "\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A plan in which an overlay crashed (a bug, recovered: the overlay
// fails, the others are planned) ends kplan diff and merge with 1,
// whatever --exit-code and --fail-on-error say: what the change does to
// that overlay is unknown, so the plan must not pass as "changes" (2) or
// as clean (0).
func TestCrashedOverlayExitsOne(t *testing.T) {
	crashed := "crashy/kustomization.yaml: " + crash.Marker + "injected (please report it at " + crash.ReportURL + ")"
	p := &inventorydiff.Plan{Overlays: []inventorydiff.Overlay{
		{Path: "crashy", Status: inventorydiff.Failed, BaseErr: crashed, HeadErr: crashed},
		{Path: "web", Status: inventorydiff.Changed, Changed: []inventorydiff.Change{{Key: "~G_v1_ConfigMap|default|web"}}},
	}}
	p.Totals = inventorydiff.Sum(p.Overlays)
	for _, flags := range [][2]bool{{true, true}, {false, true}, {false, false}, {true, false}} {
		var stderr bytes.Buffer
		err := planExit(p, flags[0], flags[1])
		if code := exitCode(err, &stderr); code != 1 || !strings.Contains(stderr.String(), "planning crashy crashed (a bug in kplan; the plan above shows the panic): please report it at "+crash.ReportURL) {
			t.Errorf("fail-on-error=%v exit-code=%v: exit %d, %q; want 1 and a request for a report", flags[0], flags[1], code, stderr.String())
		}
	}
}
