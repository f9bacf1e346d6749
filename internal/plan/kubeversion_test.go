package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/testhelm"
)

// kubeverRepo is a git repository whose base commit holds nothing of
// testdata/kubever and whose head holds files (from testdata/kubever,
// each at its new name) with the rest of the tree.
func kubeverRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("deploy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(p, os.DirFS(filepath.Join("testdata/kubever", src))); err != nil {
			// A file, not a directory.
			data, rerr := os.ReadFile(filepath.Join("testdata/kubever", src))
			if rerr != nil {
				t.Fatal(err, rerr)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "head")
	return dir
}

// kubernetesOf is each overlay's charts' Kubernetes, as the plan says it,
// and its added objects' YAML.
func kubernetesOf(t *testing.T, p *inventorydiff.Plan) (map[string]string, map[string]string) {
	t.Helper()
	said, yaml := map[string]string{}, map[string]string{}
	for _, o := range p.Overlays {
		if o.HeadErr != "" {
			t.Errorf("%s: %s", o.Path, o.HeadErr)
		}
		if o.Kubernetes != nil {
			said[o.Path] = o.Kubernetes.String()
		}
		var b strings.Builder
		for _, k := range o.Added {
			b.WriteString(o.AddedYAML[k])
		}
		yaml[o.Path] = b.String()
	}
	return said, yaml
}

// Argo CD Applications' charts see their destination cluster's
// Kubernetes, found by the destination's name or server (argocdClusters
// pairs them), else kplan's default; a source's helm.kubeVersion wins,
// as Argo CD's repo server takes it; the plan says which for each.
func TestArgoCDChartsSeeTheDestinationsKubernetes(t *testing.T) {
	dir := kubeverRepo(t, map[string]string{"charts": "charts", "argo": "argo", ".kplan.yaml": "kplan.yaml"})
	full, _, _ := plans(t, dir, "HEAD~", "HEAD")
	said, yaml := kubernetesOf(t, full)
	for target, want := range map[string][2]string{
		"https://legacy.example.com: argocd/legacy": {"Kubernetes v1.26 and API versions monitoring.coreos.com/v1/ServiceMonitor (.kplan.yaml kubernetes.clusters[0] (legacy))", "kubeVersion: v1.26\n"},
		"in-cluster: argocd/modern":                 {"Kubernetes v1.37.0 (kplan's default)", "kubeVersion: v1.37.0\n"},
		"https://legacy.example.com: argocd/pinned": {"Kubernetes v1.30.2 and API versions monitoring.coreos.com/v1/ServiceMonitor (the Application's helm.kubeVersion)", "kubeVersion: v1.30.2\n"},
	} {
		if said[target] != want[0] {
			t.Errorf("%s: the plan says %q, want %q", target, said[target], want[0])
		}
		if !strings.Contains(yaml[target], want[1]) {
			t.Errorf("%s renders, want %q:\n%s", target, want[1], yaml[target])
		}
	}
	if legacy, modern := yaml["https://legacy.example.com: argocd/legacy"], yaml["in-cluster: argocd/modern"]; !strings.Contains(legacy, "kind: ServiceMonitor") || strings.Contains(modern, "kind: ServiceMonitor") {
		t.Errorf("only legacy's cluster declares the ServiceMonitor API:\nlegacy\n%s\nmodern\n%s", legacy, modern)
	}
}

// kustomize helmCharts see the Kubernetes of their targets' clusters
// (.kplan.yaml's kubernetes.clusters by target name or environment),
// each overlay built for its own, cached under it; the plan says which.
func TestHelmChartsSeeTheTargetsKubernetes(t *testing.T) {
	helm := filepath.Join(testhelm.Dir(t), "helm")
	dir := kubeverRepo(t, map[string]string{"overlays": "overlays", ".kplan.yaml": "kplan-targets.yaml"})
	full, _, _ := plansWith(t, dir, "HEAD~", "HEAD", render.Options{EnableHelm: true, HelmCommand: helm})
	said, yaml := kubernetesOf(t, full)
	for overlay, want := range map[string][2]string{
		"overlays/legacy": {"Kubernetes v1.26 and API versions monitoring.coreos.com/v1/ServiceMonitor (.kplan.yaml kubernetes.clusters[0] (legacy-eu))", "kubeVersion: v1.26\n"},
		"overlays/modern": {"Kubernetes v1.37.0 (kplan's default)", "kubeVersion: v1.37.0\n"},
	} {
		if said[overlay] != want[0] {
			t.Errorf("%s: the plan says %q, want %q", overlay, said[overlay], want[0])
		}
		if !strings.Contains(yaml[overlay], want[1]) {
			t.Errorf("%s renders, want %q:\n%s", overlay, want[1], yaml[overlay])
		}
	}
}
