package deploy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// TestTargetRenderOptionsReachTheRender pins where a target's render
// option is declared: a field of render.Options tagged `target:"name"`
// is read from the webhook's configuration under that name and reaches
// the options every render of the target uses (SettingsOf, then
// Prepare), with no other file listing it. Each tagged field is set to a
// value other than its zero in a configuration and read back.
func TestTargetRenderOptionsReachTheRender(t *testing.T) {
	typ := reflect.TypeFor[render.Options]()
	n := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, ok := f.Tag.Lookup("target")
		if !ok {
			continue
		}
		n++
		var yamlValue string
		var want any
		switch {
		case f.Type == reflect.TypeFor[time.Duration]():
			yamlValue, want = "90s", 90*time.Second
		case f.Type.Kind() == reflect.Bool:
			yamlValue, want = "true", true
		case f.Type.Kind() == reflect.String:
			yamlValue, want = "x", "x"
		case f.Type.Kind() == reflect.Int, f.Type.Kind() == reflect.Int64:
			yamlValue, want = "7", reflect.ValueOf(7).Convert(f.Type).Interface()
		default:
			t.Errorf("render.Options.%s (target option %s) has type %s, which the configuration cannot read", f.Name, name, f.Type)
			continue
		}
		file := fmt.Sprintf("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: a, overlay: a, %s: %s}\n", name, yamlValue)
		cfg, err := config.Parse("w.yaml", []byte(file))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := reflect.ValueOf(SettingsOf(cfg.Repositories[0].Branches[0].Targets[0]).Render).Field(i).Interface()
		if got != want {
			t.Errorf("%s: %s in the configuration renders with %s = %v, want %v", name, yamlValue, f.Name, got, want)
		}
	}
	if n == 0 {
		t.Fatal("no field of render.Options is a target option; enableHelm is")
	}
}

// A target's charts see what its cluster runs: the webhook's kubeVersion
// and apiVersions for the target, else what the commit's .kplan.yaml
// declares for its name or environment (as the plan rendered it), else
// kplan's default — never Helm's v1.20, which the chart's kubeVersion
// range refuses.
func TestPrepareSeesTheClustersKubernetes(t *testing.T) {
	helm := filepath.Join(testhelm.Dir(t), "helm")
	files := map[string]string{"app/kustomization.yaml": "namespace: app\nhelmCharts:\n  - {name: capabilities, releaseName: app}\n"}
	for p, data := range testkit.Files(t, "testdata/capabilities") {
		files["app/charts/capabilities/"+p] = data
	}
	declared := "apiVersion: kplan.dev/v1alpha1\nkind: Repository\nkubernetes:\n  clusters:\n    - {name: production, version: '1.29', apiVersions: [monitoring.coreos.com/v1/ServiceMonitor]}\n"
	for _, tc := range []struct {
		name, kplan string
		target      config.Target
		want        []string
	}{
		{"kplan's default", "", config.Target{Name: "prod", Environment: "production"}, []string{"kubeVersion: v1.37.0"}},
		{"the environment's in .kplan.yaml", declared, config.Target{Name: "prod", Environment: "production"}, []string{"kubeVersion: v1.29", "kind: ServiceMonitor"}},
		{"the webhook's for the target", declared, config.Target{Name: "prod", Environment: "production", Settings: config.Settings{Render: render.Options{KubeVersion: "v1.33"}}}, []string{"kubeVersion: v1.33"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := maps.Clone(files)
			if tc.kplan != "" {
				fs[".kplan.yaml"] = tc.kplan
			}
			s := testkit.Snapshot(t, "test", fs)
			tg := tc.target
			tg.Overlay, tg.Namespace = "app", "app"
			tg.Inventory = &config.Inventory{Kind: "ResourceGroup", Name: "app", Namespace: "app", ID: "app"}
			tg.Render.EnableHelm, tg.Render.HelmCommand = true, helm
			p, err := Prepare(context.Background(), FromSnapshot(s), SettingsOf(tg), Offline)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for _, o := range p.Objects {
				y, err := sigsyaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				out.Write(y)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the render does not hold %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// A target's chartCredentials are its charts' credentials, alone: of two
// targets pulling the same private chart repository (loopback, behind
// basic auth), the one whose repositories.yaml holds the right password
// renders it and the other's pull is refused naming its own file, never
// the other target's; both read anew at each Prepare.
func TestTargetChartCredentials(t *testing.T) {
	helm := filepath.Join(testhelm.Dir(t), "helm")
	repo := testchart.ServeRepoWith(t, testchart.RepoOptions{User: "kplan", Password: "s3cret"})
	repo.Add(t, testchart.Package(t, "testdata/capabilities", "1.0.0", ""))
	s := testkit.Snapshot(t, "test", map[string]string{
		"app/kustomization.yaml": "namespace: app\nhelmCharts:\n  - {name: capabilities, repo: " + repo.URL + ", version: 1.0.0, releaseName: app}\n"})
	file := func(pass string) string {
		p := filepath.Join(t.TempDir(), "repositories.yaml")
		if err := os.WriteFile(p, []byte("repositories:\n- name: private\n  url: "+repo.URL+"\n  username: kplan\n  password: "+pass+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	right, wrong := file("s3cret"), file("old")
	cfg, err := config.Parse("w.yaml", []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n"+
		"          - {name: a, overlay: app, namespace: app, enableHelm: true, remoteHosts: [127.0.0.1], chartCredentials: {repositoryConfig: "+right+"}}\n"+
		"          - {name: b, overlay: app, namespace: app, enableHelm: true, remoteHosts: [127.0.0.1], chartCredentials: {repositoryConfig: "+wrong+"}, inventory: {name: b, namespace: app}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range cfg.Repositories[0].Branches[0].Targets {
		tg.Render.HelmCommand = helm
		if tg.Inventory == nil {
			tg.Inventory = &config.Inventory{Kind: "ResourceGroup", Name: tg.Name, Namespace: "app", ID: tg.Name}
		}
		_, err := Prepare(context.Background(), FromSnapshot(s), SettingsOf(tg), Online)
		switch tg.Name {
		case "a":
			if err != nil {
				t.Errorf("target a, with the right credentials: %v", err)
			}
		case "b":
			if err == nil || !strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), right) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("target b, with its own wrong credentials: %v; want a refusal naming %s alone", err, wrong)
			}
		}
	}
	if _, err := config.Parse("w.yaml", []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: a, overlay: app, chartCredentials: {}}\n")); err == nil || !strings.Contains(err.Error(), "chartCredentials: name registryConfig") {
		t.Errorf("empty chartCredentials: %v", err)
	}
}
