package render

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// readTree returns the files under dir, keyed by their path below it,
// each under prefix.
func readTree(t *testing.T, dir, prefix string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[prefix+filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// kustomizeBuild runs `kustomize build --enable-helm` (and args) on
// overlay of files written to disk.
func kustomizeBuild(t *testing.T, bin string, files map[string]string, overlay string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "kustomize"), append([]string{"build", "--enable-helm", "--helm-command", filepath.Join(bin, "helm"), filepath.Join(dir, overlay)}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kustomize build %s: %v\n%s", overlay, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return string(out)
}

// A local chart (with values inline, from the chart and from an
// additional values file; through helmCharts and through
// HelmChartInflationGenerator configs) and charts from a chart repository
// on loopback
// (a pinned version and the newest) render as `kustomize build
// --enable-helm` renders them with the same helm; the repository is
// reached only through the network policy, and a host it does not allow
// is refused before any request, naming the setting.
func TestHelmChartsRenderLikeKustomize(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	var hits atomic.Int64
	repo := http.FileServer(http.Dir(filepath.Join("testdata", "helm", "chartrepo")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		repo.ServeHTTP(w, r)
	}))
	defer srv.Close()
	files := readTree(t, filepath.Join("testdata", "helm", "local"), "local/")
	files["pulled/kustomization.yaml"] = "namespace: pulled\nhelmCharts:\n" +
		"- name: greet\n  repo: " + srv.URL + "\n  version: 0.1.0\n  releaseName: pinned\n" +
		"- name: greet\n  repo: " + srv.URL + "/\n  releaseName: newest\n  valuesInline:\n    message: inline\n"
	// The same chart through HelmChartInflationGenerator configs: a file,
	// and inline.
	for name, content := range files {
		if rest, ok := strings.CutPrefix(name, "local/charts/"); ok {
			files["generator/charts/"+rest] = content
		}
	}
	files["generator/gen.yaml"] = "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata: {name: file}\nname: hello\nreleaseName: file\n"
	files["generator/kustomization.yaml"] = "generators:\n- gen.yaml\n- |\n  apiVersion: builtin\n  kind: HelmChartInflationGenerator\n  metadata: {name: inline}\n  name: hello\n  releaseName: inline\n"
	s := testkit.Snapshot(t, "test", files)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	host = host[:strings.LastIndex(host, ":")]
	render := func(t *testing.T, hosts []string) map[string]Result {
		t.Helper()
		p, err := netpolicy.New(hosts, "--remote-hosts %s")
		if err != nil {
			t.Fatal(err)
		}
		results, err := Render(context.Background(), s.FS, tree, tree.Overlays,
			Options{EnableHelm: true, HelmCommand: filepath.Join(bin, "helm"), Remote: p})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Result{}
		for _, r := range results {
			out[r.Path] = r
		}
		return out
	}

	t.Run("host not allowed", func(t *testing.T) {
		hits.Store(0)
		got := render(t, nil)
		var refused *netpolicy.RefusedError
		err := got["pulled"].Err
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "allow it with --remote-hosts ") ||
			!strings.Contains(err.Error(), "pulled/kustomization.yaml: helmCharts greet from "+srv.URL) {
			t.Errorf("pulled: err = %v, want the chart repository refused, naming the chart and --remote-hosts", err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the chart repository got %d requests", n)
		}
		if got["local"].Err != nil {
			t.Errorf("local: %v", got["local"].Err)
		}
	})
	t.Run("like kustomize", func(t *testing.T) {
		got := render(t, []string{host})
		for _, o := range []string{"local", "pulled", "generator"} {
			if got[o].Err != nil {
				t.Fatalf("%s: %v", o, got[o].Err)
			}
			want := kustomizeBuild(t, bin, files, o)
			if y := toYAML(t, got[o].Objects); y != want {
				t.Errorf("%s renders\n%s\nkustomize build --enable-helm gives\n%s", o, y, want)
			}
		}
		// What the fixtures are for, beyond equality.
		y := toYAML(t, got["local"].Objects) + toYAML(t, got["pulled"].Objects) + toYAML(t, got["generator"].Objects)
		for _, want := range []string{"replicas: 2", "greeting: from additionalValuesFiles", "namespace: demo", "name: file-hello", "name: inline-hello",
			"name: pinned-greet", `chart: 0.1.0`, "name: newest-greet", `chart: 0.2.0`, "message: inline"} {
			if !strings.Contains(y, want) {
				t.Errorf("the renders do not hold %q:\n%s", want, y)
			}
		}
	})
}

// A git remote base that inflates a chart of its own repository renders
// with helm enabled, as `kustomize build --enable-helm` renders the same
// base from disk: the base's tree is reached from the overlay however deep
// kplan's directory for helm is.
func TestHelmChartInAGitBase(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	root, work := t.TempDir(), t.TempDir()
	gittest.Git(t, root, "init", "-q", "--bare", "org/base.git")
	gittest.Git(t, work, "init", "-q", "-b", "main")
	base := readTree(t, filepath.Join("testdata", "helm", "local"), "app/")
	gittest.Write(t, work, base)
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-qm", "v1")
	gittest.Git(t, work, "tag", "v1")
	gittest.Git(t, work, "push", "-q", filepath.Join(root, "org/base.git"), "main", "v1")
	srv := githttp.Serve(t, root, "")
	s := testkit.Snapshot(t, "test", map[string]string{
		"overlay/kustomization.yaml": "namePrefix: prod-\nresources:\n- " + srv.URL + "/org/base.git//app?ref=v1\n",
	})
	p, err := netpolicy.New([]string{"127.0.0.1"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	cache := gitbase.New(t.TempDir(), p)
	t.Cleanup(func() { _ = cache.Close() })
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Render(context.Background(), s.FS, tree, []string{"overlay"},
		Options{EnableHelm: true, HelmCommand: filepath.Join(bin, "helm"), Remote: p, Git: cache})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	base["overlay/kustomization.yaml"] = "namePrefix: prod-\nresources:\n- ../app\n"
	want := kustomizeBuild(t, bin, base, "overlay")
	if got := toYAML(t, rs[0].Objects); got != want || !strings.Contains(got, "name: prod-web-hello") {
		t.Errorf("renders\n%s\nkustomize build --enable-helm of the same base on disk gives\n%s", got, want)
	}
}

// helmCharts see the cluster's Kubernetes as `kustomize build
// --enable-helm --helm-kube-version --helm-api-versions` passes it (Argo
// CD passes its cluster's): the chart requiring Kubernetes 1.25, which
// Helm's default refuses, renders for kplan's default and for a declared
// version with a custom resource; an entry's own kubeVersion wins, as
// kustomize reads the entry over the flags (HelmChartInflationGenerator
// Config, kustomize api v0.21.2).
func TestHelmChartsSeeTheClustersKubernetes(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	files := readTree(t, filepath.Join("testdata", "helm", "capabilities"), "")
	s := testkit.Snapshot(t, "test", files)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want map[string][]string // overlay → what its render holds
	}{
		{"kplan's default", Options{}, map[string][]string{"caps": {"kubeVersion: v1.37.0", "apiVersion: policy/v1\n"}, "pinned": {"kubeVersion: v1.31"}}},
		{"declared", Options{KubeVersion: "v1.28.3", APIVersions: []string{"monitoring.coreos.com/v1/ServiceMonitor"}},
			map[string][]string{"caps": {"kubeVersion: v1.28.3", "kind: ServiceMonitor", "sidecars: init-containers"}, "pinned": {"kubeVersion: v1.31", "kind: ServiceMonitor"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.EnableHelm, o.HelmCommand = true, filepath.Join(bin, "helm")
			rs, err := Render(context.Background(), s.FS, tree, []string{"caps", "pinned"}, o)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"--helm-kube-version", cmp.Or(tc.opts.KubeVersion, kubeversion.Default)}
			for _, v := range tc.opts.Kubernetes().APIVersionSet() {
				args = append(args, "--helm-api-versions", v)
			}
			for _, r := range rs {
				if r.Err != nil {
					t.Fatalf("%s: %v", r.Path, r.Err)
				}
				got, want := toYAML(t, r.Objects), kustomizeBuild(t, bin, files, r.Path, args...)
				if got != want {
					t.Errorf("%s renders\n%s\nkustomize build %s gives\n%s", r.Path, got, strings.Join(args[:2], " "), want)
				}
				for _, w := range tc.want[r.Path] {
					if !strings.Contains(got, w) {
						t.Errorf("%s does not hold %q:\n%s", r.Path, w, got)
					}
				}
			}
		})
	}
}
