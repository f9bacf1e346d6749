package main

import (
	"slices"
	"strings"
	"testing"
)

// kplan's object keys name the same object as the apiserver's read-back.
func TestPlanKey(t *testing.T) {
	cases := map[string]string{
		"~G_v1_Namespace||podinfo":                                    "/Namespace /podinfo",
		"helm.toolkit.fluxcd.io_v2_HelmRelease|podinfo|podinfo":       "helm.toolkit.fluxcd.io/HelmRelease podinfo/podinfo",
		"apiextensions.k8s.io_v1_CustomResourceDefinition||a.example": "apiextensions.k8s.io/CustomResourceDefinition /a.example",
	}
	for in, want := range cases {
		if got := planKey(in); got != want {
			t.Errorf("planKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// A planned field is compared with the applied one; what the apiserver
// adds is no difference, a Secret's masked values and apiVersion are not
// compared.
func TestSubset(t *testing.T) {
	planned := map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1beta2",
		"metadata":   map[string]any{"name": "a", "labels": map[string]any{"x": "1"}},
		"spec":       map[string]any{"ports": []any{map[string]any{"port": float64(80)}}, "gone": "yes", "empty": map[string]any{}},
	}
	applied := map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"metadata":   map[string]any{"name": "a", "labels": map[string]any{"x": "2"}, "uid": "u"},
		"spec":       map[string]any{"ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}, "clusterIP": "10.0.0.1"},
	}
	got := subset(planned, applied, "", false)
	want := []string{".metadata.labels.x: planned \"1\", applied \"2\"", ".spec.gone: planned \"yes\", not applied"}
	if !slices.Equal(got, want) {
		t.Errorf("subset:\n%q\nwant\n%q", got, want)
	}
	secret := map[string]any{"stringData": map[string]any{"password": "(hidden)"}, "type": "Opaque"}
	if d := subset(secret, map[string]any{"data": map[string]any{"password": "eA=="}, "type": "Opaque"}, "", true); len(d) != 0 {
		t.Errorf("Secret: %q, want no difference", d)
	}
}

// What the controllers failed on for want of a namespace or a CRD is read
// from their Ready messages; the kinds of the controllers run here are
// findings, never stubbed.
func TestMissing(t *testing.T) {
	state := strings.Join([]string{
		`Kustomization flux-system/web False ReconciliationFailed -1 : ConfigMap/web/web-values not found: namespaces "web" not found`,
		`Kustomization flux-system/apps False ReconciliationFailed -1 : ExternalSecret/a/b dry-run failed: no matches for kind "ExternalSecret" in version "external-secrets.io/v1"`,
		`Kustomization flux-system/old False ReconciliationFailed -1 : HelmRelease/a/b dry-run failed: no matches for kind "HelmRelease" in version "helm.toolkit.fluxcd.io/v2beta1"`,
		`Kustomization flux-system/n False ReconciliationFailed -1 : Alert/a/b dry-run failed: no matches for kind \"Alert\" in version \"notification.toolkit.fluxcd.io/v1beta3\"`,
	}, "\n")
	if got := missingNamespaces(state); !slices.Equal(got, []string{"web"}) {
		t.Errorf("namespaces %q", got)
	}
	if got, want := missingKinds(state), []string{"external-secrets.io/v1/ExternalSecret", "notification.toolkit.fluxcd.io/v1beta3/Alert"}; !slices.Equal(got, want) {
		t.Errorf("kinds %q, want %q", got, want)
	}
}
