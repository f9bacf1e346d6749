package deploy

import (
	"testing"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// Every inventory kind kplan recognises (kinv.Backends) can be applied
// through, and nothing else: a row added there without a row here (or
// the reverse) fails here, not at a user's first apply.
func TestEveryBackendHasAClient(t *testing.T) {
	rows := backends()
	for _, b := range kinv.Backends() {
		r, ok := rows[b.Kind]
		if !ok || r.clients == nil {
			t.Errorf("inventory backend %s has no client factory", b.Kind)
		}
		if (r.crd == nil) != (r.crdName == "") {
			t.Errorf("inventory backend %s: a CRD needs its name", b.Kind)
		}
		delete(rows, b.Kind)
	}
	for k := range rows {
		t.Errorf("client factory for %s, which is no inventory backend", k)
	}
}
