package argocd

import (
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The annotations that make an object a hook (gitops-engine
// pkg/sync/common/types.go:16, pkg/sync/hook/helm/hook.go:5-9 at argo-cd
// 37ee0097cf).
const (
	argoHookAnnotation = "argocd.argoproj.io/hook"
	helmHookAnnotation = "helm.sh/hook"
)

// argoHookTypes are the hook types gitops-engine runs
// (common.NewHookType, pkg/sync/common/types.go:126-133); helmHookTypes
// the Helm hooks it maps onto them (pkg/sync/hook/helm/type.go).
var (
	argoHookTypes = []string{"PreSync", "Sync", "PostSync", "SyncFail", "Skip"}
	helmHookTypes = map[string]string{"pre-install": "PreSync", "pre-upgrade": "PreSync", "post-upgrade": "PostSync", "post-install": "PostSync"}
)

// csv is resourceutil.GetAnnotationCSVs (pkg/sync/resource/
// annotations.go:17-32): the annotation's comma-separated values,
// trimmed, empty and repeated ones dropped.
func csv(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item != "" && !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out
}

// hookOf says why Argo CD does not sync o as one of the Application's
// objects, or "" when it does: gitops-engine's hook.IsHook, hook.Skip
// and ignore.Ignore (pkg/sync/hook/hook.go:23-50, pkg/sync/ignore/
// ignore.go:10-12), as splitHooks (pkg/sync/reconcile.go:13-27) and the
// application controller's comparison (controller/state.go:1040) apply
// them: a hook runs at its sync phase and is neither diffed nor pruned;
// argocd.argoproj.io/hook: Skip alone is never applied; a hook of no
// type gitops-engine runs (Helm's test hooks, PreDelete and PostDelete,
// which the controller runs when the Application is deleted) is ignored
// by the sync.
func hookOf(o *yaml.RNode) string {
	ann := o.GetAnnotations(argoHookAnnotation, helmHookAnnotation)
	var types []string
	if v, ok := ann[argoHookAnnotation]; ok {
		for _, t := range csv(v) {
			if slices.Contains(argoHookTypes, t) {
				types = append(types, t)
			}
		}
		switch {
		case slices.Equal(types, []string{"Skip"}):
			return "argocd.argoproj.io/hook: Skip: Argo CD never applies it"
		case len(types) == 0:
			return "argocd.argoproj.io/hook: " + v + ": a hook the sync does not run (the controller runs PreDelete and PostDelete hooks when the Application is deleted); not diffed, not pruned"
		}
		return "a " + strings.Join(types, ",") + " hook: Argo CD runs it at that sync phase, and neither diffs nor prunes it"
	}
	v, ok := ann[helmHookAnnotation]
	if !ok || v == "crd-install" {
		return ""
	}
	for _, t := range csv(v) {
		if h, ok := helmHookTypes[t]; ok && !slices.Contains(types, h) {
			types = append(types, h)
		}
	}
	if len(types) == 0 {
		return "helm.sh/hook: " + v + ": a Helm hook Argo CD's sync does not run; not diffed, not pruned"
	}
	return "helm.sh/hook: " + v + ", a " + strings.Join(types, ",") + " hook to Argo CD: it runs it at that sync phase, and neither diffs nor prunes it"
}
