package plan

import (
	"context"
	"testing"

	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// TestGitBaseChangedOnly: an overlay on a git base (tag or branch) that
// the change does not reach is skipped without a fetch — both sides would
// read the same commit — and one whose ref changes is rendered and shows
// the base's change, as the full plan does.
func TestGitBaseChangedOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	up := gittest.NewUpstream(t, root, "org/base.git")
	for _, v := range []string{"one", "two"} {
		up.Release(map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": cm("app", "version: "+v)}, "v-"+v)
	}
	srv := githttp.Serve(t, root, "")
	base := srv.URL + "/org/base.git//app?ref="

	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"tag/kustomization.yaml":    "resources:\n- " + base + "v-one\n",
		"branch/kustomization.yaml": "namePrefix: b-\nresources:\n- " + base + "main\n",
		"plain/kustomization.yaml":  "resources: [x.yaml]\n",
		"plain/x.yaml":              cm("x", "k: v"),
	})
	first := commit(t, dir, "base")
	write(t, dir, map[string]string{"plain/x.yaml": cm("x", "k: w")})
	second := commit(t, dir, "plain only")
	write(t, dir, map[string]string{"tag/kustomization.yaml": "resources:\n- " + base + "v-two\n"})
	third := commit(t, dir, "bump the tag")

	policy, err := netpolicy.New([]string{"127.0.0.1"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	cache := gitbase.New(t.TempDir(), policy)
	t.Cleanup(func() { _ = cache.Close() })
	ropts := render.Options{Remote: policy, Git: cache}

	before := srv.Fetches.Load()
	_, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: first, Head: second, Resolver: notFound{}, Render: ropts})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 2 || st.Rendered != 2 || srv.Fetches.Load() != before {
		t.Errorf("plain change: %d skipped (want the two git-base overlays), %d builds (want plain's 2), %d fetches (want none)",
			st.Skipped, st.Rendered, srv.Fetches.Load()-before)
	}

	full, changed, _ := plansWith(t, dir, second, third, ropts)
	for _, p := range []*inventorydiff.Plan{full, changed} {
		for _, o := range p.Overlays {
			if o.Path == "tag" && (o.Status != inventorydiff.Changed || len(o.Changed) != 1) {
				t.Errorf("tag bumped: %s, changed %v (%s / %s); want the ConfigMap changed", o.Status, o.Changed, o.BaseErr, o.HeadErr)
			}
		}
	}
}
