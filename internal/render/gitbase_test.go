package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// TestGitBasesRender: resources and components naming a git repository
// on a loopback server render from the tree at their ref, with the
// repository's own relative bases and the overlay's transformers; a host
// the policy does not list fails only its overlay, naming the setting,
// without a request to it.
func TestGitBasesRender(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	gittest.NewUpstream(t, root, "org/base.git").Release(map[string]string{
		"common/kustomization.yaml": "resources: [sa.yaml]\n",
		"common/sa.yaml":            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: app\n",
		"app/kustomization.yaml":    "resources: [cm.yaml, ../common]\n",
		"app/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  version: one\n",
		"label/kustomization.yaml":  "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nlabels:\n- pairs:\n    from: component\n",
	}, "v1")
	srv := githttp.Serve(t, root, "")

	s := testkit.Snapshot(t, "test", map[string]string{
		"overlay/kustomization.yaml": "namePrefix: prod-\nresources:\n- " + srv.URL + "/org/base.git//app?ref=v1\ncomponents:\n- " + srv.URL + "/org/base.git//label?ref=v1\n",
		"other/kustomization.yaml":   "resources: [cm.yaml]\n",
		"other/cm.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
	})
	render := func(t *testing.T, hosts ...string) map[string]Result {
		t.Helper()
		p, err := netpolicy.New(hosts, "--remote-hosts %s")
		if err != nil {
			t.Fatal(err)
		}
		cache := gitbase.New(t.TempDir(), p)
		t.Cleanup(func() { _ = cache.Close() })
		tree, err := Discover(s.FS, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := Render(context.Background(), s.FS, tree, tree.Overlays, Options{Remote: p, Git: cache})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Result{}
		for _, r := range rs {
			out[r.Path] = r
		}
		return out
	}

	t.Run("allowed", func(t *testing.T) {
		got := render(t, "127.0.0.1")
		r := got["overlay"]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		out, err := YAML(r.Objects)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"name: prod-app\n", "version: one", "kind: ServiceAccount", "from: component"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("render lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("host not listed", func(t *testing.T) {
		before := srv.Fetches.Load()
		got := render(t, "example.com")
		err := got["overlay"].Err
		if err == nil || !strings.Contains(err.Error(), "allow it with --remote-hosts 127.0.0.1") {
			t.Errorf("err = %v, want a refusal naming --remote-hosts 127.0.0.1", err)
		}
		if got["other"].Err != nil {
			t.Errorf("other overlay: %v", got["other"].Err)
		}
		if n := srv.Fetches.Load() - before; n != 0 {
			t.Errorf("%d fetches reached the server", n)
		}
	})
}

// TestFetchedTreeFileTooLarge: a file of a fetched tree over the
// snapshot's size limit is refused before it is read (a sparse file
// here, so that the test reads nothing either).
func TestFetchedTreeFileTooLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big.yaml"), filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(snapshot.MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fs := treeFS{filesys.MakeFsOnDisk()}
	var tl *snapshot.TooLargeError
	if _, err := fs.ReadFile(big); !errors.As(err, &tl) || tl.Size != snapshot.MaxFileSize+1 {
		t.Errorf("big: err = %v, want a TooLargeError", err)
	}
	if data, err := fs.ReadFile(small); err != nil || string(data) != "a: b\n" {
		t.Errorf("small: %q, %v", data, err)
	}
}
