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
	for _, r := range p.Ignored {
		want := map[string][2]int{"kind StatefulSet": {0, 1}, "kind Deployment": {1, 0}}[r.Rule]
		if r.Objects != want[0] || r.Kept != want[1] {
			t.Errorf("%s hid %d objects and kept %d, want %d and %d", r.Rule, r.Objects, r.Kept, want[0], want[1])
		}
	}
}
