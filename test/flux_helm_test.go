package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/test/gittest"
)

// helmPlan is the part of kplan diff's JSON a HelmRelease plan is checked on.
type helmPlan struct {
	Overlays []struct {
		Path, Status, Error    string
		Added, Changed, Pruned []string
		Fields                 map[string][]struct {
			Path     string
			Old, New any // typed values
		}
		AddedYAML  map[string]string `json:"addedYaml"`
		Notes      []string
		Base, Head struct{ Error string }
	}
}

const helmSecret = "hunter2-s3cr3t"

// A Flux repository whose HelmReleases take charts from an HTTP chart
// repository, an OCI registry and a directory of the repository
// (testdata/flux-helm), planned by the real kplan diff: each release's
// rendered objects are planned as its target's, with helm-controller's
// values (valuesFrom a ConfigMap and a Secret, spec.values on top) and
// post-renderers; a chart bump shows the rendered Deployment's image
// change; a chart edit in the repository plans the release using it; the
// value a Secret gives never shows in any output; a chart whose host is
// not allowed is said so on its release alone.
func TestFluxHelmReleasesRendered(t *testing.T) {
	kplan := buildKplan(t)
	chartDir := "../testdata/flux-helm/charts/demo"
	repo := testchart.ServeRepo(t)
	repo.Add(t, testchart.Package(t, chartDir, "1.0.0", "1.0.0"))
	repo.Add(t, testchart.Package(t, chartDir, "2.0.0", "2.0.0"))
	reg := testchart.ServeRegistry(t)
	reg.Push(t, "charts", testchart.Package(t, chartDir, "1.0.0", "1.0.0"))

	fx := gittest.Copy(t, "../testdata/flux-helm")
	dir := fx.Dir
	replace, commit := fx.Replace, fx.Commit
	replace("clusters/prod/sources.yaml", "CHARTS_URL", repo.URL)
	replace("clusters/prod/sources.yaml", "REGISTRY_HOST", reg.Host)
	// Base: web and api declare no HelmRelease yet.
	replace("apps/web/kustomization.yaml", "  - helmrelease.yaml\n", "")
	replace("apps/api/kustomization.yaml", "  - helmrelease.yaml\n", "  []\n")
	replace("apps/api/kustomization.yaml", "resources:\n  []", "resources: []")
	fx.Init("fleet")
	replace("apps/web/kustomization.yaml", "resources:\n", "resources:\n  - helmrelease.yaml\n")
	replace("apps/api/kustomization.yaml", "resources: []", "resources:\n  - helmrelease.yaml")
	commit("add web and api") // main~4
	replace("apps/web/helmrelease.yaml", "version: 1.0.0", "version: 2.0.0")
	commit("bump web's chart") // main~3
	replace("charts/demo/templates/service.yaml", "port: 80", "port: 8080")
	commit("local chart edit") // main~2
	replace("apps/blocked/helmrelease.yaml", "version: 1.0.0", "version: 1.1.0")
	commit("bump blocked's chart") // main~1
	replace("apps/web/secret.yaml", helmSecret, helmSecret+"-rotated")
	commit("rotate web's secret") // main

	cache := t.TempDir()
	hosts := []string{"--remote-hosts", "127.0.0.1"}
	var cpu time.Duration // the last run's
	run := func(t *testing.T, base, head, format string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(kplan, append(append([]string{"diff", "-C", dir, "--base", base, "--head", head, "--format", format,
			"--cache-dir", cache}, hosts...), args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
		}
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if bytes.Contains(stdout.Bytes(), []byte("hunter2")) || bytes.Contains(stderr.Bytes(), []byte("hunter2")) {
			t.Errorf("kplan diff --format %s %s..%s prints the Secret's value:\n%s\n%s", format, base, head, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}
	diff := func(t *testing.T, base, head string, args ...string) helmPlan {
		t.Helper()
		var p helmPlan
		out := run(t, base, head, "json", args...)
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return p
	}
	target := func(t *testing.T, p helmPlan, id string) int {
		t.Helper()
		for i, o := range p.Overlays {
			if o.Path == id {
				return i
			}
		}
		t.Fatalf("no target %s in the plan", id)
		return -1
	}

	t.Run("releases added", func(t *testing.T) {
		p := diff(t, "main~5", "main~4")
		web := p.Overlays[target(t, p, "flux-system/web")]
		for _, k := range []string{
			"helm.toolkit.fluxcd.io_v2_HelmRelease|web|web",
			"apps_v1_Deployment|web|web", "_v1_Service|web|web", "_v1_ConfigMap|web|web-settings",
			"rbac.authorization.k8s.io_v1_ClusterRole||web-reader",
			"apiextensions.k8s.io_v1_CustomResourceDefinition||widgets.example.com",
			"batch_v1_Job|web|web-migrate",
		} {
			if !slices.ContainsFunc(web.Added, func(a string) bool { return strings.HasSuffix(a, k) }) {
				t.Errorf("web adds %v, want %s among them", web.Added, k)
			}
		}
		var deploy, settings, svc string
		for k, y := range web.AddedYAML {
			switch {
			case strings.HasSuffix(k, "Deployment|web|web"):
				deploy = y
			case strings.HasSuffix(k, "ConfigMap|web|web-settings"):
				settings = y
			case strings.HasSuffix(k, "Service|web|web"):
				svc = y
			}
		}
		for _, want := range []string{"replicas: 3", "ghcr.io/example/demo:1.0.0", "hello-from-configmap", "helm.toolkit.fluxcd.io/name: web"} {
			if !strings.Contains(deploy, want) {
				t.Errorf("web's Deployment does not hold %q:\n%s", want, deploy)
			}
		}
		if !strings.Contains(settings, "(value from Secret web/web-secret key") {
			t.Errorf("web-settings' password must show where the Secret's value went:\n%s", settings)
		}
		if !strings.Contains(svc, "post-rendered") {
			t.Errorf("web's Service lacks the post-renderer's annotation:\n%s", svc)
		}
		api := p.Overlays[target(t, p, "flux-system/api")]
		if !slices.ContainsFunc(api.Added, func(a string) bool { return strings.HasSuffix(a, "apps_v1_Deployment|api|api") }) {
			t.Errorf("api (chart from the OCI registry) adds %v, want its Deployment", api.Added)
		}
		for _, format := range []string{"text", "markdown"} {
			run(t, "main~5", "main~4", format) // checks that no output holds the Secret's value
		}
	})

	t.Run("chart bump", func(t *testing.T) {
		start := time.Now()
		p := diff(t, "main~4", "main~3")
		t.Logf("chart bump planned in %s (the new chart fetched)", time.Since(start))
		web := p.Overlays[target(t, p, "flux-system/web")]
		if web.Status != "changed" {
			t.Fatalf("web is %s, want changed", web.Status)
		}
		var image bool
		for k, fs := range web.Fields {
			if strings.HasSuffix(k, "Deployment|web|web") {
				for _, f := range fs {
					image = image || (strings.Contains(fmt.Sprint(f.Old), "demo:1.0.0") && strings.Contains(fmt.Sprint(f.New), "demo:2.0.0"))
				}
			}
		}
		if !image || len(web.Fields) == 0 {
			t.Errorf("web's fields %+v: the Deployment's image must change from 1.0.0 to 2.0.0", web.Fields)
		}
		// Both charts are in --cache-dir now: the same plan needs no
		// network, and shows the same change.
		hosts = nil
		start = time.Now()
		warm := diff(t, "main~4", "main~3")
		t.Logf("chart bump planned with no network from --cache-dir in %s (%s of CPU)", time.Since(start), cpu)
		hosts = []string{"--remote-hosts", "127.0.0.1"}
		if ww := warm.Overlays[target(t, warm, "flux-system/web")]; !slices.Equal(ww.Changed, web.Changed) {
			t.Errorf("from the cache web changes %v, want %v", ww.Changed, web.Changed)
		}
		full := diff(t, "main~4", "main~3", "--full")
		fw := full.Overlays[target(t, full, "flux-system/web")]
		if !slices.Equal(fw.Changed, web.Changed) {
			t.Errorf("--full changes %v, changed-only %v", fw.Changed, web.Changed)
		}
	})

	t.Run("chart edit in the repository", func(t *testing.T) {
		p := diff(t, "main~3", "main~2")
		for _, o := range p.Overlays {
			if o.Status == "unchanged" {
				continue
			}
			if o.Path != "flux-system/local" || !slices.ContainsFunc(o.Changed, func(c string) bool { return strings.HasSuffix(c, "_Service|local|local") }) {
				t.Errorf("%s is %s (changed %v); want local's Service changed alone", o.Path, o.Status, o.Changed)
			}
		}
		if i := target(t, p, "flux-system/local"); p.Overlays[i].Status != "changed" {
			t.Errorf("local is %s, want changed: its chart changed", p.Overlays[i].Status)
		}
	})

	t.Run("host not allowed", func(t *testing.T) {
		p := diff(t, "main~2", "main~1")
		b := p.Overlays[target(t, p, "flux-system/blocked")]
		if b.Status != "changed" || b.Error != "" {
			t.Errorf("blocked is %s (%s), want changed: its HelmRelease object is planned", b.Status, b.Error)
		}
		if !slices.ContainsFunc(b.Notes, func(n string) bool {
			return strings.Contains(n, "HelmRelease blocked/blocked is not rendered") && strings.Contains(n, "https://charts.example.com") && strings.Contains(n, "--remote-hosts")
		}) {
			t.Errorf("blocked's notes %q: must say its chart cannot be fetched, from where, and how to allow it", b.Notes)
		}
		for _, o := range p.Overlays {
			if o.Error != "" {
				t.Errorf("%s fails: %s", o.Path, o.Error)
			}
		}
	})

	t.Run("secret rotated", func(t *testing.T) {
		for _, format := range []string{"json", "text", "markdown"} {
			run(t, "main~1", "main", format) // checks that no output holds the Secret's value
		}
		// The value the chart renders into web-settings changed: the
		// ConfigMap is planned changed, its field masked.
		p := diff(t, "main~1", "main")
		web := p.Overlays[target(t, p, "flux-system/web")]
		const mask = "(value from Secret web/web-secret key password, hidden"
		var got []string
		for k, fs := range web.Fields {
			for _, f := range fs {
				if strings.HasSuffix(k, "ConfigMap|web|web-settings") && f.Path == "data.password" && fmt.Sprint(f.Old) == mask+")" && fmt.Sprint(f.New) == mask+", changed)" {
					got = append(got, k)
				}
			}
		}
		if web.Status != "changed" || len(got) != 1 {
			t.Errorf("web is %s with fields %+v; want web-settings' data.password changed, masked", web.Status, web.Fields)
		}
	})
}
