package inventory

import "testing"

func TestIsInventory(t *testing.T) {
	id := map[string]string{InventoryIDLabel: "x"}
	for _, c := range []struct {
		group, kind string
		labels      map[string]string
		want        bool
	}{
		{"kpt.dev", "ResourceGroup", nil, true},
		{"kpt.dev", "ResourceGroup", id, true},
		{"", "ConfigMap", id, true},
		{"", "ConfigMap", nil, false}, // an ordinary ConfigMap
		{"", "ResourceGroup", nil, false},
		{"apps", "Deployment", id, false},
	} {
		if got := IsInventory(c.group, c.kind, c.labels); got != c.want {
			t.Errorf("IsInventory(%q, %q, %v) = %v, want %v", c.group, c.kind, c.labels, got, c.want)
		}
	}
}

func TestBackendOf(t *testing.T) {
	for kind, want := range map[string]string{"": "kpt.dev/v1alpha1", "ResourceGroup": "kpt.dev/v1alpha1", "ConfigMap": "v1"} {
		b, ok := BackendOf(kind)
		if !ok || b.APIVersion() != want {
			t.Errorf("BackendOf(%q) = %+v, %v; want apiVersion %s", kind, b, ok, want)
		}
	}
	if _, ok := BackendOf("Secret"); ok {
		t.Error("Secret is an inventory backend")
	}
	if got := BackendKinds(); got != "ResourceGroup or ConfigMap" {
		t.Errorf("BackendKinds() = %q", got)
	}
}
