package helm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/testchart"
)

// spec.chart.spec.valuesFiles as source-controller composes them
// (fluxcd/source-controller v1.9.1): merged in order into the chart's
// values.yaml (OverwriteChartDefaultValues, internal/helm/chart/
// metadata.go:45-80); a missing file fails the chart, naming it, unless
// ignoreMissingValuesFiles (mergeFileValues, builder_local.go:202-234,
// for a chart of the repository, its paths relative to the source's
// root; mergeChartValues, builder_remote.go:238-269, for a packaged
// chart, values.yaml being the chart's own values and another path one
// of the chart's files); a lone values.yaml keeps the chart's values
// (GetValuesFiles, builder.go:127-134). Each case is one of those
// branches.
func TestValuesFilesAsSourceController(t *testing.T) {
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	chart := demoFiles(t)
	// The repository: the chart under charts/demo, an environment's
	// values beside it.
	tree := map[string]map[string][]byte{
		"charts/demo": chart,
		"envs/prod":   {"values.yaml": []byte("replicas: 7\ngreeting: from-envs\n")},
	}
	env := Env{
		Source: sources(`{kind: HelmRepository, metadata: {name: charts, namespace: flux-system}, spec: {url: ` + repo.URL + `}}`),
		Local: func(_ context.Context, kind, ns, name, dir string) (map[string][]byte, bool, error) {
			if kind != "GitRepository" || ns+"/"+name != "flux-system/flux-system" {
				return nil, false, nil
			}
			return tree[dir], true, nil
		},
		Charts: charts.New(charts.Options{Policy: loopback(t)}),
	}
	local := `chart: ./charts/demo, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}`
	packaged := `chart: demo, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}`
	for _, tc := range []struct {
		name, spec string
		// replicas and greeting the Deployment renders; missing is the
		// file the release fails naming ("" renders).
		replicas, greeting, missing string
	}{
		{"repository chart, a file outside the chart", local + `, valuesFiles: [charts/demo/values.yaml, envs/prod/values.yaml]`, "7", "from-envs", ""},
		{"repository chart, paths from the source's root", local + `, valuesFiles: [charts/demo/values.yaml, charts/demo/values-prod.yaml]`, "5", "hello", ""},
		{"repository chart, a missing file outside the chart", local + `, valuesFiles: [charts/demo/values.yaml, envs/staging/values.yaml]`, "", "", "envs/staging/values.yaml"},
		{"repository chart, a missing file inside the chart", local + `, valuesFiles: [charts/demo/values.yaml, charts/demo/values-dev.yaml]`, "", "", "charts/demo/values-dev.yaml"},
		{"repository chart, a chart-relative path is not the chart's", local + `, valuesFiles: [values-prod.yaml]`, "", "", "values-prod.yaml"},
		{"repository chart, missing ignored", local + `, ignoreMissingValuesFiles: true, valuesFiles: [charts/demo/values.yaml, envs/staging/values.yaml, envs/prod/values.yaml]`, "7", "from-envs", ""},
		{"repository chart, a lone values.yaml keeps the chart's", local + `, valuesFiles: [values.yaml]`, "1", "hello", ""},
		{"packaged chart, values.yaml is the chart's values", packaged + `, valuesFiles: [values.yaml, values-prod.yaml]`, "5", "hello", ""},
		{"packaged chart, a missing file", packaged + `, valuesFiles: [values.yaml, values-dev.yaml]`, "", "", "values-dev.yaml"},
		{"packaged chart, a template is no values file", packaged + `, valuesFiles: [values.yaml, templates/configmap.yaml]`, "", "", "templates/configmap.yaml"},
		{"packaged chart, missing ignored", packaged + `, ignoreMissingValuesFiles: true, valuesFiles: [values.yaml, values-dev.yaml, values-prod.yaml]`, "5", "hello", ""},
		{"v2beta1 valuesFile first", packaged + `, valuesFile: values.yaml, valuesFiles: [values-prod.yaml]`, "5", "hello", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRelease(t, fmt.Sprintf(`{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {%s}}}}`, tc.spec))
			p, err := Prepare(context.Background(), r, env)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := p.Render(context.Background(), nil)
			if tc.missing != "" {
				var miss *MissingValuesFileError
				if !errors.As(err, &miss) || miss.Path != tc.missing || !strings.Contains(err.Error(), "HelmRelease apps/demo") || !strings.Contains(err.Error(), "'"+tc.missing+"'") {
					t.Fatalf("render: %v (%d objects); want it to fail naming %s", err, len(objs), tc.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := byKey(objs)["Deployment apps/demo"]
			if got := field(t, d, "spec", "replicas"); got != tc.replicas {
				t.Errorf("replicas %s, want %s", got, tc.replicas)
			}
			if got := field(t, d, "spec", "template", "spec", "containers", "[name=demo]", "env", "[name=GREETING]", "value"); got != tc.greeting {
				t.Errorf("greeting %s, want %s", got, tc.greeting)
			}
		})
	}
}

// Every file ignored as missing leaves the chart no values at all, as
// source-controller's empty merge replaces values.yaml: a template that
// reads a value the chart's defaults gave fails.
func TestValuesFilesAllMissingIgnoredLeaveNoValues(t *testing.T) {
	env := Env{Local: func(_ context.Context, kind, ns, name, dir string) (map[string][]byte, bool, error) {
		return demoFiles(t), true, nil
	}}
	r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: ./charts/demo, ignoreMissingValuesFiles: true, valuesFiles: [charts/demo/values-dev.yaml], sourceRef: {kind: GitRepository, name: flux-system}}}}}`)
	p, err := Prepare(context.Background(), r, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("render: %v; want the template to fail on .Values.image, which no values give", err)
	}
}
