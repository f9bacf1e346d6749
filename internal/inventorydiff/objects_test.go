package inventorydiff

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// Objects shown whole: added ones' YAML, changed ones' unified diff, with
// a Secret's keys kept and its values masked in both.
func TestObjectsShownWhole(t *testing.T) {
	secretAdded := "apiVersion: v1\nkind: Secret\nmetadata: {name: tls, namespace: app}\nstringData: {key.pem: \"-----BEGIN KEY-----\\nMIIsecret\\n\"}"
	p := Compare("b", "h",
		map[string]Side{"o": {Inventory: inv(t, deployV1, secretV1, svc)}},
		map[string]Side{"o": {Inventory: inv(t, deployV2, secretV2, secretAdded, pvc)}})
	o := p.Overlays[0]
	for _, c := range []struct {
		what, got string
		want      []string
	}{
		{"added PVC", o.AddedYAML["~G_v1_PersistentVolumeClaim|app|data"], []string{"kind: PersistentVolumeClaim\n", "  name: data\n", "  namespace: app\n"}},
		{"added Secret", o.AddedYAML["~G_v1_Secret|app|tls"], []string{"stringData:\n  key.pem: (hidden)\n"}},
		{"pruned Service", o.PrunedYAML["~G_v1_Service|app|web"], []string{"kind: Service\n", "  - port: 80\n"}},
		{"changed Deployment", unifiedOf(o, "apps_v1_Deployment|app|web"), []string{
			"--- base/apps_v1_Deployment|app|web\n+++ head/apps_v1_Deployment|app|web\n", "-      - image: web:1\n+      - image: web:2\n"}},
		{"changed Secret", unifiedOf(o, "~G_v1_Secret|app|db"), []string{
			"+  extra: (hidden)\n", "-  password: (hidden)\n", "+  password: (hidden, changed)\n", "   user: (hidden)\n",
			"-  token: (hidden)\n+  token: (hidden, changed)\n"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s lacks %q:\n%s", c.what, w, c.got)
			}
		}
		for _, secret := range []string{"MIIsecret", "aHVudGVyMg==", "bmV3LXNlY3JldA==", "YWRtaW4=", "ZXh0cmE=", "s3cr3t-plain", "an0ther-plain"} {
			if strings.Contains(c.got, secret) {
				t.Errorf("%s shows the secret value %q:\n%s", c.what, secret, c.got)
			}
		}
	}
}

func unifiedOf(o Overlay, key string) string {
	for _, c := range o.Changed {
		if c.Key == key {
			return c.Unified
		}
	}
	return ""
}

// An added object's YAML is exactly as kustomize build prints it: one
// rendered without a namespace has none in its YAML (it showed
// "namespace: default", which kustomize build does not print); its key
// and name say where it lands.
func TestAddedYAMLIsAsRendered(t *testing.T) {
	h, err := inventory.New([]*yaml.RNode{yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}")},
		inventory.Options{Namespace: "default", Scope: func(group, kind string) (bool, bool) { return true, true }})
	if err != nil {
		t.Fatal(err)
	}
	o := CompareOne("o", Side{Inventory: inv(t)}, true, Side{Inventory: h}, true)
	if got, want := o.AddedYAML["~G_v1_ConfigMap|default|c"], "apiVersion: v1\ndata:\n  a: b\nkind: ConfigMap\nmetadata:\n  name: c\n"; got != want {
		t.Errorf("added %q: YAML %q, want %q, as kustomize build prints it", o.Added, got, want)
	}
}
