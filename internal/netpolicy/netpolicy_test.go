package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestAllowed(t *testing.T) {
	p, err := New([]string{"Charts.Example.com", "*.cdn.example.org", "10.0.0.5", "[fd00::1]", "localhost."}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	star, err := New([]string{"*"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p         *Policy
		host      string
		ok, exact bool
	}{
		{p, "charts.example.com", true, true},
		{p, "CHARTS.example.com.", true, true},
		{p, "other.example.com", false, false},
		{p, "a.cdn.example.org", true, false},
		{p, "a.b.cdn.example.org", true, false},
		{p, "cdn.example.org", false, false},
		{p, "evilcdn.example.org", false, false},
		{p, "10.0.0.5", true, true},
		{p, "::ffff:10.0.0.5", true, true},
		{p, "fd00::1", true, true},
		{p, "[fd00::1]", true, true},
		{p, "localhost", true, true},
		{p, "169.254.169.254", false, false},
		{star, "anything.example", true, false},
		{star, "169.254.169.254", true, false}, // by name; the address is refused at connect
		{star, "metadata.google.internal", false, false},
		{star, "Metadata.Google.Internal.", false, false},
		{nil, "example.com", false, false},
		{&Policy{}, "example.com", false, false},
	} {
		ok, exact := tc.p.Allowed(tc.host)
		if ok != tc.ok || exact != tc.exact {
			t.Errorf("Allowed(%q) = %v, %v; want %v, %v", tc.host, ok, exact, tc.ok, tc.exact)
		}
	}
}

func TestNewRefusesMalformedHosts(t *testing.T) {
	for _, h := range []string{"http://example.com", "example.com:443", "example.com/path", "user@example.com", "*.", "a b"} {
		if _, err := New([]string{h}, ""); err == nil {
			t.Errorf("New(%q): no error", h)
		}
	}
	for _, h := range []string{"example.com", "*.example.com", "*", "127.0.0.1", "::1", "[::1]", " spaced.example "} {
		if _, err := New([]string{h}, ""); err != nil {
			t.Errorf("New(%q): %v", h, err)
		}
	}
}

// counted is a loopback HTTP server that counts the requests it gets.
type counted struct {
	*httptest.Server
	n atomic.Int64
}

func serve(t *testing.T, h http.HandlerFunc) *counted {
	t.Helper()
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counted) port() string {
	_, port, _ := net.SplitHostPort(c.Listener.Addr().String())
	return port
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("kind: ConfigMap\n")) }
	target := serve(t, ok)
	redirect := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+target.port()+"/cm.yaml", http.StatusFound)
	})
	missing := serve(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	big := serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 4096))) })

	for _, tc := range []struct {
		name     string
		hosts    []string
		url      string
		max      int64
		want     string // body, or a part of the error
		refused  bool
		requests *counted // must see no request when refused
	}{
		{name: "no hosts", url: target.URL, want: "renders fetch from no host unless hosts are listed", refused: true, requests: target},
		{name: "host not listed", hosts: []string{"example.com"}, url: target.URL, want: "host 127.0.0.1 is not among the hosts", refused: true, requests: target},
		{name: "loopback by wildcard is refused at connect", hosts: []string{"*"}, url: target.URL, want: "resolves to 127.0.0.1", refused: true, requests: target},
		{name: "a name resolving to loopback is refused at connect", hosts: []string{"*"}, url: "http://localhost:" + target.port() + "/", want: "localhost resolves to", refused: true, requests: target},
		{name: "metadata name", hosts: []string{"*"}, url: "http://metadata.google.internal/computeMetadata/v1/", want: "not among the hosts", refused: true},
		{name: "metadata address", hosts: []string{"*"}, url: "http://169.254.169.254/latest/meta-data/", want: "resolves to 169.254.169.254", refused: true},
		{name: "metadata v6 address", hosts: []string{"*"}, url: "http://[fd00:ec2::254]/latest/meta-data/", want: "resolves to fd00:ec2::254", refused: true},
		{name: "named exactly", hosts: []string{"127.0.0.1"}, url: target.URL + "/cm.yaml", want: "kind: ConfigMap\n"},
		{name: "named exactly by name", hosts: []string{"localhost"}, url: "http://localhost:" + target.port() + "/cm.yaml", want: "kind: ConfigMap\n"},
		{name: "redirect to a host not listed", hosts: []string{"127.0.0.1"}, url: redirect.URL, want: "host localhost is not among the hosts", refused: true, requests: target},
		{name: "redirect to loopback by wildcard", hosts: []string{"127.0.0.1", "*"}, url: redirect.URL, want: "localhost resolves to", refused: true, requests: target},
		{name: "redirect named exactly", hosts: []string{"127.0.0.1", "localhost"}, url: redirect.URL, want: "kind: ConfigMap\n"},
		{name: "not found is an error, no fallback", hosts: []string{"127.0.0.1"}, url: missing.URL + "/org/repo.git", want: "404 Not Found"},
		{name: "too large", hosts: []string{"127.0.0.1"}, url: big.URL, max: 100, want: "over the 100 bytes"},
		{name: "not http", hosts: []string{"*"}, url: "file:///etc/passwd", want: `scheme "file" is not http(s)`, refused: true},
		{name: "password not printed", hosts: []string{"example.com"}, url: "http://user:hunter2@127.0.0.1:" + target.port() + "/", want: "not among", refused: true, requests: target},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.hosts, "--remote-hosts %s")
			if err != nil {
				t.Fatal(err)
			}
			var before int64
			if tc.requests != nil {
				before = tc.requests.n.Load()
			}
			data, err := p.Fetch(ctx, tc.url, tc.max)
			if tc.requests != nil && tc.requests.n.Load() != before {
				t.Errorf("the refused server got %d requests", tc.requests.n.Load()-before)
			}
			if err == nil {
				if string(data) != tc.want {
					t.Fatalf("got %q, want %q", data, tc.want)
				}
				return
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error prints the password: %v", err)
			}
			var refused *RefusedError
			if got := errors.As(err, &refused); got != tc.refused {
				t.Fatalf("refused = %v, want %v (%v)", got, tc.refused, err)
			}
			if tc.refused && !strings.Contains(err.Error(), "allow it with --remote-hosts ") {
				t.Errorf("error %q does not say how to allow the host", err)
			}
		})
	}
}

// A client of its own over Transport (go-containerregistry's) holds to
// the policy: a listed host is reached, a redirect to a host the policy
// does not list is refused before anything is sent to it, and a nil
// policy reaches nothing.
func TestTransportHoldsEveryRequest(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	redirect := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/x"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, redirect, http.StatusFound)
		}
	}))
	defer srv.Close()
	p, err := New([]string{"127.0.0.1"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: p.Transport()}
	resp, err := c.Get(srv.URL + "/here")
	if err != nil {
		t.Fatalf("a listed host: %v", err)
	}
	resp.Body.Close()
	var refused *RefusedError
	if _, err := c.Get(srv.URL + "/away"); !errors.As(err, &refused) || refused.Host != "localhost" {
		t.Errorf("a redirect to a host not listed: %v, want a refusal naming it", err)
	}
	if _, err := (&http.Client{Transport: (*Policy)(nil).Transport()}).Get(srv.URL + "/here"); !errors.As(err, &refused) {
		t.Errorf("a nil policy: %v, want a refusal", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the host not listed got %d requests", n)
	}
}
