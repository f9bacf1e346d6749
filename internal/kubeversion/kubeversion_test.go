package kubeversion

import (
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The default is the minor of the k8s.io modules go.mod builds kplan
// with (client-go v0.N speaks Kubernetes v1.N): a dependency bump that
// leaves it behind fails here.
func TestDefaultFollowsGoMod(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range f.Require {
		switch r.Mod.Path {
		case "k8s.io/client-go", "k8s.io/api", "k8s.io/apimachinery":
			seen++
			minor := strings.Split(strings.TrimPrefix(r.Mod.Version, "v0."), ".")[0]
			if want := "v1." + minor + ".0"; Default != want {
				t.Errorf("go.mod requires %s %s: Default is %s, want %s", r.Mod.Path, r.Mod.Version, Default, want)
			}
		}
	}
	if seen != 3 {
		t.Fatalf("go.mod requires %d of k8s.io/client-go, api and apimachinery, want the three", seen)
	}
	if got, err := Parse(Default); err != nil || got != Default {
		t.Errorf("Parse(Default) = %s, %v", got, err)
	}
}

// Versions are read as Helm reads --kube-version (apimachinery's
// ParseGeneric, whose String a chart sees as .Capabilities.KubeVersion):
// a provider's suffix is dropped; what is no Kubernetes v1 version is
// refused.
func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"1.31": "v1.31", "v1.31": "v1.31", "1.31.4": "v1.31.4", "v1.29.3-eks-1a2b3c": "v1.29.3", "v1.30.1+k3s1": "v1.30.1",
		"": "", "latest": "", "2.0": "", "1": "",
	} {
		got, err := Parse(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if err := CheckAPIVersions([]string{"monitoring.coreos.com/v1", "policy/v1/PodDisruptionBudget", "v1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "a b/v1", "a/b/c/d"} {
		if err := CheckAPIVersions([]string{bad}); err == nil {
			t.Errorf("CheckAPIVersions(%q) accepted", bad)
		}
	}
}

// The built-in APIs a cluster serves follow its version: policy/v1's
// PodDisruptionBudget from v1.21 (k8s.io/api's APILifecycleIntroduced),
// policy/v1beta1's until v1.25 (APILifecycleRemoved); no alpha version;
// no beta introduced since v1.24 (off by default, KEP-3136).
func TestServed(t *testing.T) {
	for _, tc := range []struct {
		version string
		has     []string
		hasNot  []string
	}{
		{"1.20", []string{"policy/v1beta1/PodDisruptionBudget", "policy/v1beta1", "batch/v1beta1/CronJob", "v1/ConfigMap", "apps/v1/Deployment"}, []string{"policy/v1/PodDisruptionBudget", "autoscaling/v2/HorizontalPodAutoscaler"}},
		{"1.24", []string{"policy/v1beta1/PodDisruptionBudget", "policy/v1/PodDisruptionBudget", "autoscaling/v2/HorizontalPodAutoscaler"}, nil},
		{"1.25", []string{"policy/v1/PodDisruptionBudget", "batch/v1/CronJob"}, []string{"policy/v1beta1/PodDisruptionBudget", "policy/v1beta1", "batch/v1beta1/CronJob"}},
		{Default, []string{"policy/v1/PodDisruptionBudget", "flowcontrol.apiserver.k8s.io/v1/FlowSchema"}, []string{"storage.k8s.io/v1alpha1/VolumeAttributesClass", "storage.k8s.io/v1beta1/VolumeAttributesClass", "v1/WatchEvent", "v1/PodList", "v1/DeleteOptions"}},
	} {
		got := Served(tc.version)
		for _, h := range tc.has {
			if !slices.Contains(got, h) {
				t.Errorf("Kubernetes %s: no %s among %d", tc.version, h, len(got))
			}
		}
		for _, h := range tc.hasNot {
			if slices.Contains(got, h) {
				t.Errorf("Kubernetes %s serves %s", tc.version, h)
			}
		}
	}
}
