package test

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/test/gittest"
)

// Charts as the cluster gets them (testdata/flux-kubever), planned by
// the real kplan diff: a chart requiring Kubernetes 1.25 from a chart
// repository on loopback renders — Helm's library default, v1.20, failed
// the whole target — with the built-in APIs that version serves
// (policy/v1's PodDisruptionBudget, not the removed policy/v1beta1), and
// the plan says for which Kubernetes; .kplan.yaml's kubernetes: declares
// the cluster's version and custom resources, which the chart then sees
// (an older version's branch, a ServiceMonitor); a valuesFiles entry the
// repository no longer holds fails its release, naming the file.
func TestFluxChartsForTheClustersKubernetes(t *testing.T) {
	kplan := buildKplan(t)
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, "../testdata/flux-kubever/charts/capabilities", "1.0.0", ""))
	fx := gittest.Copy(t, "../testdata/flux-kubever")
	fx.Replace("clusters/prod/sources.yaml", "CHARTS_URL", repo.URL)
	// main~3: caps without its HelmRelease; main~2 adds it.
	fx.Init("fleet")
	fx.Edit("apps/caps/kustomization.yaml", "  - settings.yaml\n", "  - settings.yaml\n  - helmrelease.yaml\n")
	gittest.Git(t, fx.Dir, "rm", "-q", "envs/prod/values.yaml")
	fx.Commit("drop local's values file") // main~1
	if err := os.WriteFile(filepath.Join(fx.Dir, ".kplan.yaml"), []byte(`apiVersion: kplan.dev/v1alpha1
kind: Repository
kubernetes:
  clusters:
    - name: prod
      version: v1.28.3-eks-4f4795d
      apiVersions: [monitoring.coreos.com/v1, monitoring.coreos.com/v1/ServiceMonitor]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, fx.Dir, "add", ".kplan.yaml")
	fx.Commit("declare prod's Kubernetes") // main

	type overlay struct {
		Path, Status, Error string
		Added               []string
		AddedYAML           map[string]string `json:"addedYaml"`
		Kubernetes          *struct {
			Version     string
			APIVersions []string
			From        string
		}
	}
	diff := func(t *testing.T, base, head, format string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kplan, append([]string{"diff", "-C", fx.Dir, "--base", base, "--head", head, "-o", format, "--remote-hosts", "127.0.0.1"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
			t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
		}
		return stdout.String()
	}
	plan := func(t *testing.T, base, head string, args ...string) map[string]overlay {
		t.Helper()
		var p struct{ Overlays []overlay }
		out := diff(t, base, head, "json", args...)
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		m := map[string]overlay{}
		for _, o := range p.Overlays {
			m[o.Path] = o
		}
		return m
	}
	// added finds an added object by its key's suffix; "" none.
	added := func(o overlay, suffix string) string {
		for _, k := range o.Added {
			if strings.HasSuffix(k, suffix) {
				return o.AddedYAML[k]
			}
		}
		return ""
	}

	t.Run("a chart requiring Kubernetes 1.25 renders for kplan's default", func(t *testing.T) {
		caps := plan(t, "main~3", "main~2")["flux-system/caps"]
		if caps.Status != "changed" || caps.Error != "" {
			t.Fatalf("caps is %s (%s), want changed", caps.Status, caps.Error)
		}
		if y := added(caps, "PodDisruptionBudget|caps|caps"); !strings.HasPrefix(y, "apiVersion: policy/v1\n") {
			t.Errorf("caps adds %v; want its PodDisruptionBudget as policy/v1 (served since 1.21), got:\n%s", caps.Added, y)
		}
		if y := added(caps, "ConfigMap|caps|caps-info"); !strings.Contains(y, "kubeVersion: v1.37.0") || !strings.Contains(y, "sidecars: native") {
			t.Errorf("caps-info must say Kubernetes v1.37.0, native sidecars:\n%s", y)
		}
		if added(caps, "ServiceMonitor|caps|caps") != "" {
			t.Errorf("caps adds a ServiceMonitor: no cluster declares its API")
		}
		if k := caps.Kubernetes; k == nil || k.Version != "v1.37.0" || k.From != "" {
			t.Errorf("the plan says caps' charts were rendered for %+v, want v1.37.0, kplan's default", k)
		}
		for _, format := range []string{"markdown", "text"} {
			// html: the Markdown escapes what GitHub shows as is.
			if out := html.UnescapeString(diff(t, "main~3", "main~2", format)); !strings.Contains(out, "Charts rendered for Kubernetes v1.37.0 (kplan's default)") {
				t.Errorf("-o %s does not say which Kubernetes the charts were rendered for:\n%s", format, out)
			}
		}
	})

	// main~1 → main changes nothing but .kplan.yaml's kubernetes: the
	// charts render for the newly declared cluster on head, the default
	// on base, changed-only as --full (it was "0 to change", no target
	// reading .kplan.yaml).
	t.Run("only the declared Kubernetes changes", func(t *testing.T) {
		for _, mode := range [][]string{nil, {"--full"}} {
			caps := plan(t, "main~1", "main", mode...)["flux-system/caps"]
			if caps.Status != "changed" || !slices.ContainsFunc(caps.Added, func(k string) bool { return strings.HasSuffix(k, "ServiceMonitor|caps|caps") }) {
				t.Errorf("%v: caps is %s adding %v; want the ServiceMonitor the newly declared API makes", mode, caps.Status, caps.Added)
			}
		}
		out := diff(t, "main~1", "main", "text")
		if !strings.Contains(out, "its charts are rendered for Kubernetes v1.28.3") || !strings.Contains(out, "on base: what the cluster runs changed") {
			t.Errorf("the plan does not say what the cluster runs changed:\n%s", out)
		}
	})

	t.Run("a missing values file fails its release", func(t *testing.T) {
		local := plan(t, "main~2", "main~1")["flux-system/local"]
		if local.Status != "error" || !strings.Contains(local.Error, "HelmRelease local/local") || !strings.Contains(local.Error, "valuesFiles envs/prod/values.yaml: no values file found") {
			t.Errorf("local is %s (%s); want it to fail naming envs/prod/values.yaml", local.Status, local.Error)
		}
	})

	t.Run("the cluster's declared Kubernetes", func(t *testing.T) {
		p := plan(t, "main~3", "main")
		caps := p["flux-system/caps"]
		if y := added(caps, "ConfigMap|caps|caps-info"); !strings.Contains(y, "kubeVersion: v1.28.3") || !strings.Contains(y, "sidecars: init-containers") {
			t.Errorf("caps-info must say the declared v1.28.3 and its branch:\n%s", y)
		}
		if added(caps, "ServiceMonitor|caps|caps") == "" {
			t.Errorf("caps adds %v; want the ServiceMonitor whose API the cluster declares", caps.Added)
		}
		if k := caps.Kubernetes; k == nil || k.Version != "v1.28.3" || !slices.Contains(k.APIVersions, "monitoring.coreos.com/v1/ServiceMonitor") || k.From != ".kplan.yaml kubernetes.clusters[0] (prod)" {
			t.Errorf("the plan says caps' charts were rendered for %+v, want the declaration's", k)
		}
		full := plan(t, "main~3", "main", "--full")["flux-system/caps"]
		if !slices.Equal(full.Added, caps.Added) {
			t.Errorf("--full adds %v, changed-only %v", full.Added, caps.Added)
		}
	})
}
