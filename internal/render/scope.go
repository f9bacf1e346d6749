package render

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// otherVersions are tried when kustomize's built-in schema, which is
// older than the cluster, lacks a kind's version (autoscaling/v2): a
// kind's scope is the same in every version.
var otherVersions = []string{"v1", "v2", "v1beta1", "v1beta2", "v2beta1", "v2beta2", "v1alpha1"}

// NamespaceScoped says from kustomize's built-in Kubernetes schema whether
// a kind is namespaced (an inventory.Scope). It shares the schema lock with
// builds, since a build with a custom schema swaps kyaml's global one, but
// never parses the schema: kyaml answers for the built-in schema from a
// table computed from it (and checked against it by kyaml's own tests),
// so a plan whose builds all come from the render cache parses no schema.
func NamespaceScoped(apiVersion, kind string) (namespaced, known bool) {
	defer readSchema()()
	if ns, ok := openapi.IsNamespaceScoped(yaml.TypeMeta{APIVersion: apiVersion, Kind: kind}); ok {
		return ns, ok
	}
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i+1]
	}
	for _, v := range otherVersions {
		if ns, ok := openapi.IsNamespaceScoped(yaml.TypeMeta{APIVersion: group + v, Kind: kind}); ok {
			return ns, ok
		}
	}
	return false, false
}
