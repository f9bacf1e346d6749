//go:build tools

// Package tools pins the helm and kustomize commands the Helm tests run:
// kplan's render and `kustomize build --enable-helm` are compared with the
// same helm (internal/testhelm builds both from this module).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
