package repoconfig

import (
	"strings"
	"testing"
)

// kubernetes: declares each cluster's Kubernetes for the charts kplan
// templates: a cluster found by name (target name or environment, Flux
// or Argo CD cluster) or server takes its own settings over the top
// ones, anything else the top ones, and without either kplan's default;
// versions are normalised as Helm reads them.
func TestKubernetesCapabilities(t *testing.T) {
	c, err := Parse([]byte(`targets:
  - {name: prod, overlay: o/prod}
  - {name: old, overlay: o/old, environment: legacy}
kubernetes:
  version: "1.31"
  apiVersions: [monitoring.coreos.com/v1]
  clusters:
    - {name: legacy, version: v1.29.3-eks-abc}
    - {server: https://staging.example.com, apiVersions: [example.com/v1]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"prod", "prod"}, "Kubernetes v1.31 and API versions monitoring.coreos.com/v1 (.kplan.yaml kubernetes)"},
		{[]string{"old", "legacy"}, "Kubernetes v1.29.3 and API versions monitoring.coreos.com/v1 (.kplan.yaml kubernetes.clusters[0] (legacy))"},
		{[]string{"staging", "https://staging.example.com"}, "Kubernetes v1.31 and API versions example.com/v1 (.kplan.yaml kubernetes.clusters[1] (https://staging.example.com))"},
	} {
		if got := c.Capabilities(tc.ids...).String(); got != tc.want {
			t.Errorf("Capabilities(%q) = %s, want %s", tc.ids, got, tc.want)
		}
	}
	if got := c.TargetCapabilities("o/old").String(); !strings.HasPrefix(got, "Kubernetes v1.29.3 ") {
		t.Errorf("TargetCapabilities(o/old) = %s, want legacy's", got)
	}
	var none *Config
	if got := none.Capabilities("prod").String(); got != "Kubernetes v1.37.0 (kplan's default)" {
		t.Errorf("without .kplan.yaml: %s", got)
	}
	only, err := Parse([]byte("kubernetes: {version: '1.30'}\n"))
	if err != nil || only.HasTargets() || only.Capabilities().Version != "v1.30" {
		t.Errorf("a file declaring kubernetes alone: %+v, %v", only, err)
	}
}

func TestKubernetesRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad version", "kubernetes: {version: latest}\n", "kubernetes.version: \"latest\" is not a Kubernetes version"},
		{"bad cluster version", "kubernetes: {clusters: [{name: a, version: '2.1'}]}\n", "kubernetes.clusters[0].version"},
		{"bad api version", "kubernetes: {apiVersions: ['a b']}\n", "kubernetes.apiVersions[0]"},
		{"nameless", "kubernetes: {clusters: [{version: '1.30'}]}\n", "kubernetes.clusters[0]: give the cluster's name"},
		{"twice", "kubernetes: {clusters: [{name: a}, {name: a}]}\n", `kubernetes.clusters[1]: "a" is also kubernetes.clusters[0]`},
		{"one overlay, two Kubernetes", "targets:\n  - {name: a, overlay: o}\n  - {name: b, overlay: o}\nkubernetes: {clusters: [{name: b, version: '1.29'}]}\n",
			"targets[1].overlay: o is also targets[0]'s, whose cluster runs Kubernetes v1.37.0 (kplan's default), and this one's Kubernetes v1.29"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
