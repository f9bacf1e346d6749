package argocd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testhelm"
)

const repoURL = "https://github.com/example/deploy"

func testEngine() *Engine {
	return New(Options{Repos: NewRepos(repoURL), Revisions: []string{"main"}})
}

func buildRepo(t *testing.T, dir string) *Result {
	t.Helper()
	s, err := snapshot.FromFS(os.DirFS(dir), "test")
	if err != nil {
		t.Fatal(err)
	}
	r, err := testEngine().Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// objects keys each object by kind namespace/name, as plain data.
func objects(t *testing.T, objs []*yaml.RNode) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		s, err := o.String()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := sigsyaml.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = m
	}
	return out
}

func parseStream(t *testing.T, data []byte) []*yaml.RNode {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(nodes, func(n *yaml.RNode) bool { return len(n.YNode().Content) == 0 })
}

func sameObjects(t *testing.T, what string, got, want []*yaml.RNode) {
	t.Helper()
	g, w := objects(t, got), objects(t, want)
	if len(w) == 0 {
		t.Fatalf("%s: the oracle rendered nothing", what)
	}
	for k, wo := range w {
		if !reflect.DeepEqual(g[k], wo) {
			gs, _ := sigsyaml.Marshal(g[k])
			ws, _ := sigsyaml.Marshal(wo)
			t.Errorf("%s: %s:\nkplan:\n%s\noracle:\n%s", what, k, gs, ws)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: kplan renders %s, which the oracle does not", what, k)
		}
	}
}

// onCluster are helm template's args for a chart templated for a cluster
// nothing declares: kplan's default Kubernetes and the API versions it
// serves, as the Argo CD engine passes them.
func onCluster(args ...string) []string {
	args = append(args, "--kube-version", kubeversion.Default)
	for _, v := range kubeversion.Defaults().APIVersionSet() {
		args = append(args, "--api-versions", v)
	}
	return args
}

func run(t *testing.T, dir, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// The kustomize Application's render is kustomize build after the
// kustomize edit commands Argo CD's repo server runs for its settings
// (and the patch it appends), on a copy of the repository.
func TestKustomizeSourceIsKustomizeEditThenBuild(t *testing.T) {
	r := buildRepo(t, "testdata/repo")
	tg := r.Target("argocd/guestbook")
	if tg == nil || tg.Err != nil {
		t.Fatalf("guestbook: %+v", tg)
	}
	kz := filepath.Join(testhelm.Dir(t), "kustomize")
	dir := filepath.Join(copyDir(t, "testdata/repo"), "guestbook/base")
	for _, args := range [][]string{
		{"edit", "set", "nameprefix", "--", "prod-"},
		{"edit", "set", "namesuffix", "--", "-v1"},
		{"edit", "set", "image", "registry.example.com/guestbook:2.0", "redis=registry.example.com/redis:7.2"},
		{"edit", "add", "label", "team:shop"},
		{"edit", "add", "annotation", "--force", "owner:shop-team"},
		{"edit", "set", "namespace", "--", "shop"},
		{"edit", "set", "replicas", "guestbook-ui=3"},
		{"edit", "add", "patch", "--kind", "Deployment", "--name", "guestbook-ui", "--patch", "- op: add\n  path: /spec/template/spec/priorityClassName\n  value: high"},
		{"edit", "add", "component", "../components/debug"},
	} {
		run(t, dir, kz, args...)
	}
	want := parseStream(t, run(t, dir, kz, "build", "."))
	sameObjects(t, "guestbook", tg.Objects, want)
	if len(want) != 3 {
		t.Errorf("the oracle rendered %d objects, want the Deployment, Service and the component's ConfigMap", len(want))
	}
}

// The Helm Application's render is helm template with its release
// name, destination namespace, value files (one through a $ref source),
// values and parameters.
func TestHelmSourceIsHelmTemplate(t *testing.T) {
	r := buildRepo(t, "testdata/repo")
	tg := r.Target("argocd/web")
	if tg == nil || tg.Err != nil {
		t.Fatalf("web: %+v", tg)
	}
	repo := copyDir(t, "testdata/repo")
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte("replicas: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, repo, filepath.Join(testhelm.Dir(t), "helm"), onCluster("template", "storefront", "charts/web", "--namespace", "web",
		"--values", "charts/web/values-prod.yaml", "--values", "envs/prod.yaml", "--values", vals,
		"--set", "image.tag=1.25", "--set-string", "port=8080", "--include-crds", "--skip-tests")...)
	// Helm's hooks are hooks to Argo CD too, run at their sync phase and
	// never planned as objects (TestConformanceHooks): the oracle's
	// objects without them, each said in a note.
	var want []*yaml.RNode
	hooks := 0
	for _, o := range parseStream(t, out) {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
			hooks++
			continue
		}
		want = append(want, o)
	}
	sameObjects(t, "web", tg.Objects, want)
	if n := len(slices.DeleteFunc(slices.Clone(tg.Notes), func(n string) bool { return !strings.Contains(n, "helm.sh/hook") })); hooks == 0 || n != hooks {
		t.Errorf("helm template printed %d hooks, the notes say %d: %q", hooks, n, tg.Notes)
	}
	if tg.Namespace != "web" {
		t.Errorf("destination namespace %q, want web", tg.Namespace)
	}
}

// A directory source reads its manifests below it (recurse), Lists
// expanded, without the excluded files; jsonnet is listed as not
// rendered; a hook with generateName is a note.
func TestDirectorySource(t *testing.T) {
	r := buildRepo(t, "testdata/repo")
	tg := r.Target("argocd/plain")
	if tg == nil || tg.Err != nil {
		t.Fatalf("plain: %+v", tg)
	}
	var got []string
	for k := range objects(t, tg.Objects) {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"ConfigMap /plain", "Secret vault/creds", "ServiceAccount /runner"}
	if !slices.Equal(got, want) {
		t.Errorf("objects %q, want %q", got, want)
	}
	if len(tg.NotRendered) != 1 || !strings.Contains(tg.NotRendered[0], "plain/sub/gen.jsonnet is jsonnet") {
		t.Errorf("not rendered %q, want the jsonnet file", tg.NotRendered)
	}
	// A hook Argo CD creates under a generated name at each sync is
	// said, not planned (nor a failure: Argo CD syncs it).
	if len(tg.Notes) != 1 || !strings.Contains(tg.Notes[0], "Job migrate-* is not planned as an object: a PreSync hook") {
		t.Errorf("notes %q, want the generateName hook", tg.Notes)
	}
}

// What kplan does not render is said, with the reason: plugins,
// Applications of another repository or revision, an ApplicationSet
// whose clusters generator has no clusters declared.
func TestNotRenderedAndSkippedSayWhy(t *testing.T) {
	r := buildRepo(t, "testdata/repo")
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name())
	}
	if want := []string{"argocd/guestbook", "argocd/plain", "argocd/plugin", "argocd/web"}; !slices.Equal(names, want) {
		t.Errorf("targets %q, want %q", names, want)
	}
	if p := r.Target("argocd/plugin"); p == nil || len(p.Objects) != 0 || len(p.NotRendered) != 1 || !strings.Contains(p.NotRendered[0], "plugin") {
		t.Errorf("plugin: %+v", p)
	}
	skipped := map[string]string{}
	for _, s := range r.Skipped {
		skipped[s.ID] = s.Reason
	}
	for id, why := range map[string]string{
		"argocd/elsewhere": "no source is this repository",
		"argocd/pinned":    "tracks another revision (targetRevision v1.0.0)",
		"argocd/clusters":  "declare them in .kplan.yaml argocdClusters",
	} {
		if !strings.Contains(skipped[id], why) {
			t.Errorf("skipped %s: %q, want %q", id, skipped[id], why)
		}
	}
}

// Targets are named after their destination cluster when the
// Applications sync to more than one.
func TestTargetsNamedByClusterWhenSeveral(t *testing.T) {
	app := func(name, cluster string) string {
		return fmt.Sprintf("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: %s}\nspec:\n  source: {repoURL: %s, path: plain}\n  destination: {name: %s, namespace: x}\n", name, repoURL, cluster)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(app("a", "prod")+"---\n"+app("a", "staging")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := buildRepo(t, dir)
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name())
	}
	if want := []string{"prod: argocd/a", "staging: argocd/a"}; !slices.Equal(names, want) {
		t.Errorf("targets %q, want %q", names, want)
	}
}

// Applications a chart renders (app-of-apps) are targets too, each
// rendered from its own source; changed-only renders the root (it may
// output Applications) and the child whose files changed, and plans
// what the full render plans.
func TestAppOfApps(t *testing.T) {
	r := buildRepo(t, "testdata/appofapps")
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name())
		if tg.Err != nil {
			t.Errorf("%s: %v", tg.Name(), tg.Err)
		}
	}
	if want := []string{"argocd/api", "argocd/root", "argocd/web"}; !slices.Equal(names, want) {
		t.Fatalf("targets %q, want %q", names, want)
	}
	if web := r.Target("argocd/web"); web.Parent == nil || web.Parent.ID() != "argocd/root" || web.Namespace != "web" || len(web.Objects) != 1 || web.Objects[0].GetName() != "web" {
		t.Errorf("web: %+v", web)
	}
	if root := r.Target("argocd/root"); len(root.Objects) != 2 {
		t.Errorf("root renders %d objects, want its 2 Applications", len(root.Objects))
	}

	head := copyDir(t, "testdata/appofapps")
	if err := os.WriteFile(filepath.Join(head, "web/cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: \"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bs, err := snapshot.FromFS(os.DirFS("testdata/appofapps"), "base")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := snapshot.FromFS(os.DirFS(head), "head")
	if err != nil {
		t.Fatal(err)
	}
	changed := snapshot.Changed(bs.Index, hs.Index)
	got, err := testEngine().Plan(context.Background(), bs, hs, changed)
	if err != nil {
		t.Fatal(err)
	}
	full, err := testEngine().Plan(context.Background(), bs, hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rendered []string
	for i := range got {
		for _, ft := range full[i].Targets {
			gt := got[i].Target(ft.Name())
			if gt == nil {
				t.Fatalf("side %d: changed-only plans no %s", i, ft.Name())
			}
			if gt.Deferred {
				continue
			}
			if i == 1 {
				rendered = append(rendered, gt.Name())
			}
			sameObjects(t, ft.Name(), gt.Objects, ft.Objects)
		}
	}
	if want := []string{"argocd/root", "argocd/web"}; !slices.Equal(rendered, want) {
		t.Errorf("changed-only rendered %q, want %q", rendered, want)
	}
}

// An ApplicationSet's list and git directory generators make
// Applications, with the default {{param}} syntax and Go templates:
// each is a target rendered from its source; a directory excluded is
// not one.
func TestApplicationSetGenerators(t *testing.T) {
	r := buildRepo(t, "testdata/appsets")
	got := map[string]string{}
	for _, tg := range r.Targets {
		if tg.Err != nil {
			t.Errorf("%s: %v", tg.Name(), tg.Err)
			continue
		}
		var objs []string
		for _, o := range tg.Objects {
			objs = append(objs, o.GetName())
		}
		got[tg.Name()] = tg.Namespace + " " + strings.Join(objs, ",")
	}
	want := map[string]string{
		"argocd/api":         "api api",
		"argocd/web":         "web web",
		"argocd/web-prod":    "web-prod PROD-web",
		"argocd/web-staging": "web-staging STAGING-web",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets %q, want %q (skipped %+v)", got, want, r.Skipped)
	}
}

// Argo CD mode is detected from an ApplicationSet alone, as from an
// Application: its Applications' sources are this repository.
func TestFoundByApplicationSet(t *testing.T) {
	s, err := snapshot.FromFS(os.DirFS("testdata/appsets"), "test")
	if err != nil {
		t.Fatal(err)
	}
	found, err := testEngine().Found(context.Background(), s, []string{"sets/dirs.yaml"})
	if err != nil || !found {
		t.Errorf("found %v, %v; want the ApplicationSet's Applications", found, err)
	}
	other := New(Options{Repos: NewRepos("https://github.com/example/other")})
	if found, err := other.Found(context.Background(), s, nil); err != nil || found {
		t.Errorf("another repository: found %v, %v", found, err)
	}
}
