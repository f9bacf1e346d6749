package closure_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// An overlay inflating a local chart, through a base, holds in its closure
// every file the helm render reads (the directories of the charts it
// names, which the render lists to write them for helm, and the values
// files), so that a change to a chart template selects it, and not the
// other charts of the chart home; a chart committed where a repository
// chart is pulled to is not remote.
func TestHelmChartHomeIsInTheClosure(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	chart := map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"values.yaml":         "who: a\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.who }}\n",
		"templates/_help.tpl": "{{- define \"x\" -}}x{{- end -}}\n",
	}
	files := map[string]string{
		"base/kustomization.yaml": "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- {name: c, releaseName: r, valuesFile: v.yaml, additionalValuesFiles: [more.yaml]}\n" +
			"- {name: c, repo: https://charts.example.com, version: 1.0.0, releaseName: committed}\n",
		"base/v.yaml":                "who: b\n",
		"base/more.yaml":             "who: c\n",
		"overlay/kustomization.yaml": "resources: [../base]\n",
		"unrelated/x.yaml":           "a: b\n",
		"charts/unused/Chart.yaml":   "apiVersion: v2\nname: unused\nversion: 1.0.0\n",
	}
	for name, content := range chart {
		files["charts/c/"+name] = content
		files["charts/c-1.0.0/c/"+name] = content
	}
	s := testkit.Snapshot(t, "test", files)
	c := closure.New(closure.SnapshotSource(context.Background(), s), closure.Options{EnableHelm: true}).Overlay("overlay")
	if !c.Bounded() {
		t.Fatalf("bounded = false (remote %v, unbounded %q)", c.Remote, c.Unbounded)
	}
	for _, want := range []string{"charts/c/templates/cm.yaml", "charts/c/templates/_help.tpl", "charts/c/Chart.yaml",
		"charts/c-1.0.0/c/values.yaml", "base/v.yaml", "base/more.yaml"} {
		if _, ok := slices.BinarySearch(c.Paths, want); !ok {
			t.Errorf("the closure lacks %s", want)
		}
	}
	// Another chart of the same home is not read.
	for _, p := range []string{"unrelated/x.yaml", "charts/unused/Chart.yaml"} {
		if _, ok := slices.BinarySearch(c.Paths, p); ok {
			t.Errorf("the closure holds %s", p)
		}
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := render.Prepare(s.FS, tree); err != nil {
		t.Fatal(err)
	}
	k := render.NewKustomizer(render.Options{EnableHelm: true, HelmCommand: filepath.Join(bin, "helm"), LoadRestrictorNone: true})
	rec := newRecorder(s.FS)
	objs, err := k.Render(rec, "overlay", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Errorf("rendered %d objects, want 2", len(objs))
	}
	for p := range rec.paths {
		if _, ok := slices.BinarySearch(c.Paths, p); !ok {
			t.Errorf("the build read %s, which its closure lacks", p)
		}
	}
	for _, p := range rec.listed {
		if !strings.HasPrefix(snapshot.Rel(p)+"/", "charts/") {
			t.Errorf("the build listed %s, outside the chart home", p)
		}
	}
}
