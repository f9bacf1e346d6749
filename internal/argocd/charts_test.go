package argocd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/internal/testhelm"
)

// chartServers are a Helm repository and an OCI registry on loopback
// holding testdata/remote's charts.
type chartServers struct {
	repo *testchart.Repo
	reg  *testchart.Registry
}

func serveCharts(t *testing.T) chartServers {
	t.Helper()
	cs := chartServers{repo: testchart.ServeRepo(t), reg: testchart.ServeRegistry(t)}
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0", "2.0.0-rc.1"} {
		cs.repo.Add(t, testchart.Package(t, "testdata/remote/shop", v, v))
	}
	cs.reg.Push(t, "charts", testchart.Package(t, "testdata/remote/shop", "1.0.0", "1.0.0"))
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0"} {
		cs.repo.Add(t, testchart.Package(t, "testdata/remote/lib", v, v))
	}
	cs.repo.Add(t, testchart.Package(t, "testdata/remote/appchart", "1.0.0", ""))
	return cs
}

// repoDir is testdata/remote/repo with the servers' addresses written in.
func (cs chartServers) repoDir(t *testing.T) string {
	t.Helper()
	dir := copyDir(t, "testdata/remote/repo")
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := strings.ReplaceAll(strings.ReplaceAll(string(data), "CHARTS_URL", cs.repo.URL), "REGISTRY_HOST", cs.reg.Host)
		return os.WriteFile(p, []byte(s), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// loopbackEngine fetches from 127.0.0.1 only.
func loopbackEngine(t *testing.T, hosts ...string) *Engine {
	t.Helper()
	p, err := netpolicy.New(hosts, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Repos: NewRepos(repoURL), Revisions: []string{"main"}, Render: render.Options{Remote: p}})
}

func buildWith(t *testing.T, e *Engine, dir string) *Result {
	t.Helper()
	s, err := snapshot.FromFS(os.DirFS(dir), "test")
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// helmEnv points helm's configuration, cache and data at the test's own
// directories, so that `helm template --repo` and `helm dependency
// build` fetch anew from the loopback servers.
func helmEnv(t *testing.T) {
	t.Helper()
	home := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(home, v))
	}
}

// Charts pulled from a Helm repository (a semver range picking the
// newest 1.0.x, pre-releases left out) and from an OCI registry named
// without a scheme render as helm template of the same chart, pulled by
// helm itself, with the Application's settings: $ref value files from
// this repository (the multi-source pattern), a value file the chart
// holds, parameters, a file parameter, kubeVersion and apiVersions.
func TestRemoteChartIsHelmTemplate(t *testing.T) {
	cs := serveCharts(t)
	dir := cs.repoDir(t)
	r := buildWith(t, loopbackEngine(t, "127.0.0.1"), dir)
	// Three Applications and a dependency take charts from the
	// repository: its index is fetched once for the plan.
	if n := cs.repo.Count("/index.yaml"); n != 1 {
		t.Errorf("the index was fetched %d times, want once", n)
	}
	helm := filepath.Join(testhelm.Dir(t), "helm")
	helmEnv(t)

	shop := r.Target("argocd/shop")
	if shop == nil || shop.Err != nil {
		t.Fatalf("shop: %+v", shop)
	}
	out := run(t, dir, helm, "template", "shop", "shop", "--repo", cs.repo.URL, "--version", "~1.0", "--namespace", "shop",
		"--values", "envs/prod/shop.yaml", "--set-file", "config=envs/prod/config.txt",
		"--kube-version", "1.29.0", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--include-crds", "--skip-tests")
	sameObjects(t, "shop", shop.Objects, parseStream(t, out))
	got := objects(t, shop.Objects)
	if img := got["Deployment /shop"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]; img != "registry.example.com/shop:1.0.1" {
		t.Errorf("shop's image %v, want ~1.0's newest, 1.0.1", img)
	}
	if _, ok := got["ServiceMonitor /shop"]; !ok {
		t.Errorf("shop: no ServiceMonitor though helm.apiVersions lists it: %v", got)
	}

	oci := r.Target("argocd/shop-oci")
	if oci == nil || oci.Err != nil {
		t.Fatalf("shop-oci: %+v", oci)
	}
	out = run(t, dir, helm, onCluster("template", "storefront", "oci://"+cs.reg.Host+"/charts/shop", "--version", "1.0.0", "--plain-http", "--namespace", "storefront",
		"--values", filepath.Join(testdataAbs(t), "remote/shop/values-prod.yaml"), "--set", "image.tag=1.0.0-hotfix", "--include-crds", "--skip-tests")...)
	sameObjects(t, "shop-oci", oci.Objects, parseStream(t, out))
}

func testdataAbs(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// A chart of this repository whose charts/ lacks its dependencies
// renders as helm dependency build then helm template: file://
// dependencies from the repository (one chart twice under two aliases,
// one disabled by its condition), one from a Helm repository (a range,
// enabled by a tag) and one from an OCI registry (an alias with its own
// values); with a value file absolute from the repository's root, a
// missing one ignored (ignoreMissingValueFiles) and a file parameter
// relative to the chart.
func TestChartDependenciesBuiltAsHelmDependencyBuild(t *testing.T) {
	cs := serveCharts(t)
	dir := cs.repoDir(t)
	r := buildWith(t, loopbackEngine(t, "127.0.0.1"), dir)
	u := r.Target("argocd/umbrella")
	if u == nil || u.Err != nil {
		t.Fatalf("umbrella: %+v", u)
	}
	helm := filepath.Join(testhelm.Dir(t), "helm")
	helmEnv(t)
	oracle := copyDir(t, dir)
	run(t, oracle, helm, "dependency", "build", "charts/umbrella", "--plain-http")
	out := run(t, oracle, helm, onCluster("template", "umbrella", "charts/umbrella", "--namespace", "umbrella",
		"--values", "envs/prod/umbrella.yaml", "--set-file", "motd=charts/umbrella/files/motd.txt", "--include-crds", "--skip-tests")...)
	sameObjects(t, "umbrella", u.Objects, parseStream(t, out))
	got := objects(t, u.Objects)
	for _, k := range []string{"ConfigMap /umbrella-base", "Service /umbrella-cache", "Deployment /umbrella", "ConfigMap /umbrella-motd"} {
		if _, ok := got[k]; !ok {
			t.Errorf("umbrella renders no %s: %v", k, got)
		}
	}
	if _, ok := got["ConfigMap /umbrella-extra"]; ok {
		t.Errorf("umbrella renders the dependency its condition disables")
	}
	// The closure holds the file:// dependency's directory.
	if !u.Closure.Meets(map[string]bool{"charts/common/templates/configmap.yaml": true}) {
		t.Errorf("umbrella's closure %q lacks its file:// dependency", u.Closure.Paths)
	}
}

// A chart from a host the render network policy does not allow fails its
// Application with the refusal naming the setting that allows it; the
// other Applications render.
func TestRemoteChartFromARefusedHost(t *testing.T) {
	cs := serveCharts(t)
	dir := cs.repoDir(t)
	r := buildWith(t, loopbackEngine(t, "charts.example.com"), dir)
	for _, name := range []string{"argocd/shop", "argocd/shop-oci", "argocd/umbrella"} {
		tg := r.Target(name)
		if tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "--remote-hosts 127.0.0.1") {
			t.Errorf("%s: %+v, want the refusal naming --remote-hosts 127.0.0.1", name, tg)
		}
	}
	if n := cs.repo.Count("/index.yaml"); n != 0 {
		t.Errorf("the refused repository was asked for its index %d times", n)
	}
}

// Value files and file parameters resolve as the repo server resolves
// them: relative to a repository chart, absolute from the repository's
// root, the build variables expanded, $ref/path in a ref source of this repository,
// within a pulled chart; URLs, other repositories and paths above the
// root are not read (the repo server refuses them).
func TestHelmFilePathsResolve(t *testing.T) {
	refs := map[string]Source{"values": {RepoURL: repoURL, Ref: "values"}, "other": {RepoURL: "https://github.com/example/other", Ref: "other"}}
	for _, tc := range []struct {
		dir, p, want string
		inRepo, ok   bool
	}{
		{"charts/web", "values-prod.yaml", "charts/web/values-prod.yaml", true, true},
		{"charts/web", "/envs/prod.yaml", "envs/prod.yaml", true, true},
		{"charts/web", "../../../../etc/passwd", "", false, false},
		{"charts/web", "../shared/values.yaml", "charts/shared/values.yaml", true, true},
		{"charts/web", "/../etc/passwd", "", false, false},
		{"charts/web", "$values/../x.yaml", "", false, false},
		{"", "../x.yaml", "", false, false},
		{"charts/web", "$values/envs/prod.yaml", "envs/prod.yaml", true, true},
		{"", "$values/envs/prod.yaml", "envs/prod.yaml", true, true},
		{"", "values-prod.yaml", "values-prod.yaml", false, true},
		{"", "/ci/values.yaml", "ci/values.yaml", false, true},
		{"charts/web", "$other/envs/prod.yaml", "", false, false},
		// Not a ref source's name: an unset variable, expanded to "" as
		// Env.Envsubst does, so a path from the repository's root
		// (getResolvedValueFiles, reposerver/repository/repository.go:
		// 1476-1483 at 37ee0097cf).
		{"charts/web", "$nowhere/envs/prod.yaml", "envs/prod.yaml", true, true},
		{"charts/web", "https://example.com/values.yaml", "", false, false},
		{"charts/web", "values-$ARGOCD_APP_NAME.yaml", "charts/web/values-web.yaml", true, true},
		{"charts/web", "/envs/${ARGOCD_APP_NAME}/values.yaml", "envs/web/values.yaml", true, true},
	} {
		got, inRepo, ok := resolve(tc.dir, tc.p, refs, NewRepos(repoURL), map[string]string{"ARGOCD_APP_NAME": "web"})
		if got != tc.want || inRepo != tc.inRepo || ok != tc.ok {
			t.Errorf("resolve(%q, %q) = %q, %v, %v; want %q, %v, %v", tc.dir, tc.p, got, inRepo, ok, tc.want, tc.inRepo, tc.ok)
		}
	}
}

// Parameter values reach --set as the repo server writes them: commas
// escaped (a value, not a list), unless the value is a {list}.
func TestParameterCommasEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"a,b":   `a\,b`,
		`a\,b`:  `a\,b`,
		"{a,b}": "{a,b}",
		"plain": "plain",
		",lead": `\,lead`,
		"x,,y":  `x\,\,y`,
		"{a,b":  `{a\,b`,
		"":      "",
	} {
		if got := escapeSet(in); got != want {
			t.Errorf("escapeSet(%q) = %q, want %q", in, got, want)
		}
	}
}

// A pulled chart published without the dependencies it lists is built
// as the repo server builds it in its pulled copy (helm dependency
// build): one from a Helm repository, one file:// within the chart.
func TestPulledChartDependenciesBuilt(t *testing.T) {
	cs := serveCharts(t)
	chartDir := copyDir(t, "testdata/remote/bundle")
	chartYAML := filepath.Join(chartDir, "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chartYAML, []byte(strings.ReplaceAll(string(data), "CHARTS_URL", cs.repo.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cs.repo.Add(t, testchart.Package(t, chartDir, "1.0.0", ""))
	dir := t.TempDir()
	app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: bundle}\nspec:\n  source: {repoURL: '" + cs.repo.URL + "', chart: bundle, targetRevision: 1.0.0}\n  destination: {namespace: bundle}\n"
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	r := buildWith(t, loopbackEngine(t, "127.0.0.1"), dir)
	tg := r.Target("argocd/bundle")
	if tg == nil || tg.Err != nil {
		t.Fatalf("bundle: %+v", tg)
	}
	helm := filepath.Join(testhelm.Dir(t), "helm")
	helmEnv(t)
	pulled := t.TempDir()
	run(t, pulled, helm, "pull", "bundle", "--repo", cs.repo.URL, "--version", "1.0.0", "--untar", "--untardir", ".")
	run(t, pulled, helm, "dependency", "build", "bundle")
	out := run(t, pulled, helm, onCluster("template", "bundle", "bundle", "--namespace", "bundle", "--include-crds", "--skip-tests")...)
	sameObjects(t, "bundle", tg.Objects, parseStream(t, out))
	got := objects(t, tg.Objects)
	for _, k := range []string{"Service /bundle-cache", "ServiceAccount /bundle-extras"} {
		if _, ok := got[k]; !ok {
			t.Errorf("bundle renders no %s: %v", k, got)
		}
	}
}
