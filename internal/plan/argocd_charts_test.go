package plan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/test/gittest"
)

// A history of changes to an Argo CD repository whose Applications take
// charts from a Helm repository and an OCI registry on loopback (and
// build a chart's dependencies), each planned against its parent: the
// changed-only plan is the full plan, and renders only the Applications
// whose closure the change meets: a chart version bump in the
// Application, a $ref value file, a file parameter's file, a file://
// dependency's template, a chart-relative file parameter, a parameter of
// an OCI chart, the directory of an Application that a pulled chart
// renders (app-of-apps); a README touches none.
func TestArgoCDRemoteChartsChangedOnlyEqualsFull(t *testing.T) {
	const src = "../argocd/testdata/remote"
	repo := testchart.ServeRepo(t)
	reg := testchart.ServeRegistry(t)
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0"} {
		repo.Add(t, testchart.Package(t, src+"/shop", v, v))
		repo.Add(t, testchart.Package(t, src+"/lib", v, v))
	}
	reg.Push(t, "charts", testchart.Package(t, src+"/shop", "1.0.0", "1.0.0"))
	repo.Add(t, testchart.Package(t, src+"/appchart", "1.0.0", ""))

	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src+"/repo")); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, p := range []string{"apps/shop.yaml", "apps/shop-oci.yaml", "apps/root.yaml", "charts/umbrella/Chart.yaml"} {
		gittest.Write(t, dir, map[string]string{p: strings.NewReplacer("CHARTS_URL", repo.URL, "REGISTRY_HOST", reg.Host).Replace(read(p))})
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	policy, err := netpolicy.New([]string{"127.0.0.1"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(p, old, new string) func() {
		return func() {
			if !strings.Contains(read(p), old) {
				t.Fatalf("%s holds no %q", p, old)
			}
			gittest.Write(t, dir, map[string]string{p: strings.Replace(read(p), old, new, 1)})
		}
	}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"chart version bump", edit("apps/shop.yaml", `"~1.0"`, `"~1.1"`), []string{"argocd/shop"}},
		{"$ref value file", edit("envs/prod/shop.yaml", "replicas: 4", "replicas: 5"), []string{"argocd/shop"}},
		{"file parameter's file", edit("envs/prod/config.txt", "on", "off"), []string{"argocd/shop"}},
		{"file:// dependency", edit("charts/common/templates/configmap.yaml", "\ndata:", "\n  labels: {tier: base}\ndata:"), []string{"argocd/umbrella"}},
		{"chart-relative file parameter", edit("charts/umbrella/files/motd.txt", "reviewers", "everyone"), []string{"argocd/umbrella"}},
		{"OCI chart parameter", edit("apps/shop-oci.yaml", "1.0.0-hotfix", "1.0.0-hotfix2"), []string{"argocd/shop-oci"}},
		// The pulled chart of root renders child, whose directory this is:
		// root is rendered though its closure is unchanged.
		{"directory of an Application a pulled chart renders", edit("envs/prod/plain/cm.yaml", "info", "debug"), []string{"argocd/child"}},
		{"README", func() { gittest.Write(t, dir, map[string]string{"README.md": "charts\n"}) }, nil},
	}
	for _, st := range steps {
		st.change()
		full, stats := commitAndPlan(t, dir, st.name, render.Options{Remote: policy})
		// root, whose pulled chart renders child, is always rendered.
		if want := len(full.Overlays) - len(st.want) - 1; stats.Skipped != want {
			t.Errorf("%s: %d Applications left unrendered, want %d (all but %q)", st.name, stats.Skipped, want, st.want)
		}
		if got := changedTargets(full); !slices.Equal(got, st.want) {
			t.Errorf("%s: changed %q, want %q", st.name, got, st.want)
		}
		for _, o := range full.Overlays {
			if o.BaseErr != "" || o.HeadErr != "" {
				t.Errorf("%s: %s failed: %s%s", st.name, o.Path, o.BaseErr, o.HeadErr)
			}
		}
	}

	// Without the host allowed the refusal does not depend on the
	// network: the changed-only plan of the README change renders no
	// Application (none fails for a change that does not reach it); the
	// full plan shows each refusal.
	opts := Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}}
	changed, stats, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Skipped != len(changed.Overlays) || len(changedTargets(changed)) != 0 {
		t.Errorf("no hosts allowed, README: %d of %d Applications unrendered, changed %q; want all unrendered", stats.Skipped, len(changed.Overlays), changedTargets(changed))
	}
	opts.Full = true
	full, _, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range full.Overlays {
		if o.Path == "argocd/shop" && !strings.Contains(o.HeadErr, "refused") {
			t.Errorf("no hosts allowed, --full: %s: %q, want the refusal", o.Path, o.HeadErr)
		}
	}
}
