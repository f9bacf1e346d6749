package render

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// Every way a kustomization names a URL is fetched through the render's
// policy, never by kustomize: a listed host is served, anything else
// fails only its overlay, naming the setting that allows it, with no
// request made; a git base is never cloned.
func TestRemoteResourcesGoThroughThePolicy(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/cm.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\ndata:\n  a: b\n"))
		case "/patch.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\ndata:\n  patched: \"yes\"\n"))
		case "/app.properties":
			_, _ = w.Write([]byte("k=v\n"))
		case "/transformer.yaml":
			_, _ = w.Write([]byte("apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: t\npath: " + "http://" + r.Host + "/patch.yaml\ntarget:\n  kind: ConfigMap\n  name: local\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	u := srv.URL
	s := testkit.Snapshot(t, "test", map[string]string{
		"fetch/kustomization.yaml": "resources:\n- local.yaml\n- " + u + "/cm.yaml\npatches:\n- path: " + u + "/patch.yaml\n" +
			"configMapGenerator:\n- name: gen\n  files:\n  - " + u + "/app.properties\n  - renamed=" + u + "/app.properties\n",
		"fetch/local.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
		"plugin/kustomization.yaml":     "resources: [local.yaml]\ntransformers:\n- " + u + "/transformer.yaml\n",
		"plugin/local.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
		"missing/kustomization.yaml":    "resources:\n- " + u + "/org/missing.yaml\n",
		"gitbase/kustomization.yaml":    "resources:\n- github.com/example/repo//base?ref=v1\n",
		"component/kustomization.yaml":  "components:\n- " + u + "/org/repo//c?ref=v1\n",
		"metadata/kustomization.yaml":   "resources:\n- http://169.254.169.254/latest/meta-data/iam\n",
		"gitrefbase/kustomization.yaml": "resources:\n- " + u + "/org/repo/base?ref=v1\n",
		"gitdirbase/kustomization.yaml": "resources:\n- " + u + "/org/repo//base\n",
	})
	host := strings.TrimPrefix(u, "http://")
	host = host[:strings.LastIndex(host, ":")]
	render := func(t *testing.T, hosts []string) map[string]Result {
		t.Helper()
		p, err := netpolicy.New(hosts, "--remote-hosts %s")
		if err != nil {
			t.Fatal(err)
		}
		tree, err := Discover(s.FS, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		results, err := Render(context.Background(), s.FS, tree, tree.Overlays, Options{Remote: p})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Result{}
		for _, r := range results {
			out[r.Path] = r
		}
		return out
	}

	t.Run("nothing listed", func(t *testing.T) {
		hits.Store(0)
		got := render(t, nil)
		for _, o := range []string{"fetch", "plugin", "missing", "metadata"} {
			var refused *netpolicy.RefusedError
			if !errors.As(got[o].Err, &refused) {
				t.Errorf("%s: err = %v, want a refusal", o, got[o].Err)
				continue
			}
			if !strings.Contains(got[o].Err.Error(), "allow it with --remote-hosts ") {
				t.Errorf("%s: %v does not say how to allow it", o, got[o].Err)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the server got %d requests", n)
		}
	})
	t.Run("listed exactly", func(t *testing.T) {
		hits.Store(0)
		got := render(t, []string{host})
		if err := got["fetch"].Err; err != nil {
			t.Fatal(err)
		}
		y := toYAML(t, got["fetch"].Objects)
		for _, want := range []string{"name: fetched", `patched: "yes"`, "app.properties: |\n    k=v", "renamed: |\n    k=v"} {
			if !strings.Contains(y, want) {
				t.Errorf("fetch does not hold %q:\n%s", want, y)
			}
		}
		if err := got["plugin"].Err; err != nil {
			t.Fatal(err)
		}
		if y := toYAML(t, got["plugin"].Objects); !strings.Contains(y, `patched: "yes"`) {
			t.Errorf("the fetched transformer's fetched patch was not applied:\n%s", y)
		}
		// A URL that does not answer 200 is an error, not a git clone.
		if err := got["missing"].Err; err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("missing: err = %v, want the 404", err)
		}
		// The metadata address is not listed.
		var refused *netpolicy.RefusedError
		if !errors.As(got["metadata"].Err, &refused) {
			t.Errorf("metadata: err = %v, want a refusal", got["metadata"].Err)
		}
	})
	t.Run("wildcard does not reach loopback", func(t *testing.T) {
		hits.Store(0)
		got := render(t, []string{"*"})
		for _, o := range []string{"fetch", "metadata"} {
			if err := got[o].Err; err == nil || !strings.Contains(err.Error(), "only a host named exactly may reach") {
				t.Errorf("%s: err = %v, want the address refused", o, err)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the server got %d requests", n)
		}
	})
	t.Run("git bases are never cloned", func(t *testing.T) {
		hits.Store(0)
		got := render(t, []string{host})
		for _, o := range []string{"gitbase", "component", "gitrefbase", "gitdirbase"} {
			var remote *RemoteError
			if !errors.As(got[o].Err, &remote) {
				t.Errorf("%s: err = %v, want a RemoteError", o, got[o].Err)
			}
		}
		for _, o := range []string{"gitrefbase", "gitdirbase"} {
			// The server's address may hold "404" (port 40481): look at
			// the rest.
			if strings.Contains(strings.ReplaceAll(got[o].Err.Error(), u, "URL"), "404") {
				t.Errorf("%s: fetched: %v", o, got[o].Err)
			}
		}
	})
}
