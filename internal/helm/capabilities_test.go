package helm

import (
	"bytes"
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
)

const capsChart = "testdata/capabilities"

// A chart sees its cluster's Kubernetes: the declared version (else
// kplan's default, never Helm's v1.20, which the chart's kubeVersion
// range refuses), the built-in API versions that version serves (the
// chart's policy/v1 check) and the declared ones (a ServiceMonitor).
// Each render equals `helm template --kube-version --api-versions` of
// the same chart (the helm CLI tools/helm builds); a HelmRelease
// renders the same objects (with helm-controller's labels), and fails
// on a cluster older than the chart's range, naming both.
func TestCapabilitiesAreTheClusters(t *testing.T) {
	helmBin := filepath.Join(testhelm.Dir(t), "helm")
	files := map[string][]byte{}
	for p, data := range testkit.Files(t, capsChart) {
		files[p] = []byte(data)
	}
	env := Env{Local: func(context.Context, string, string, string, string) (map[string][]byte, bool, error) {
		return files, true, nil
	}}
	release := parseRelease(t, `{metadata: {name: caps, namespace: apps}, spec: {chart: {spec: {chart: ./charts/caps, sourceRef: {kind: GitRepository, name: flux-system}}}}}`)
	for _, tc := range []struct {
		name string
		caps kubeversion.Capabilities
		// want: each object's apiVersion and the ConfigMap's data
		want []string
		err  string
	}{
		{"kplan's default", kubeversion.Capabilities{}, []string{"ConfigMap caps-info v1 kubeVersion=v1.37.0 replicas=2 sidecars=native", "PodDisruptionBudget caps policy/v1"}, ""},
		{"declared v1.26", kubeversion.Capabilities{Version: "v1.26"}, []string{"ConfigMap caps-info v1 kubeVersion=v1.26 replicas=2 sidecars=init-containers", "PodDisruptionBudget caps policy/v1"}, ""},
		{"declared with a custom resource", kubeversion.Capabilities{Version: "v1.31.4", APIVersions: []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}},
			[]string{"ConfigMap caps-info v1 kubeVersion=v1.31.4 replicas=2 sidecars=native", "PodDisruptionBudget caps policy/v1", "ServiceMonitor caps monitoring.coreos.com/v1"}, ""},
		{"older than the chart's range", kubeversion.Capabilities{Version: "v1.24.9"}, nil, "chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := loader.Load(capsChart)
			if err != nil {
				t.Fatal(err)
			}
			kv := tc.caps.Version
			if kv == "" {
				kv = kubeversion.Default
			}
			objs, err := Template(context.Background(), ch, nil, TemplateOptions{Name: "caps", Namespace: "apps", KubeVersion: tc.caps.Version, APIVersions: tc.caps.APIVersionSet()})
			args := []string{"template", "caps", capsChart, "--namespace", "apps", "--kube-version", kv}
			for _, v := range tc.caps.APIVersionSet() {
				args = append(args, "--api-versions", v)
			}
			cmd := exec.Command(helmBin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			herr := cmd.Run()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("kplan: %v, want %q", err, tc.err)
				}
				if herr == nil || !strings.Contains(stderr.String(), tc.err) {
					t.Errorf("helm template: %v %s, want %q", herr, stderr.String(), tc.err)
				}
			} else {
				if err != nil || herr != nil {
					t.Fatalf("kplan: %v; helm template: %v %s", err, herr, stderr.String())
				}
				want, err := parse(stdout.String())
				if err != nil {
					t.Fatal(err)
				}
				if g, w := summary(objs), summary(want); !slices.Equal(g, w) {
					t.Errorf("kplan renders %q, helm template %q", g, w)
				}
				if g := summary(objs); !slices.Equal(g, tc.want) {
					t.Errorf("renders %q, want %q", g, tc.want)
				}
			}
			// The same chart as a HelmRelease's, on that cluster.
			env := env
			env.Kubernetes = tc.caps
			p, err := Prepare(context.Background(), release, env)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := p.Render(context.Background(), nil)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "HelmRelease apps/caps")):
				t.Errorf("HelmRelease: %v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("HelmRelease: %v", err)
			case tc.err == "" && !slices.Equal(summary(rel), tc.want):
				t.Errorf("HelmRelease renders %q, want %q", summary(rel), tc.want)
			}
		})
	}
}

// summary is each object as "Kind name apiVersion", a ConfigMap with its
// data, sorted.
func summary(objs []*yaml.RNode) []string {
	var out []string
	for _, o := range objs {
		s := o.GetKind() + " " + o.GetName() + " " + o.GetApiVersion()
		if o.GetKind() == "ConfigMap" {
			d := o.GetDataMap()
			for _, k := range slices.Sorted(maps.Keys(d)) {
				s += " " + k + "=" + d[k]
			}
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
