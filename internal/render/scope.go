package render

import (
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// NamespaceScoped says from kustomize's built-in Kubernetes schema whether
// a kind is namespaced (an inventory.Scope). It shares the schema lock with
// builds, since a build with a custom schema swaps kyaml's global one.
func NamespaceScoped(apiVersion, kind string) (namespaced, known bool) {
	schemaMu.RLock()
	defer schemaMu.RUnlock()
	return openapi.IsNamespaceScoped(yaml.TypeMeta{APIVersion: apiVersion, Kind: kind})
}
