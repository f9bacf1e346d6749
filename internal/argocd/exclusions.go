package argocd

import (
	"cmp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// exclusion is a FilteredResource of Argo CD's resource exclusions: the
// kinds of the API groups it names (every kind when none).
type exclusion struct{ groups, kinds []string }

// exclusions are the resources Argo CD leaves out of every Application
// (controller/state.go:805-815 at argo-cd 37ee0097cf: "excluded in the
// settings", neither synced nor pruned): its core exclusions
// (util/settings/resources_filter.go:7-11) and the resource.exclusions
// of the argocd-cm Argo CD installs (manifests/base/config/
// argocd-cm.yaml:66-119). An install that changed argocd-cm excludes
// otherwise; kplan takes the defaults.
var exclusions = []exclusion{
	{groups: []string{"events.k8s.io", "metrics.k8s.io"}},
	{groups: []string{""}, kinds: []string{"Event"}},
	{groups: []string{"coordination.k8s.io"}, kinds: []string{"Lease"}},
	{groups: []string{"", "discovery.k8s.io"}, kinds: []string{"Endpoints", "EndpointSlice"}},
	{groups: []string{"authentication.k8s.io", "authorization.k8s.io"}, kinds: []string{"SelfSubjectReview", "TokenReview", "LocalSubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview"}},
	{groups: []string{"certificates.k8s.io"}, kinds: []string{"CertificateSigningRequest"}},
	{groups: []string{"cert-manager.io"}, kinds: []string{"CertificateRequest"}},
	{groups: []string{"cilium.io"}, kinds: []string{"CiliumIdentity", "CiliumEndpoint", "CiliumEndpointSlice"}},
	{groups: []string{"kyverno.io", "reports.kyverno.io", "wgpolicyk8s.io"}, kinds: []string{"PolicyReport", "ClusterPolicyReport", "EphemeralReport", "ClusterEphemeralReport", "AdmissionReport", "ClusterAdmissionReport", "BackgroundScanReport", "ClusterBackgroundScanReport", "UpdateRequest"}},
}

// excluded says why Argo CD leaves o out of its Application, or "".
func excluded(o *yaml.RNode) string {
	group := "" // v1: the core group
	if i := strings.LastIndex(o.GetApiVersion(), "/"); i >= 0 {
		group = o.GetApiVersion()[:i]
	}
	kind := o.GetKind()
	for _, x := range exclusions {
		if slices.Contains(x.groups, group) && (len(x.kinds) == 0 || slices.Contains(x.kinds, kind)) {
			return "Argo CD excludes " + cmp.Or(group, "core") + "/" + kind + " from every Application (its default resource exclusions): it is neither synced nor pruned"
		}
	}
	return ""
}
