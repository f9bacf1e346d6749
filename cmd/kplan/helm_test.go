package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testhelm"
)

// A change to a chart's template, under a chart home two overlays share,
// is planned as the change it makes to each overlay inflating that chart,
// in the changed-only plan as in --full.
func TestDiffPlansAChartTemplateChange(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	cmTemplate := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  size: {{ .Values.size | quote }}\n"
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"charts/app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"charts/app/values.yaml":         "size: small\n",
		"charts/app/templates/cm.yaml":   cmTemplate,
		"charts/other/Chart.yaml":        "apiVersion: v2\nname: other\nversion: 1.0.0\n",
		"charts/other/templates/cm.yaml": cmTemplate,
		"envs/prod/kustomization.yaml":   "helmGlobals: {chartHome: ../../charts}\nhelmCharts:\n- {name: app, releaseName: prod, valuesInline: {size: large}}\n",
		"envs/dev/kustomization.yaml":    "helmGlobals: {chartHome: ../../charts}\nhelmCharts:\n- {name: app, releaseName: dev}\n",
		"envs/tools/kustomization.yaml":  "resources: [cm.yaml]\n",
		"envs/tools/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tools}\n",
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{
		"charts/app/templates/cm.yaml": strings.Replace(cmTemplate, "data:\n", "data:\n  chart: {{ .Chart.Name | quote }}\n", 1),
	})
	head := commitAll(t, dir, "chart: name the chart in the ConfigMap")

	for _, extra := range [][]string{nil, {"--full"}} {
		args := append([]string{"diff", "-C", dir, "--base", base, "--head", head, "-o", "json",
			"--enable-helm", "--helm-command", filepath.Join(bin, "helm"), "--load-restrictor", "LoadRestrictionsNone"}, extra...)
		out, stderr, err := kplan(t, nil, args...)
		if err != nil {
			t.Fatalf("kplan %q: %v\n%s", args, err, stderr)
		}
		var p jsonPlan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		for _, o := range []string{"envs/prod", "envs/dev"} {
			if got := p.overlay(t, o); got.Error != "" || !slices.Equal(got.Changed, []string{"~G_v1_ConfigMap|default|" + strings.TrimPrefix(o, "envs/")}) {
				t.Errorf("%q: %s changed %v (%s), want its ConfigMap", extra, o, got.Changed, got.Error)
			}
		}
		if got := p.overlay(t, "envs/tools"); len(got.Changed)+len(got.Added)+len(got.Pruned) > 0 || got.Error != "" {
			t.Errorf("%q: envs/tools is planned as %+v", extra, got)
		}
		if p.Totals.Changed != 2 || p.Totals.ChangedOverlays != 2 {
			t.Errorf("%q: totals %+v", extra, p.Totals)
		}
	}
}

// Renders stored with --cache-dir are reused by the same helm and not by
// another: the cache key names helm's version.
func TestCachedChartRendersNameTheHelm(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	helm := filepath.Join(bin, "helm")
	// The same helm, saying it is another version.
	other := filepath.Join(t.TempDir(), "helm")
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then echo v3.99.0; exit 0; fi\nexec " + helm + " \"$@\"\n"
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"app/charts/c/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"app/charts/c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"app/kustomization.yaml":         "helmCharts:\n- {name: c, releaseName: r}\n",
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{"app/kustomization.yaml": "helmCharts:\n- {name: c, releaseName: r2}\n"})
	head := commitAll(t, dir, "rename")
	cache := t.TempDir()
	for _, run := range []struct {
		name, helm string
		hits       int
	}{{"cold", helm, 0}, {"warm", helm, 2}, {"another helm", other, 0}} {
		out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", base, "--head", head, "-o", "json",
			"--enable-helm", "--helm-command", run.helm, "--cache-dir", cache)
		if err != nil {
			t.Fatalf("%s: %v\n%s", run.name, err, stderr)
		}
		var p struct{ Work struct{ CacheHits int } }
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		if p.Work.CacheHits != run.hits {
			t.Errorf("%s: %d renders from the cache, want %d", run.name, p.Work.CacheHits, run.hits)
		}
	}
}
