package test

import (
	"path"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// The built-in API versions kplan gives charts for its default
// Kubernetes are what a kube-apiserver of that minor serves: its
// discovery (tools/cluster's kube-apiserver v1.37, no custom resources),
// read as helm-controller reads it (Helm's GetVersionSet: each group
// version, and each group version with a resource's kind). Subresources
// (deployments/scale's Scale, pods/eviction's Eviction, …) are left out
// of the comparison: helm lists them under their parent's group version,
// where no chart looks for them.
func TestServedIsDiscovery(t *testing.T) {
	c := testcluster.Start(t)
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(strings.Split(strings.TrimPrefix(kubeversion.Default, "v"), ".")[:2], "."); info.Major+"."+info.Minor != want {
		t.Fatalf("the test cluster is Kubernetes %s.%s, kplan's default %s: tools/cluster and go.mod disagree", info.Major, info.Minor, kubeversion.Default)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var discovered []string
	for _, l := range lists {
		discovered = append(discovered, l.GroupVersion)
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				discovered = append(discovered, path.Join(l.GroupVersion, r.Kind))
			}
		}
	}
	slices.Sort(discovered)
	discovered = slices.Compact(discovered)
	served := kubeversion.Served(kubeversion.Default)
	for _, d := range discovered {
		if !slices.Contains(served, d) {
			t.Errorf("the apiserver serves %s; kplan does not give it to charts", d)
		}
	}
	for _, s := range served {
		if !slices.Contains(discovered, s) {
			t.Errorf("kplan gives charts %s; the apiserver does not serve it", s)
		}
	}
}
