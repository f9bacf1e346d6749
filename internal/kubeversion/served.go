package kubeversion

import (
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Served are the built-in API versions a cluster of Kubernetes version v
// serves by default, as its discovery lists them and as helm-controller
// (action.Configuration's capabilities, GetVersionSet) and Argo CD (the
// cluster's API resources, kinds included) hand them to charts:
// "group/version" and "group/version/Kind", sorted. They are read from
// the types kplan's client-go knows (k8s.io/api) and CustomResource-
// Definitions (k8s.io/apiextensions-apiserver), with the aggregator's
// APIService, each kept when the cluster serves it by default:
//
//   - its version is not alpha (kube-apiserver disables alpha versions:
//     DefaultAPIResourceConfigSource, k8s.io/kubernetes
//     pkg/controlplane/instance.go);
//   - v lies between the release that introduced it and the one that
//     removed it (the APILifecycleIntroduced and APILifecycleRemoved
//     methods k8s.io/api generates, zz_generated.prerelease-lifecycle.go);
//   - a beta introduced in v1.24 or later is off by default (KEP-3136,
//     kube-apiserver's betaAPIGroupVersionsDisabledByDefault).
//
// Custom resources are the cluster's own: a declaration's APIVersions
// add them. TestServedIsDiscovery compares Served(Default) with a real
// kube-apiserver's discovery.
func Served(v string) []string {
	sv, err := k8sversion.ParseGeneric(cmpOr(v, Default))
	if err != nil {
		return nil
	}
	key := sv.String()
	if got, ok := served.Load(key); ok {
		return got.([]string)
	}
	out := servedBy(sv)
	served.Store(key, out)
	return out
}

var served sync.Map // version -> []string

type introduced interface{ APILifecycleIntroduced() (major, minor int) }
type removed interface{ APILifecycleRemoved() (major, minor int) }

// notResources are kinds the schemes register that discovery lists as
// no resource: every group version's meta kinds, review objects, and the
// kinds of subresources (deployments/scale, pods/eviction,
// serviceaccounts/token).
var notResources = map[string]bool{"WatchEvent": true, "Status": true, "Table": true, "PartialObjectMetadata": true,
	"APIGroup": true, "APIVersions": true, "APIResourceList": true, "SerializedReference": true, "RangeAllocation": true,
	"ConversionReview": true, "Scale": true, "Eviction": true, "TokenRequest": true}

// always are what every kube-apiserver serves beyond those types: the
// aggregator's APIService (k8s.io/kube-aggregator, GA since v1.10).
var always = []string{"apiregistration.k8s.io/v1", "apiregistration.k8s.io/v1/APIService"}

// schemes are the types Served reads: its own scheme, not client-go's
// global one, which what else a binary links adds to.
var schemes = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the schemes of the build: a test runs them
		}
	}
	return s
})

func servedBy(sv *k8sversion.Version) []string {
	set := map[string]bool{}
	for _, s := range always {
		set[s] = true
	}
	for gvk := range schemes().AllKnownTypes() {
		if !servesByDefault(sv, gvk) {
			continue
		}
		gv := gvk.GroupVersion().String()
		set[gv] = true
		set[gv+"/"+gvk.Kind] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func servesByDefault(sv *k8sversion.Version, gvk schema.GroupVersionKind) bool {
	if gvk.Version == "" || gvk.Version == "__internal" || strings.Contains(gvk.Version, "alpha") ||
		notResources[gvk.Kind] || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
		return false
	}
	obj, err := schemes().New(gvk)
	if err != nil {
		return false
	}
	at := func(major, minor int) *k8sversion.Version { return k8sversion.MajorMinor(uint(major), uint(minor)) }
	if i, ok := obj.(introduced); ok {
		from := at(i.APILifecycleIntroduced())
		if sv.LessThan(from) {
			return false
		}
		if strings.Contains(gvk.Version, "beta") && !from.LessThan(at(1, 24)) {
			return false
		}
	}
	if r, ok := obj.(removed); ok {
		if major, minor := r.APILifecycleRemoved(); major > 0 && !sv.LessThan(at(major, minor)) {
			return false
		}
	}
	return true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
