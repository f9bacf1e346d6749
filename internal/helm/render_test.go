package helm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
)

const demo = "testdata/demo"

func loopback(t *testing.T) *netpolicy.Policy {
	p, err := netpolicy.New([]string{"127.0.0.1"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func parseRelease(t *testing.T, y string) *Release {
	t.Helper()
	var m map[string]any
	if err := sigsyaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	r, err := Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sources(objs ...string) func(kind, ns, name string) map[string]any {
	return func(kind, ns, name string) map[string]any {
		for _, y := range objs {
			var m map[string]any
			if err := sigsyaml.Unmarshal([]byte(y), &m); err != nil {
				panic(err)
			}
			md, _ := m["metadata"].(map[string]any)
			if m["kind"] == kind && md["name"] == name && md["namespace"] == ns {
				return m
			}
		}
		return nil
	}
}

// byKey indexes objects by "Kind namespace/name".
func byKey(objs []*yaml.RNode) map[string]*yaml.RNode {
	out := map[string]*yaml.RNode{}
	for _, o := range objs {
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

func field(t *testing.T, o *yaml.RNode, path ...string) string {
	t.Helper()
	if o == nil {
		t.Fatalf("no object for %v", path)
	}
	n, err := o.Pipe(yaml.Lookup(path...))
	if err != nil || n == nil {
		t.Fatalf("%s %s: no %v", o.GetKind(), o.GetName(), path)
	}
	return yaml.GetValue(n)
}

// demoFiles is the demo chart as a repository source serves it: its
// files by path relative to the chart.
func demoFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	for p, data := range testkit.Files(t, demo) {
		files[p] = []byte(data)
	}
	return files
}

func renderOK(t *testing.T, r *Release, env Env) map[string]*yaml.RNode {
	t.Helper()
	p, err := Prepare(context.Background(), r, env)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := p.Render(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return byKey(objs)
}

// A HelmRelease from an HTTP chart repository renders as helm-controller
// would: the newest version its range allows, its values over the
// chart's, valuesFrom in order with targetPath, its kustomize patches,
// in its targetNamespace under the [targetNamespace-]name release name,
// with helm-controller's origin labels; the chart's CRDs on install,
// its hooks but not its tests, a cluster-scoped object with no namespace.
func TestRenderFromHelmRepository(t *testing.T) {
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	repo.Add(t, testchart.Package(t, demo, "1.2.0", "1.2.0"))
	repo.Add(t, testchart.Package(t, demo, "2.0.0", "2.0.0"))
	env := Env{
		Source: sources(`{kind: HelmRepository, metadata: {name: charts, namespace: flux-system}, spec: {url: ` + repo.URL + `}}`),
		Values: func(kind, ns, name string) (*ValuesSource, bool) {
			if kind == "ConfigMap" && ns == "apps" && name == "demo-values" {
				return &ValuesSource{Data: map[string]string{"values.yaml": "greeting: from-configmap\nreplicas: 2\n", "replicas": "4"}}, true
			}
			return nil, false
		},
		Charts: charts.New(charts.Options{Policy: loopback(t)}),
	}
	r := parseRelease(t, `
metadata: {name: demo, namespace: apps}
spec:
  targetNamespace: prod
  chart: {spec: {chart: demo, version: "1.x", sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}}}
  valuesFrom:
    - {kind: ConfigMap, name: demo-values}
    - {kind: ConfigMap, name: demo-values, valuesKey: replicas, targetPath: replicas}
    - {kind: Secret, name: absent, optional: true}
  values: {greeting: from-values}
  postRenderers:
    - kustomize:
        patches:
          - target: {kind: Service}
            patch: |
              - op: add
                path: /metadata/annotations
                value: {patched: "yes"}
`)
	got := renderOK(t, r, env)
	d := got["Deployment prod/prod-demo"]
	if img := field(t, d, "spec", "template", "spec", "containers", "[name=demo]", "image"); img != "ghcr.io/example/demo:1.2.0" {
		t.Errorf("image %s, want 1.2.0's (the newest 1.x)", img)
	}
	if n := field(t, d, "spec", "replicas"); n != "4" {
		t.Errorf("replicas %s, want 4 (the targetPath entry after the values.yaml one)", n)
	}
	if g := field(t, got["ConfigMap prod/prod-demo-settings"], "data", "greeting"); g != "from-values" {
		t.Errorf("greeting %s, want spec.values' over valuesFrom's", g)
	}
	if p := field(t, got["Service prod/prod-demo"], "metadata", "annotations", "patched"); p != `"yes"` && p != "yes" {
		t.Errorf("Service annotation %s, want the post-renderer's patch", p)
	}
	if l := d.GetLabels(); l["helm.toolkit.fluxcd.io/name"] != "demo" || l["helm.toolkit.fluxcd.io/namespace"] != "apps" {
		t.Errorf("labels %v, want helm-controller's origin labels", l)
	}
	for _, k := range []string{"ClusterRole /prod-demo-reader", "CustomResourceDefinition /widgets.example.com", "Job prod/prod-demo-migrate"} {
		if got[k] == nil {
			t.Errorf("no %s among %v", k, keys(got))
		}
	}
	if got["Pod prod/prod-demo-test"] != nil {
		t.Errorf("the chart's test hook is rendered; helm-controller runs tests only when asked")
	}

	// An upgrade's CRD policy is Skip by default.
	env.Upgrade = true
	if got := renderOK(t, r, env); got["CustomResourceDefinition /widgets.example.com"] != nil {
		t.Errorf("CRDs rendered for an upgrade whose policy is Skip")
	}
	r.Spec.Upgrade = &Action{CRDs: "CreateReplace"}
	if got := renderOK(t, r, env); got["CustomResourceDefinition /widgets.example.com"] == nil {
		t.Errorf("CRDs not rendered for an upgrade whose policy is CreateReplace")
	}
}

func keys(m map[string]*yaml.RNode) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A chart whose host the network policy does not allow fails its release
// alone, saying which chart, where from and how to allow it.
func TestRenderRefusedHostSaysWhatToDo(t *testing.T) {
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, demo, "1.0.0", ""))
	none, err := netpolicy.New(nil, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: demo, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts}}}}}`)
	env := Env{Source: sources(`{kind: HelmRepository, metadata: {name: charts, namespace: apps}, spec: {url: ` + repo.URL + `}}`), Charts: charts.New(charts.Options{Policy: none})}
	_, err = Prepare(context.Background(), r, env)
	var un *UnavailableError
	if !errors.As(err, &un) {
		t.Fatalf("error %v, want an UnavailableError", err)
	}
	for _, want := range []string{"HelmRelease apps/demo", "chart demo 1.0.0 from " + repo.URL, "--remote-hosts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := repo.Count("/index.yaml"); n != 0 {
		t.Errorf("the refused repository was asked %d times", n)
	}
}

// A chart fetched once is kept in the cache directory: a later plan with
// no network renders an exact version from it.
func TestChartCacheServesExactVersionsOffline(t *testing.T) {
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	dir := t.TempDir()
	r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: demo, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts}}}}}`)
	src := sources(`{kind: HelmRepository, metadata: {name: charts, namespace: apps}, spec: {url: ` + repo.URL + `}}`)
	renderOK(t, r, Env{Source: src, Charts: charts.New(charts.Options{Policy: loopback(t), Dir: dir})})
	if entries, _ := os.ReadDir(filepath.Join(dir, "charts")); len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want the chart", len(entries))
	}
	got := renderOK(t, r, Env{Source: src, Charts: charts.New(charts.Options{Dir: dir})})
	if got["Deployment apps/demo"] == nil {
		t.Errorf("no Deployment from the cached chart: %v", keys(got))
	}
}

// Charts from an OCI registry: a HelmRepository of type oci, an
// OCIRepository named by spec.chartRef with a semver range, and a
// HelmChart named by spec.chartRef (its own chart, version and source).
func TestRenderFromOCI(t *testing.T) {
	reg := testchart.ServeRegistry(t)
	reg.Push(t, "charts", testchart.Package(t, demo, "1.0.0", "1.0.0"))
	reg.Push(t, "charts", testchart.Package(t, demo, "1.1.0", "1.1.0"))
	env := Env{
		Source: sources(
			`{kind: HelmRepository, metadata: {name: oci, namespace: apps}, spec: {type: oci, insecure: true, url: "oci://`+reg.Host+`/charts"}}`,
			`{kind: OCIRepository, metadata: {name: demo, namespace: apps}, spec: {insecure: true, url: "oci://`+reg.Host+`/charts/demo", ref: {semver: ">=1.0.0 <2"}}}`,
			`{kind: HelmChart, metadata: {name: apps-demo, namespace: charts}, spec: {chart: demo, version: "~1.0", sourceRef: {kind: HelmRepository, name: oci, namespace: apps}}}`),
		Charts: charts.New(charts.Options{Policy: loopback(t)}),
	}
	for _, tc := range []struct{ name, spec, tag string }{
		{"HelmRepository", `{chart: {spec: {chart: demo, version: 1.0.0, sourceRef: {kind: HelmRepository, name: oci}}}}`, "1.0.0"},
		{"OCIRepository", `{chartRef: {kind: OCIRepository, name: demo}}`, "1.1.0"},
		{"HelmChart", `{chartRef: {kind: HelmChart, name: apps-demo, namespace: charts}}`, "1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderOK(t, parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: `+tc.spec+`}`), env)
			if img := field(t, got["Deployment apps/demo"], "spec", "template", "spec", "containers", "[name=demo]", "image"); img != "ghcr.io/example/demo:"+tc.tag {
				t.Errorf("image %s, want tag %s", img, tc.tag)
			}
		})
	}
}

// A chart in a directory of this repository (a GitRepository that is
// the repository), with valuesFiles relative to the repository's root.
func TestRenderFromRepositoryPath(t *testing.T) {
	files := demoFiles(t)
	env := Env{Local: func(_ context.Context, kind, ns, name, dir string) (map[string][]byte, bool, error) {
		if kind != "GitRepository" || ns+"/"+name != "flux-system/flux-system" {
			return nil, false, nil
		}
		if dir != "charts/demo" {
			t.Errorf("read %s, want charts/demo", dir)
		}
		return files, true, nil
	}}
	r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: ./charts/demo, valuesFiles: [charts/demo/values.yaml, charts/demo/values-prod.yaml], sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}}}`)
	got := renderOK(t, r, env)
	if n := field(t, got["Deployment apps/demo"], "spec", "replicas"); n != "5" {
		t.Errorf("replicas %s, want values-prod.yaml's 5", n)
	}
	other := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: ./charts/demo, sourceRef: {kind: GitRepository, name: elsewhere}}}}}`)
	var un *UnavailableError
	if _, err := Prepare(context.Background(), other, env); !errors.As(err, &un) || !strings.Contains(err.Error(), "is not this repository") {
		t.Errorf("a chart from another GitRepository: %v, want 'not this repository'", err)
	}
}

// helm-controller's release name: [targetNamespace-]name, shortened past
// 53 characters with a hash.
func TestReleaseName(t *testing.T) {
	for _, tc := range []struct {
		name, target, release, want string
	}{
		{"demo", "", "", "demo"},
		{"demo", "prod", "", "prod-demo"},
		{"demo", "prod", "mine", "mine"},
		{"a-very-long-helmrelease-name-that-goes-on", "and-a-long-namespace", "", "and-a-long-namespace-a-very-long-helmrel-d6c93826813d"},
	} {
		r := &Release{Name: tc.name, Namespace: "x", Spec: Spec{TargetNamespace: tc.target, ReleaseName: tc.release}}
		if got := r.ReleaseName(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc, got, tc.want)
		}
		if len(r.ReleaseName()) > 53 {
			t.Errorf("%s is over 53 characters", r.ReleaseName())
		}
	}
}

// A chart that templates for too long (a pull request can hold one)
// fails its release within the render's time bound.
func TestRenderTimeout(t *testing.T) {
	r := parseRelease(t, `{metadata: {name: slow, namespace: apps}, spec: {chart: {spec: {chart: ./slow, sourceRef: {kind: GitRepository, name: flux-system}}}}}`)
	files := map[string][]byte{
		"Chart.yaml":          []byte("apiVersion: v2\nname: slow\nversion: 1.0.0\n"),
		"templates/slow.yaml": []byte("{{ range $i := until 5000000 }}{{ end }}\n"),
	}
	env := Env{Timeout: 50 * time.Millisecond, Local: func(context.Context, string, string, string, string) (map[string][]byte, bool, error) {
		return files, true, nil
	}}
	p, err := Prepare(context.Background(), r, env)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Render(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "templating took more than 50ms") || !strings.Contains(err.Error(), "HelmRelease apps/slow") {
		t.Errorf("error %v, want the time bound's, naming the release", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the render returned after %s", d)
	}
}

// TestRenderIsHelmTemplate pins the templating to Helm's own: the demo
// chart (CRDs, hooks, a test, NOTES-free) renders to the objects `helm
// template --include-crds --skip-tests` of the same Helm version prints,
// once helm-controller's origin labels and the namespace kplan fills in
// are set aside. kplan templates through Helm's engine rather than its
// install action (which links Helm's cluster client); this is what
// keeps the two from drifting.
func TestRenderIsHelmTemplate(t *testing.T) {
	bin := testhelm.Dir(t)
	out, err := exec.Command(filepath.Join(bin, "helm"), "template", "demo", demo, "--namespace", "apps", "--include-crds", "--skip-tests").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	want, err := parse(string(out))
	if err != nil {
		t.Fatal(err)
	}
	files := demoFiles(t)
	env := Env{Local: func(context.Context, string, string, string, string) (map[string][]byte, bool, error) {
		return files, true, nil
	}}
	r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: {chart: {spec: {chart: ./charts/demo, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}}}`)
	p, err := Prepare(context.Background(), r, env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Render(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	norm := func(objs []*yaml.RNode) map[string]string {
		m := map[string]string{}
		for _, o := range objs {
			o = o.Copy()
			l := o.GetLabels()
			for k := range l {
				if strings.HasPrefix(k, Group+"/") {
					delete(l, k)
				}
			}
			if err := o.SetLabels(l); err != nil {
				t.Fatal(err)
			}
			if err := o.SetNamespace(""); err != nil {
				t.Fatal(err)
			}
			if len(l) == 0 {
				_ = o.PipeE(yaml.Lookup("metadata"), yaml.Clear("labels"))
			}
			s, err := o.String()
			if err != nil {
				t.Fatal(err)
			}
			// helm template heads each document with a "# Source:" comment.
			s = regexp.MustCompile(`(?m)^# Source: .*\n`).ReplaceAllString(s, "")
			m[o.GetKind()+" "+o.GetName()] = s
		}
		return m
	}
	g, w := norm(got), norm(want)
	if len(w) < 5 {
		t.Fatalf("helm template printed %d objects, want the chart's CRD, hook and templates", len(w))
	}
	for k, ws := range w {
		if g[k] != ws {
			t.Errorf("%s:\nkplan:\n%s\nhelm template:\n%s", k, g[k], ws)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("kplan renders %s, which helm template does not", k)
		}
	}
}

// TestChartOutputIsReadAsYAML11 pins that a chart's output is read as
// helm-controller's Helm client and Argo CD's repo server read it, YAML
// 1.1: an unquoted Off or yes in a template is the boolean they apply, a
// quoted one a string. Through a kustomize post-renderer the text Helm
// reads is kustomize's, which read YAML 1.2 and quotes such strings: they
// stay strings, as helm-controller applies them.
func TestChartOutputIsReadAsYAML11(t *testing.T) {
	files := map[string][]byte{
		"Chart.yaml":           []byte("apiVersion: v2\nname: flags\nversion: 1.0.0\n"),
		"templates/flags.yaml": []byte("apiVersion: example.com/v1\nkind: Flags\nmetadata:\n  name: flags\nspec:\n  mode: Off\n  quoted: \"on\"\n  args: [run, yes]\n"),
	}
	env := Env{Local: func(_ context.Context, kind, ns, name, dir string) (map[string][]byte, bool, error) {
		return files, true, nil
	}}
	for _, tc := range []struct {
		name, postRenderers string
		mode, arg           any
	}{
		{"the chart's output", "", false, true},
		{"post-rendered by kustomize", `, postRenderers: [{kustomize: {patches: [{patch: "[{\"op\": \"add\", \"path\": \"/metadata/labels\", \"value\": {\"team\": \"a\"}}]", target: {kind: Flags}}]}}]`, "Off", "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRelease(t, `{metadata: {name: flags, namespace: apps}, spec: {chart: {spec: {chart: ./charts/flags, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}`+tc.postRenderers+`}}`)
			o := renderOK(t, r, env)["Flags apps/flags"]
			if o == nil {
				t.Fatal("no Flags object")
			}
			m, err := o.Map()
			if err != nil {
				t.Fatal(err)
			}
			spec := m["spec"].(map[string]any)
			if spec["mode"] != tc.mode || spec["quoted"] != "on" || spec["args"].([]any)[1] != tc.arg {
				t.Errorf("spec %#v, want mode %#v, quoted \"on\", args[1] %#v", spec, tc.mode, tc.arg)
			}
		})
	}
}

// TestValuesSchemaAsHelmTemplate: a chart's values.schema.json refuses
// the values helm template refuses and passes those it passes, under
// each JSON Schema draft charts declare. Helm validates through
// santhosh-tekuri/jsonschema, which kplan builds patched
// (third_party/README.md: its metaschemas compile on first use, not at
// start): this is that patch's check against the helm CLI built from the
// upstream modules.
func TestValuesSchemaAsHelmTemplate(t *testing.T) {
	bin := testhelm.Dir(t)
	for _, draft := range []string{"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-04/schema#"} {
		files := map[string][]byte{
			"Chart.yaml":         []byte("apiVersion: v2\nname: typed\nversion: 1.0.0\n"),
			"values.yaml":        []byte("replicas: 1\nname: web\n"),
			"values.schema.json": []byte(`{"$schema": "` + draft + `", "type": "object", "additionalProperties": false, "required": ["name"], "properties": {"replicas": {"type": "integer", "minimum": 1}, "name": {"type": "string", "pattern": "^[a-z]+$"}}}`),
			"templates/cm.yaml":  []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n"),
		}
		dir := t.TempDir()
		for name, b := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env := Env{Local: func(context.Context, string, string, string, string) (map[string][]byte, bool, error) {
			return files, true, nil
		}}
		refused := 0
		for _, values := range []string{`{replicas: 3}`, `{replicas: two}`, `{replicas: 0}`, `{name: Web}`, `{typo: 1}`, `{}`} {
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
				t.Fatal(err)
			}
			out, cliErr := exec.Command(filepath.Join(bin, "helm"), "template", "typed", dir, "-f", valuesFile).CombinedOutput()
			var ee *exec.ExitError
			if cliErr != nil && !errors.As(cliErr, &ee) {
				t.Fatal(cliErr)
			}
			r := parseRelease(t, `{metadata: {name: typed, namespace: apps}, spec: {chart: {spec: {chart: ./charts/typed, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}, values: `+values+`}}`)
			p, err := Prepare(context.Background(), r, env)
			if err == nil {
				_, err = p.Render(context.Background(), nil)
			}
			if (err != nil) != (cliErr != nil) {
				t.Errorf("%s, values %s: kplan %v; helm template %v\n%s", draft, values, err, cliErr, out)
			}
			if err != nil && !strings.Contains(err.Error(), "schema") {
				t.Errorf("%s, values %s: the error does not say the schema refused them: %v", draft, values, err)
			}
			if cliErr != nil {
				refused++
			}
		}
		if refused != 4 {
			t.Errorf("%s: helm template refused %d of the values, want the 4 the schema forbids", draft, refused)
		}
	}
}
