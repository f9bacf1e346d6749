package inventorydiff

import "testing"

// TestDefaultIgnoreLeavesSelectorsAndDataShown pins what the default
// noise set does not hide: a selector's version label (an immutable
// field, no noise), a ConfigMap key named caBundle, and anything a kind
// rule would need; what it hides is counted per object once.
func TestDefaultIgnoreLeavesSelectorsAndDataShown(t *testing.T) {
	d := DefaultIgnore()
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"metadata.labels.app.kubernetes.io/version", true},
		{"spec.template.metadata.labels.helm.sh/chart", true},
		{"spec.template.metadata.annotations.checksum/config", true},
		{"webhooks[name=v.istio.io].clientConfig.caBundle", true},
		{"spec.conversion.webhook.clientConfig.caBundle", true},
		{"spec.caBundle", true},
		{"spec.selector.matchLabels.app.kubernetes.io/version", false},
		{"data.caBundle", false},
		{"metadata.labels.app.kubernetes.io/name", false},
	} {
		got := false
		for _, f := range d.Fields {
			got = got || matchPath(f, tc.path)
		}
		if got != tc.want {
			t.Errorf("%s: hidden %v, want %v", tc.path, got, tc.want)
		}
	}
	if err := CheckIgnore(d); err != nil {
		t.Error(err)
	}
}
