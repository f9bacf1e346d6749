package inventorydiff

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A field masked alike on both sides is planned changed when the values
// its masks stand for differ (their fingerprints), as ChangedMask, and
// unchanged when they do not; what else changes shows as it would; the
// objects' digests hold no mark.
func TestMaskedValueChanges(t *testing.T) {
	const mask = "(value from Secret app/db key PASSWORD, hidden)"
	cm := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf, namespace: app}\ndata: {url: 'postgres://app:" + v + "@db', level: info}"
	}
	for _, tc := range []struct {
		name       string
		base, head string // the ConfigMap's url value
		fps        [2]string
		want       string // the ConfigMap's field changes, "" none
	}{
		{"value changed", mask, mask, [2]string{"a", "b"}, `~ data.url: "postgres://app:(value from Secret app/db key PASSWORD, hidden)@db" → "postgres://app:(value from Secret app/db key PASSWORD, hidden, changed)@db"`},
		{"value the same", mask, mask, [2]string{"a", "a"}, ""},
		{"mask new on head", "plain", mask, [2]string{"", "b"}, `~ data.url: "postgres://app:plain@db" → "postgres://app:(value from Secret app/db key PASSWORD, hidden)@db"`},
		{"value unknown on a side", mask, mask, [2]string{"", "b"}, `~ data.url: "postgres://app:(value from Secret app/db key PASSWORD, hidden)@db" → "postgres://app:(value from Secret app/db key PASSWORD, hidden, changed)@db"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			masked := func(fp string) func(*yaml.RNode) map[string]string {
				return func(n *yaml.RNode) map[string]string {
					s, _ := n.String()
					if !strings.Contains(s, mask) {
						return nil
					}
					return map[string]string{mask: fp}
				}
			}
			b := Side{Inventory: inv(t, cm(tc.base)), Masked: masked(tc.fps[0])}
			h := Side{Inventory: inv(t, cm(tc.head)), Masked: masked(tc.fps[1])}
			digest, err := h.Inventory.Digest()
			if err != nil {
				t.Fatal(err)
			}
			o := CompareOne("o", b, true, h, true)
			got := ""
			for _, c := range o.Changed {
				for _, f := range c.Fields {
					got += fmt.Sprint(f)
				}
			}
			if got != tc.want {
				t.Errorf("changes %q, want %q", got, tc.want)
			}
			if tc.want != "" && o.Status != Changed {
				t.Errorf("status %s, want changed", o.Status)
			}
			again := CompareOne("o", b, true, h, true) // marked once only
			if len(again.Changed) != len(o.Changed) || (len(o.Changed) > 0 && fmt.Sprint(again.Changed[0].Fields) != fmt.Sprint(o.Changed[0].Fields)) {
				t.Errorf("a second comparison gives %+v, the first %+v", again.Changed, o.Changed)
			}
			fresh := inv(t, cm(tc.head))
			if d, _ := fresh.Digest(); d != digest {
				t.Errorf("the head digest %s before marking differs from the render's %s", digest, d)
			}
		})
	}
}
