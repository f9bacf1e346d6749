package inventorydiff

import (
	"strings"
	"testing"
)

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"metadata.annotations.checksum/*", "metadata.annotations.checksum/config", true},
		{"metadata.annotations.checksum/*", "spec.template.metadata.annotations.checksum/config", true},
		{"metadata.annotations.checksum/*", "metadata.annotations.other", false},
		{"metadata.labels.helm.sh/chart", "metadata.labels.helm.sh/chart", true},
		{"metadata.labels.helm.sh/chart", "metadata.labels.helm.sh/chartname", false},
		{"metadata.labels", "metadata.labels.app", true},
		{"metadata.labels", "metadata.labelsx", false},
		{"spec.replicas", "spec.template.spec.replicas", true},
		{"containers[name=web].image", "spec.template.spec.containers[name=web].image", true},
		{"containers", "spec.template.spec.containers[name=web].image", true},
		{"image", "spec.template.spec.containers[name=web].image", true},
		{"image", "spec.template.spec.containers[name=web].imagePullPolicy", false},
		{"data.*", "data.key", true},
		{"ata.key", "data.key", false},
	} {
		if got := matchPath(tc.pattern, tc.path); got != tc.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func TestCheckIgnore(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    IgnoreRules
		ok   bool
	}{
		{"fields and kinds", IgnoreRules{Fields: []string{"metadata.labels"}, Kinds: []string{"HorizontalPodAutoscaler"}}, true},
		{"everything", IgnoreRules{Fields: []string{"*"}}, false},
		{"empty field", IgnoreRules{Fields: []string{" "}}, false},
		{"Secret", IgnoreRules{Kinds: []string{"Secret"}}, false},
	} {
		if err := CheckIgnore(tc.r); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
}

// A change a danger rule flags is never hidden by an ignore rule: the
// reviewer reads what the finding points at.
func TestIgnoreKeepsDangerousChanges(t *testing.T) {
	b := inv(t, deployV1, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: app}\nspec: {serviceName: db}")
	h := inv(t, strings.Replace(deployV1, "replicas: 1", "replicas: 2", 1), "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: app}\nspec: {serviceName: db2}")
	p := Compare("b", "h", map[string]Side{"o": {Inventory: b}}, map[string]Side{"o": {Inventory: h}})
	p.Ignore(IgnoreRules{Kinds: []string{"StatefulSet", "Deployment"}})
	o := p.Overlays[0]
	if len(o.Changed) != 1 || o.Changed[0].Key != "apps_v1_StatefulSet|app|db" || len(o.Dangerous) != 1 || o.Dangerous[0].Rule != "statefulset-immutable" {
		t.Fatalf("changed %+v dangerous %+v: want the StatefulSet kept, the Deployment hidden", o.Changed, o.Dangerous)
	}
	// What the rules hid stays with the overlay, for the HTML report to
	// show behind its count: the Deployment whole, not the dangerous
	// StatefulSet.
	if len(o.Ignored) != 1 || o.Ignored[0].Key != "apps_v1_Deployment|app|web" || len(o.Ignored[0].Fields) != 1 || o.Ignored[0].Fields[0].Path != "spec.replicas" {
		t.Errorf("ignored %+v: want the Deployment's replicas", o.Ignored)
	}
	for _, r := range p.Ignored {
		want := map[string][2]int{"kind StatefulSet": {0, 1}, "kind Deployment": {1, 0}}[r.Rule]
		if r.Objects != want[0] || r.Kept != want[1] {
			t.Errorf("%s hid %d objects and kept %d, want %d and %d", r.Rule, r.Objects, r.Kept, want[0], want[1])
		}
	}
}

// A scoped rule (Argo CD's ignoreDifferences) hides the field changes it
// names, in its own overlay only, and like every rule never hides a
// dangerous change, an add, or that a Secret's data changed; what it
// hid and kept is counted.
func TestScopedRulesHideOnlyWhatTheyName(t *testing.T) {
	secret := func(v string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: app}\ndata: {k: " + v + "}"
	}
	b := inv(t, deployV1, secret("YQ=="))
	h := inv(t, strings.Replace(strings.Replace(deployV1, "replicas: 1", "replicas: 0", 1), "web:1", "web:2", 1), secret("Yg=="),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: app}")
	p := Compare("b", "h", map[string]Side{"o": {Inventory: b}, "other": {Inventory: b}}, map[string]Side{"o": {Inventory: h}, "other": {Inventory: h}})
	dep, sec := "apps_v1_Deployment|app|web", "~G_v1_Secret|app|s"
	p.Ignore(IgnoreRules{Source: "Argo CD", Scoped: []ScopedRule{
		{Rule: "image", Overlay: "o", Hidden: map[string]map[string]bool{dep: {"spec.template.spec.containers[name=web].image": true}}},
		{Rule: "data", Overlay: "o", Hidden: map[string]map[string]bool{sec: {"data.k": true}}},
	}})
	o, other := p.Overlays[0], p.Overlays[1]
	// replicas 1 → 0 is scale-to-zero: the Deployment shows whole.
	if len(o.Changed) != 2 || len(o.Changed[0].Fields) != 2 || len(o.Added) != 1 {
		t.Errorf("changed %+v added %q: the dangerous Deployment, the Secret and the add all stay", o.Changed, o.Added)
	}
	if len(other.Changed[0].Fields) != 2 {
		t.Errorf("another overlay's changes were hidden: %+v", other.Changed)
	}
	for _, r := range p.Ignored {
		if r.Fields != 0 || r.Kept != 1 {
			t.Errorf("%+v: want nothing hidden, one change kept", r)
		}
	}

	// Without the danger, the image change is hidden and counted.
	b = inv(t, deployV1)
	h = inv(t, strings.Replace(strings.Replace(deployV1, "replicas: 1", "replicas: 3", 1), "web:1", "web:2", 1))
	p = Compare("b", "h", map[string]Side{"o": {Inventory: b}}, map[string]Side{"o": {Inventory: h}})
	p.Ignore(IgnoreRules{Source: "Argo CD", Scoped: []ScopedRule{
		{Rule: "image", Overlay: "o", Hidden: map[string]map[string]bool{dep: {"spec.template.spec.containers[name=web].image": true}}},
	}})
	if f := p.Overlays[0].Changed[0].Fields; len(f) != 1 || f[0].Path != "spec.replicas" || p.Ignored[0].Fields != 1 || len(p.Hidden) != 1 {
		t.Errorf("fields %+v ignored %+v hidden %+v: want the image hidden and counted", f, p.Ignored, p.Hidden)
	}
}

func TestHiddenPaths(t *testing.T) {
	base := map[string]any{"spec": map[string]any{"replicas": 1, "x": "a"}}
	head := map[string]any{"spec": map[string]any{"replicas": 2, "x": "b"}}
	drop := func(key string) func(map[string]any) (map[string]any, error) {
		return func(m map[string]any) (map[string]any, error) {
			spec := map[string]any{}
			for k, v := range m["spec"].(map[string]any) {
				if k != key {
					spec[k] = v
				}
			}
			return map[string]any{"spec": spec}, nil
		}
	}
	if got, ok, err := HiddenPaths(base, head, drop("replicas")); err != nil || !ok || len(got) != 1 || !got["spec.replicas"] {
		t.Errorf("HiddenPaths = %v, %v, %v; want spec.replicas", got, ok, err)
	}
	rename := func(m map[string]any) (map[string]any, error) {
		return map[string]any{"spec": map[string]any{"y": m["spec"].(map[string]any)["x"]}}, nil
	}
	if _, ok, _ := HiddenPaths(base, head, rename); ok {
		t.Errorf("a normalization that renames a change hid something")
	}
}
