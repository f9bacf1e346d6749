package forge_test

import (
	"net/http"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
)

// fake is a forge whose credential is its secret, named by header.
type fake struct{ name, header string }

func (f fake) Delivery(h http.Header) (forge.Delivery, error) {
	return forge.Delivery{Forge: f.name, Event: h.Get(f.header), Credential: h.Get("X-Credential")}, nil
}
func (f fake) Verify(d forge.Delivery, _ func(func([]byte)), secret []byte) bool {
	return d.Credential == string(secret)
}
func (f fake) Decode(d forge.Delivery, _ string, _ []byte) (forge.Event, error) {
	return forge.Event{Kind: forge.Push, Repo: f.name}, nil
}
func (f fake) ForwardHeader(c string) bool { return c == f.header }

// One endpoint, two forges: each delivery goes to the forge whose
// header it carries and is verified with that forge's secret only.
func TestRoutesVerifyEachForgeWithItsOwnSecret(t *testing.T) {
	rs := forge.Routes{
		{Forge: "github", Header: "X-A-Event", Receiver: fake{"github", "X-A-Event"}},
		{Forge: "gitlab", Header: "X-B-Event", Receiver: fake{"gitlab", "X-B-Event"}, Secret: []byte("b-secret")},
	}
	for _, tc := range []struct {
		header, credential, forge string
		ok                        bool
	}{
		{"X-A-Event", "a-secret", "github", true},
		{"X-A-Event", "b-secret", "github", false},
		{"X-B-Event", "b-secret", "gitlab", true},
		{"X-B-Event", "a-secret", "gitlab", false},
		{"X-None", "a-secret", "github", true}, // the first route's, which refuses what it must
	} {
		h := http.Header{}
		h.Set(tc.header, "push")
		h.Set("X-Credential", tc.credential)
		d, err := rs.Delivery(h)
		if err != nil || d.Forge != tc.forge {
			t.Fatalf("%s: %+v, %v", tc.header, d, err)
		}
		if got := rs.Verify(d, func(func([]byte)) {}, []byte("a-secret")); got != tc.ok {
			t.Errorf("%s with %s: verified %v, want %v", tc.header, tc.credential, got, tc.ok)
		}
		if ev, err := rs.Decode(d, "", nil); err != nil || ev.Repo != tc.forge {
			t.Errorf("%s: decoded by %q, %v", tc.header, ev.Repo, err)
		}
	}
	if _, err := rs.Decode(forge.Delivery{Forge: "gitea"}, "", nil); err == nil {
		t.Error("a delivery of no route was decoded")
	}
	if !rs.ForwardHeader("X-B-Event") || rs.ForwardHeader("Cookie") {
		t.Error("ForwardHeader")
	}
}
