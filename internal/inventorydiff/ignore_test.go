package inventorydiff

import "testing"

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
