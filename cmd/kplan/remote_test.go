package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// kplan render, diff and apply fetch http(s) resources only from the
// hosts --remote-hosts lists: without it, an overlay naming a loopback
// URL fails, saying how to allow the host, and the server sees nothing;
// with the host named, the resource renders.
func TestRemoteHostsFlag(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(configMap("fetched", "k: v")))
	}))
	defer srv.Close()
	dir := commitRepo(t, map[string]string{
		"app/kustomization.yaml":   "resources: [cm.yaml]\n",
		"app/cm.yaml":              configMap("local", "v: 1"),
		"other/kustomization.yaml": "resources: [cm.yaml]\n",
		"other/cm.yaml":            configMap("other", "v: 1"),
	}, map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\n- " + srv.URL + "/cm.yaml\n",
		"other/cm.yaml":          configMap("other", "v: 2"),
	})

	_, _, err := kplan(t, nil, "render", dir+"/app")
	if err == nil || !strings.Contains(err.Error(), "allow it with --remote-hosts 127.0.0.1") {
		t.Errorf("kplan render without --remote-hosts: %v, want a refusal naming the flag", err)
	}
	p := diffJSON(t, "-C", dir, "--base", "main~1", "--head", "main", "--remote-hosts", "example.com")
	if app := p.overlay(t, "app"); app.Status != "error" || !strings.Contains(app.Error, "host 127.0.0.1 is not among the hosts") {
		t.Errorf("kplan diff, host not listed: app %s %q, want refused", app.Status, app.Error)
	}
	if other := p.overlay(t, "other"); other.Status != "changed" {
		t.Errorf("kplan diff: other %s, want changed: the refusal fails its overlay only", other.Status)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server got %d requests from refused renders", n)
	}

	out, _, err := kplan(t, nil, "render", "--remote-hosts", "127.0.0.1", dir+"/app")
	if err != nil || !strings.Contains(out, "name: fetched") {
		t.Errorf("kplan render --remote-hosts 127.0.0.1: %v\n%s", err, out)
	}
	p = diffJSON(t, "-C", dir, "--base", "main~1", "--head", "main", "--remote-hosts", "example.com,127.0.0.1")
	if app := p.overlay(t, "app"); app.Status != "changed" || len(app.Added) != 1 || !strings.Contains(app.Added[0], "fetched") {
		t.Errorf("kplan diff with the host listed: app %s, added %q (%s), want the fetched ConfigMap added", app.Status, app.Added, app.Error)
	}
	if hits.Load() == 0 {
		t.Error("the listed host was never asked")
	}

	if _, _, err := kplan(t, nil, "render", "--remote-hosts", "http://127.0.0.1/", dir+"/app"); err == nil || !strings.Contains(err.Error(), "--remote-hosts") {
		t.Errorf("a URL for a host: %v, want a flag error", err)
	}
}
