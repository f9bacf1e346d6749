// Package kubeversion says which Kubernetes a chart is templated for: the
// version and API versions Helm's Capabilities hold when kplan templates a
// chart (a Flux HelmRelease, an Argo CD Helm source, kustomize's
// helmCharts) for a cluster, as that cluster's declaration says, else
// the newest Kubernetes kplan's client libraries speak — never the Helm
// SDK's own default (v1.20), which charts requiring a newer Kubernetes
// refuse.
package kubeversion

import (
	"fmt"
	"slices"
	"strings"

	k8sversion "k8s.io/apimachinery/pkg/util/version"
)

// Default is the Kubernetes version charts are templated for when no
// declaration names one: the minor of the k8s.io modules kplan is built
// with (go.mod's k8s.io/client-go v0.N.x speaks Kubernetes v1.N), as
// Helm's own release build sets its default from client-go. A test
// (TestDefaultFollowsGoMod) fails when go.mod moves and this does not.
const Default = "v1.37.0"

// Capabilities are what a chart templated for one cluster sees of it.
type Capabilities struct {
	// Version is the cluster's Kubernetes version, normalised as Helm
	// parses --kube-version ("v1.31.4"; Parse); "" is Default.
	Version string `json:"version"`
	// APIVersions are the API versions (group/version or
	// group/version/Kind) the cluster serves besides its built-in ones
	// (Served): its custom resources.
	APIVersions []string `json:"apiVersions,omitempty"`
	// From says where they were declared ("" is kplan's default): e.g.
	// ".kplan.yaml kubernetes.clusters[0] (prod)".
	From string `json:"from,omitempty"`
}

// Defaults are the capabilities of a cluster nothing declares.
func Defaults() Capabilities { return Capabilities{Version: Default} }

// Parse normalises a Kubernetes version as Helm's --kube-version (and
// Argo CD's repo server) read it, apimachinery's ParseGeneric: "1.31",
// "v1.31.4" and a provider's "v1.31.4-eks-1a2b3c" are "v1.31", "v1.31.4"
// and "v1.31.4", what a chart's .Capabilities.KubeVersion.Version says.
func Parse(v string) (string, error) {
	sv, err := k8sversion.ParseGeneric(v)
	if err != nil {
		return "", fmt.Errorf("%q is not a Kubernetes version (e.g. 1.31 or v1.31.4)", v)
	}
	if sv.Major() != 1 {
		return "", fmt.Errorf("%q is not a Kubernetes version: Kubernetes is v1.x", v)
	}
	return "v" + sv.String(), nil
}

// CheckAPIVersions refuses an empty API version and one with spaces.
func CheckAPIVersions(vs []string) error {
	for i, v := range vs {
		if v == "" || strings.ContainsAny(v, " \t\n") || strings.Count(v, "/") > 2 {
			return fmt.Errorf("apiVersions[%d]: %q: want group/version or group/version/Kind (e.g. monitoring.coreos.com/v1 or policy/v1/PodDisruptionBudget)", i, v)
		}
	}
	return nil
}

// APIVersionSet are the API versions a chart for the cluster sees besides
// Helm's own list, as `helm template --api-versions` adds them: the
// built-in ones its version serves (Served) and the declared ones.
func (c Capabilities) APIVersionSet() []string {
	return slices.Concat(Served(c.version()), c.APIVersions)
}

// Key names the capabilities in cache keys: renders with other ones
// differ.
func (c Capabilities) Key() string {
	return c.version() + " " + strings.Join(c.APIVersions, ",")
}

func (c Capabilities) version() string {
	if c.Version == "" {
		return Default
	}
	return c.Version
}

// Equal says whether c and o template charts alike (From aside).
func (c Capabilities) Equal(o Capabilities) bool {
	return c.version() == o.version() && slices.Equal(c.APIVersions, o.APIVersions)
}

// String says them for a reader: "Kubernetes v1.31.0 and API versions
// monitoring.coreos.com/v1 (.kplan.yaml kubernetes.clusters[0] (prod))",
// "Kubernetes v1.37.0 (kplan's default)".
func (c Capabilities) String() string {
	s := "Kubernetes " + c.version()
	if len(c.APIVersions) > 0 {
		s += " and API versions " + strings.Join(c.APIVersions, ", ")
	}
	if c.From == "" {
		return s + " (kplan's default)"
	}
	return s + " (" + c.From + ")"
}
