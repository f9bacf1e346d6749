package plan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/test/gittest"
)

// argoRepo is a git repository holding internal/argocd's Argo CD test
// repository, its origin the URL its Applications name.
func argoRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../argocd/testdata/repo")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	return dir
}

// argoGitDir is an empty git repository whose origin is the URL the
// tests' Applications name.
func argoGitDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	return dir
}

// commitAndPlan commits dir's work tree as name and plans the commit
// against its parent, changed-only and --full, which must agree
// (sameChanges): the full plan and the changed-only plan's stats.
func commitAndPlan(t *testing.T, dir, name string, ropts render.Options) (*inventorydiff.Plan, Stats) {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", name)
	opts := Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}, Render: ropts}
	changed, stats, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	opts.Full = true
	full, _, err := Execute(context.Background(), opts)
	if err != nil {
		t.Fatalf("%s --full: %v", name, err)
	}
	sameChanges(t, name, full, changed)
	return full, stats
}

func changedTargets(p *inventorydiff.Plan) []string {
	var out []string
	for _, o := range p.Overlays {
		if o.Status != inventorydiff.Unchanged {
			out = append(out, o.Path)
		}
	}
	return out
}

// A history of changes to an Argo CD repository, each planned against
// its parent: the changed-only plan says what the full plan says, and
// shows changed exactly the Applications the change affects, whatever
// it touched: an Application's settings, a chart template, a $ref value
// file, a directory, a kustomize base, a new or deleted Application, a
// file no Application reads or one a directory source excludes.
func TestArgoCDChangedOnlyEqualsFullOnHistory(t *testing.T) {
	dir := argoRepo(t)
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	steps := []struct {
		name   string
		change func()
		want   []string
		// rendered are the Applications rendered though unchanged: the
		// closure of a directory source is its whole tree.
		rendered int
	}{
		{"Application kustomize image", func() {
			gittest.Write(t, dir, map[string]string{"apps/kustomize.yaml": strings.Replace(read("apps/kustomize.yaml"), "guestbook:2.0", "guestbook:2.1", 1)})
		}, []string{"argocd/guestbook"}, 0},
		{"chart template", func() {
			gittest.Write(t, dir, map[string]string{"charts/web/templates/deployment.yaml": strings.Replace(read("charts/web/templates/deployment.yaml"), "env: {{ .Values.env }}", "env: {{ .Values.env }}\n    tier: web", 1)})
		}, []string{"argocd/web"}, 0},
		{"new chart template", func() {
			gittest.Write(t, dir, map[string]string{"charts/web/templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"})
		}, []string{"argocd/web"}, 0},
		{"$ref value file", func() {
			gittest.Write(t, dir, map[string]string{"envs/prod.yaml": "image:\n  repository: registry.example.com/nginx-hardened\n"})
		}, []string{"argocd/web"}, 0},
		{"new file in a directory source", func() {
			gittest.Write(t, dir, map[string]string{"plain/sub/new.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new}\n"})
		}, []string{"argocd/plain"}, 0},
		{"excluded file", func() {
			gittest.Write(t, dir, map[string]string{"plain/sub/skip.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "skipped2"}}`})
		}, nil, 1},
		{"kustomize base", func() {
			gittest.Write(t, dir, map[string]string{"guestbook/base/service.yaml": strings.Replace(read("guestbook/base/service.yaml"), "port: 80", "port: 8080", 1)})
		}, []string{"argocd/guestbook"}, 0},
		{"new resource of a kustomize base", func() {
			gittest.Write(t, dir, map[string]string{
				"guestbook/base/kustomization.yaml": strings.Replace(read("guestbook/base/kustomization.yaml"), "resources:\n", "resources:\n  - extra.yaml\n", 1),
				"guestbook/base/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
			})
		}, []string{"argocd/guestbook"}, 0},
		{"component", func() {
			gittest.Write(t, dir, map[string]string{"guestbook/components/debug/configmap.yaml": strings.Replace(read("guestbook/components/debug/configmap.yaml"), "debug\n", "trace\n", 1)})
		}, []string{"argocd/guestbook"}, 0},
		{"new Application", func() {
			gittest.Write(t, dir, map[string]string{"apps/staging.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: guestbook-staging, namespace: argocd}\n" +
				"spec:\n  source: {repoURL: 'git@github.com:example/deploy.git', path: guestbook/base, kustomize: {namePrefix: staging-}}\n  destination: {server: 'https://kubernetes.default.svc', namespace: staging}\n"})
		}, []string{"argocd/guestbook-staging"}, 0},
		{"deleted Application", func() {
			if err := os.Remove(filepath.Join(dir, "apps/helm.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"argocd/web"}, 0},
		{"new ApplicationSet", func() {
			gittest.Write(t, dir, map[string]string{"sets/dirs.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: dirs, namespace: argocd}\n" +
				"spec:\n  generators: [{git: {repoURL: 'https://github.com/example/deploy', revision: HEAD, directories: [{path: 'plain/*'}]}}]\n" +
				"  template:\n    metadata: {name: '{{path.basename}}'}\n    spec:\n      source: {repoURL: 'https://github.com/example/deploy', path: '{{path}}'}\n" +
				"      destination: {server: 'https://kubernetes.default.svc', namespace: '{{path.basename}}'}\n"})
		}, []string{"argocd/sub"}, 0},
		{"directory the ApplicationSet generates from", func() {
			gittest.Write(t, dir, map[string]string{"plain/sub2/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub2}\n"})
		}, []string{"argocd/plain", "argocd/sub2"}, 0},
		{"README", func() {
			gittest.Write(t, dir, map[string]string{"README.md": "changed\n"})
		}, nil, 0},
	}
	// A render cache kept across the history: each step's plan takes the
	// parses the step before kept (its head is this base), and says what
	// the full plan says.
	cache := t.TempDir()
	for _, st := range steps {
		st.change()
		full, stats := commitAndPlan(t, dir, st.name, render.Options{})
		warm, _, err := Execute(context.Background(), Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}, CacheDir: cache})
		if err != nil {
			t.Fatalf("%s, with the render cache: %v", st.name, err)
		}
		sameChanges(t, st.name+", with the render cache", full, warm)
		// Changed-only renders only the Applications the change affects.
		if want := len(full.Overlays) - len(st.want) - st.rendered; stats.Skipped != want {
			t.Errorf("%s: %d Applications left unrendered, want %d (all but %q)", st.name, stats.Skipped, want, st.want)
		}
		if got := changedTargets(full); !slices.Equal(got, st.want) {
			t.Errorf("%s: changed %q, want %q", st.name, got, st.want)
		}
		for _, o := range full.Overlays {
			if st.name == "deleted Application" && o.Path == "argocd/web" && !slices.ContainsFunc(o.Notes, func(n string) bool {
				return strings.Contains(n, "without the resources-finalizer.argocd.argoproj.io finalizer")
			}) {
				t.Errorf("%s: the plan prunes %s without saying Argo CD leaves its objects: %q", st.name, o.Path, o.Notes)
			}
			if !strings.HasPrefix(o.Path, "argocd/") {
				t.Errorf("%s: %s is planned beside the Applications; the kustomize directories they read are planned in them", st.name, o.Path)
			}
			if o.BaseErr != "" || o.HeadErr != "" {
				t.Errorf("%s: %s failed: %s%s", st.name, o.Path, o.BaseErr, o.HeadErr)
			}
		}
	}
}

// TestArgoCDModeHonoursOverlayFilters pins that --overlays and --exclude
// select Argo CD Applications by name, as they select Flux Kustomizations
// (Argo CD mode ignored them).
func TestArgoCDModeHonoursOverlayFilters(t *testing.T) {
	dir := argoRepo(t)
	for p, r := range map[string][2]string{
		"apps/kustomize.yaml":                  {"guestbook:2.0", "guestbook:2.1"},
		"charts/web/templates/deployment.yaml": {"env: {{ .Values.env }}", "env: {{ .Values.env }}\n    tier: web"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		gittest.Write(t, dir, map[string]string{p: strings.Replace(string(data), r[0], r[1], 1)})
	}
	git(t, dir, "commit", "-qam", "both Applications change")
	for _, tc := range []struct {
		filter render.Filter
		want   []string
	}{
		{render.Filter{}, []string{"argocd/guestbook", "argocd/web"}},
		{render.Filter{Include: []string{"argocd/guest*"}}, []string{"argocd/guestbook"}},
		{render.Filter{Exclude: []string{"argocd/guestbook"}}, []string{"argocd/web"}},
	} {
		p, _, err := Execute(context.Background(), Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}, Filter: tc.filter})
		if err != nil {
			t.Fatalf("%+v: %v", tc.filter, err)
		}
		if got := changedTargets(p); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: changed %q, want %q", tc.filter, got, tc.want)
		}
	}
	_, _, err := Execute(context.Background(), Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}, Filter: render.Filter{Include: []string{"argocd/nothere"}}})
	if !errors.Is(err, ErrNoMatch) {
		t.Errorf("a filter matching no Application: %v, want ErrNoMatch", err)
	}
}

// TestArgoCDDuplicateObjectsOnlyWhereDestinationsMeet pins that two
// Applications rendering one object collide only when they sync to the
// same destination cluster: Argo CD's destination is the target's
// cluster, as Flux's is.
func TestArgoCDDuplicateObjectsOnlyWhereDestinationsMeet(t *testing.T) {
	app := func(name, cluster string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: " + name + "}\n" +
			"  destination: {name: " + cluster + ", namespace: apps}\n"
	}
	for _, tc := range []struct {
		name, cluster string
		// b and a are the targets' names: by cluster when the
		// Applications sync to two.
		b, a string
		want bool
	}{
		{"same cluster", "in-cluster", "argocd/b", "argocd/a", true},
		{"another cluster", "staging", "staging: argocd/b", "in-cluster: argocd/a", false},
		// Argo CD knows the cluster it runs in by this server and by the
		// name in-cluster alike (pkg/apis/application/v1alpha1/
		// application_defaults.go:31-34 at argo-cd 37ee0097cf).
		{"in-cluster by its server", "'', server: 'https://kubernetes.default.svc'", "argocd/b", "argocd/a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := argoGitDir(t)
			write(t, dir, map[string]string{
				"apps/a.yaml":   app("a", "in-cluster"),
				"apps/b.yaml":   app("b", tc.cluster),
				"a/shared.yaml": cm("shared", "k: v"),
				"b/own.yaml":    cm("own", "k: v"),
			})
			base := commit(t, dir, "base")
			write(t, dir, map[string]string{"b/shared.yaml": cm("shared", "k: other")})
			head := commit(t, dir, "b renders a's ConfigMap too")
			_, p, _ := plans(t, dir, base, head)
			got := findings(t, p, tc.b)[danger.DuplicateObject]
			if tc.want != (len(got) == 1) || len(got) > 1 {
				t.Fatalf("findings %+v, want a duplicate: %v", got, tc.want)
			}
			if tc.want && !strings.Contains(got[0].Reason, "also rendered by "+tc.a) {
				t.Errorf("the finding does not name %s: %+v", tc.a, got[0])
			}
		})
	}
}

// generatorsRepo is a git repository holding internal/argocd's
// ApplicationSet generators test repository without its sets/ and apps/
// (base), then with them (head): the pull request adds the
// ApplicationSets and the kustomize directories they sync.
func generatorsRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../argocd/testdata/generators")); err != nil {
		t.Fatal(err)
	}
	aside := t.TempDir()
	for _, d := range []string{"sets", "apps"} {
		if err := os.Rename(filepath.Join(dir, d), filepath.Join(aside, d)); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	for _, d := range []string{"sets", "apps"} {
		if err := os.Rename(filepath.Join(aside, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "ApplicationSets")
	return dir
}

// A pull request adding an ApplicationSet of each generator (git files,
// clusters from .kplan.yaml, matrix, merge, a list with a selector and
// a templatePatch) plans each Application they make as added, its
// objects what kustomize build of the Application's path prints, in its
// destination namespace.
func TestArgoCDApplicationSetGeneratorsPlanWhatKustomizeBuilds(t *testing.T) {
	dir := generatorsRepo(t)
	plan, _, err := Execute(context.Background(), Options{RepoDir: dir, Base: "HEAD~", Head: "HEAD", Resolver: notFound{}})
	if err != nil {
		t.Fatal(err)
	}
	// Where each Application syncs (its path is in the ApplicationSet).
	want := map[string]struct{ path, ns string }{
		"in-cluster: argocd/web-files": {"apps/web", "web-team"}, "in-cluster: argocd/api-files": {"apps/api", "api-team"},
		"in-cluster: argocd/worker-a-files": {"apps/worker", "worker-a-team"}, "in-cluster: argocd/worker-b-files": {"apps/worker", "worker-b-team"},
		"in-cluster: argocd/deep-files": {"apps/web", "deep-team"},
		"in-cluster: argocd/web-go":     {"apps/web", "prod-web"}, "in-cluster: argocd/api-go": {"apps/api", "staging-api"},
		"prod: argocd/web-prod": {"apps/web", "web-prod"}, "staging: argocd/web-staging": {"apps/web", "web-staging"},
		"in-cluster: argocd/api-staging-m": {"apps/api", "staging"}, "in-cluster: argocd/web-prod-m": {"apps/web", "prod"},
		"prod: argocd/prod-web":         {"apps/web", "web-prod"},
		"in-cluster: argocd/merged-api": {"apps/api", "api-merged"}, "in-cluster: argocd/merged-worker": {"apps/worker", "worker-one"},
		"in-cluster: argocd/patched-api": {"apps/api", "patched-prod"}, "in-cluster: argocd/patched-web": {"apps/web", "patched-staging"},
	}
	kz := filepath.Join(testhelm.Dir(t), "kustomize")
	built := map[string]map[string]map[string]any{} // path → kind/name → object
	seen := map[string]bool{}
	for _, o := range plan.Overlays {
		w, ok := want[o.Path]
		if !ok {
			t.Errorf("%s is planned, which Argo CD does not make", o.Path)
			continue
		}
		seen[o.Path] = true
		if o.Status != inventorydiff.New || o.HeadErr != "" {
			t.Errorf("%s: %s %s, want new", o.Path, o.Status, o.HeadErr)
		}
		if built[w.path] == nil {
			out, err := exec.Command(kz, "build", filepath.Join(dir, w.path)).Output()
			if err != nil {
				t.Fatalf("kustomize build %s: %v", w.path, err)
			}
			built[w.path] = map[string]map[string]any{}
			for _, doc := range strings.Split(string(out), "\n---\n") {
				var m map[string]any
				if err := sigsyaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				md, _ := m["metadata"].(map[string]any)
				built[w.path][fmt.Sprint(m["kind"], "/", md["name"])] = m
			}
		}
		if len(o.AddedYAML) != len(built[w.path]) {
			t.Errorf("%s adds %d objects, kustomize build %s prints %d", o.Path, len(o.AddedYAML), w.path, len(built[w.path]))
		}
		for key, y := range o.AddedYAML {
			var m map[string]any
			if err := sigsyaml.Unmarshal([]byte(y), &m); err != nil {
				t.Fatal(err)
			}
			md, _ := m["metadata"].(map[string]any)
			if ns := strings.Split(key, "|"); len(ns) != 3 || ns[1] != w.ns {
				t.Errorf("%s: %s is not in the destination namespace %s", o.Path, key, w.ns)
			}
			if b := built[w.path][fmt.Sprint(m["kind"], "/", md["name"])]; !reflect.DeepEqual(m, b) {
				t.Errorf("%s: %s:\n%s\nkustomize build prints %v", o.Path, key, y, b)
			}
		}
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("%s is not planned", p)
		}
	}
}

// A history of changes to the generators' inputs, each planned against
// its parent: the changed-only plan says what the full plan says, and
// changes exactly the Applications the change affects: a git file's
// content (used or not by the templates), a new git file, an excluded
// one, a cluster's labels in .kplan.yaml, a source all generated
// Applications of a path read.
func TestArgoCDGeneratorsChangedOnlyEqualsFull(t *testing.T) {
	dir := generatorsRepo(t)
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	steps := []struct {
		name   string
		change map[string]string
		want   []string
		// rendered are the Applications rendered though unchanged:
		// their inputs changed.
		rendered int
	}{
		{"git file's value the templates use", map[string]string{"config/api/config.yaml": strings.Replace(read("config/api/config.yaml"), "env: staging", "env: qa", 1)},
			// api-files does not use env: rendered, unchanged; the others
			// move to the qa namespaces (api-staging-m becomes api-qa-m).
			[]string{"in-cluster: argocd/api-go", "in-cluster: argocd/api-qa-m", "in-cluster: argocd/api-staging-m"}, 1},
		{"git file's key no template uses", map[string]string{"config/web/config.json": `{"app": {"name": "web", "dir": "apps/web"}, "env": "prod", "replicas": 3}`},
			nil, 3},
		{"new git file", map[string]string{"config/extra/config.yaml": "app: {name: extra, dir: apps/api}\nenv: prod\n"},
			[]string{"in-cluster: argocd/extra-files"}, 0},
		{"excluded git file", map[string]string{"config/old/config.yaml": "app: {name: old2, dir: apps/old}\n"},
			nil, 0},
		{"cluster label", map[string]string{".kplan.yaml": strings.Replace(read(".kplan.yaml"), "labels: {env: staging}", "labels: {env: qa}", 1)},
			// Argo CD's clusters are not in git: both sides see head's
			// .kplan.yaml, so web-staging leaves both (the selector's In
			// [prod, staging]); the prod ones read .kplan.yaml: rendered,
			// unchanged.
			nil, 2},
		{"source of generated Applications", map[string]string{"apps/worker/cm.yaml": strings.Replace(read("apps/worker/cm.yaml"), "app: worker", "app: worker2", 1)},
			[]string{"in-cluster: argocd/merged-worker", "in-cluster: argocd/worker-a-files", "in-cluster: argocd/worker-b-files"}, 0},
	}
	for _, st := range steps {
		gittest.Write(t, dir, st.change)
		full, stats := commitAndPlan(t, dir, st.name, render.Options{})
		if got := changedTargets(full); !slices.Equal(got, st.want) {
			t.Errorf("%s: changed %q, want %q", st.name, got, st.want)
		}
		if want := len(full.Overlays) - len(st.want) - st.rendered; stats.Skipped != want {
			t.Errorf("%s: %d Applications left unrendered, want %d (all but %q and %d)", st.name, stats.Skipped, want, st.want, st.rendered)
		}
		for _, o := range full.Overlays {
			if o.BaseErr != "" || o.HeadErr != "" {
				t.Errorf("%s: %s failed: %s%s", st.name, o.Path, o.BaseErr, o.HeadErr)
			}
		}
	}
}

// TestAdoptingArgoCDOverAnOverlayPrunesNothing pins that a pull request
// adding the first Application over a kustomize directory that was
// already there plans the Application's objects as added, and prunes
// nothing: the directory is not also planned as a loose overlay the
// merge removes.
func TestAdoptingArgoCDOverAnOverlayPrunesNothing(t *testing.T) {
	dir := argoGitDir(t)
	write(t, dir, map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": cm("settings", "k: v")})
	base := commit(t, dir, "a kustomize directory")
	write(t, dir, map[string]string{"apps/app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: app, namespace: argocd}\n" +
		"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: app}\n  destination: {server: 'https://kubernetes.default.svc', namespace: shop}\n"})
	head := commit(t, dir, "Argo CD syncs it")
	full, _, _ := plans(t, dir, base, head)
	if full.Totals.Pruned != 0 {
		t.Errorf("adopting Argo CD prunes %d objects", full.Totals.Pruned)
	}
	var paths []string
	for _, o := range full.Overlays {
		paths = append(paths, o.Path)
		if len(o.Pruned) > 0 {
			t.Errorf("%s prunes %d objects", o.Path, len(o.Pruned))
		}
	}
	if !slices.Equal(paths, []string{"argocd/app"}) || len(full.Overlays[0].Added) != 1 {
		t.Errorf("planned %q, want argocd/app adding its ConfigMap", paths)
	}
}

// TestArgoCDKustomizeBuildOptions pins that .kplan.yaml
// argocdKustomizeBuildOptions builds kustomize sources as argocd-cm's
// kustomize.buildOptions make Argo CD build them: with --enable-helm a
// kustomization's helmCharts are inflated (Argo CD's default leaves the
// Application failing), with --load-restrictor LoadRestrictionsNone it
// may read beside its directory.
func TestArgoCDKustomizeBuildOptions(t *testing.T) {
	helm := filepath.Join(testhelm.Dir(t), "helm")
	app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: app, namespace: argocd}\n" +
		"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: app}\n  destination: {server: 'https://kubernetes.default.svc', namespace: shop}\n"
	files := map[string]string{
		"apps/app.yaml":                      app,
		"app/kustomization.yaml":             "resources: [../shared/cm.yaml]\nhelmCharts:\n- {name: flags, releaseName: flags}\n",
		"app/charts/flags/Chart.yaml":        "apiVersion: v2\nname: flags\nversion: 1.0.0\n",
		"app/charts/flags/values.yaml":       "{}\n",
		"app/charts/flags/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-chart}\ndata: {k: v}\n",
		"shared/cm.yaml":                     cm("shared", "k: v"),
	}
	for _, tc := range []struct {
		name, options string
		want          []string // the Application's objects, or
		err           string   // its error on head
	}{
		{"Argo CD's defaults", "", nil, "is not in or below"},
		{"only the load restrictor", "--load-restrictor LoadRestrictionsNone", nil, "helm"},
		{"both", "--enable-helm --load-restrictor=LoadRestrictionsNone", []string{"ConfigMap shop/from-chart", "ConfigMap shop/shared"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := argoGitDir(t)
			kplanYAML := "apiVersion: kplan.dev/v1alpha1\nkind: Repository\nargocd: true\n"
			if tc.options != "" {
				kplanYAML += "argocdKustomizeBuildOptions: " + tc.options + "\n"
			}
			write(t, dir, map[string]string{".kplan.yaml": kplanYAML, "README.md": "base\n"})
			base := commit(t, dir, "base")
			write(t, dir, files)
			head := commit(t, dir, "an Application")
			p, _, err := Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{},
				Render: render.Options{HelmCommand: helm}})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Overlays) != 1 || p.Overlays[0].Path != "argocd/app" {
				t.Fatalf("planned %+v, want argocd/app", p.Overlays)
			}
			o := p.Overlays[0]
			if tc.err != "" {
				if !strings.Contains(o.HeadErr, tc.err) {
					t.Errorf("head error %q, want it to say %q", o.HeadErr, tc.err)
				}
				return
			}
			var got []string
			for _, k := range o.Added {
				id, err := inventory.ParseKey(k)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, id.Kind+" "+id.Namespace+"/"+id.Name)
			}
			slices.Sort(got)
			if o.HeadErr != "" || !slices.Equal(got, tc.want) {
				t.Errorf("added %q (error %q), want %q", got, o.HeadErr, tc.want)
			}
		})
	}
}

// TestUnexpandedApplicationSetIsNotPlannedAsRemoved pins that an
// ApplicationSet kplan cannot expand on one side (here a clusters
// generator without .kplan.yaml argocdClusters) leaves the Applications it
// makes on the other side failed, naming why: Argo CD still makes them
// (the in-cluster one the same), so the plan neither prunes everything
// they sync nor adds it.
func TestUnexpandedApplicationSetIsNotPlannedAsRemoved(t *testing.T) {
	dir := argoGitDir(t)
	set := func(generator string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: apps, namespace: argocd}\nspec:\n  goTemplate: true\n  generators:\n" + generator +
			"  template:\n    metadata: {name: 'app-{{.env}}'}\n    spec:\n      source: {repoURL: 'https://github.com/example/deploy.git', targetRevision: HEAD, path: app}\n" +
			"      destination: {server: 'https://kubernetes.default.svc', namespace: '{{.env}}'}\n"
	}
	list := "  - list: {elements: [{env: dev}]}\n"
	write(t, dir, map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": cm("settings", "k: v"), "set.yaml": set(list)})
	listed := commit(t, dir, "a list generator")
	write(t, dir, map[string]string{"set.yaml": set("  - matrix:\n      generators:\n      - clusters: {}\n" + strings.ReplaceAll(list, "  - ", "      - "))})
	matrix := commit(t, dir, "every cluster")
	for _, c := range []struct{ base, head, failed string }{{listed, matrix, "head"}, {matrix, listed, "base"}} {
		full, _, _ := plans(t, dir, c.base, c.head)
		if len(full.Overlays) != 1 || full.Overlays[0].Path != "argocd/app-dev" {
			t.Fatalf("%s side unexpanded: planned %v, want argocd/app-dev", c.failed, changedTargets(full))
		}
		o := full.Overlays[0]
		if o.Status == inventorydiff.Removed || o.Status == inventorydiff.New || len(o.Pruned) > 0 || len(o.Added) > 0 || full.Totals.Pruned > 0 {
			t.Errorf("%s side unexpanded: argocd/app-dev is %s, adding %d, pruning %d", c.failed, o.Status, len(o.Added), len(o.Pruned))
		}
		msg := map[string]string{"base": o.BaseErr, "head": o.HeadErr}[c.failed]
		for _, want := range []string{"ApplicationSet argocd/apps (set.yaml)", "argocdClusters"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s side unexpanded: its error %q does not say %q", c.failed, msg, want)
			}
		}
	}
}

// An ApplicationSet whose syncPolicy.applicationsSync does not delete
// (create-only, create-update) keeps the Applications it stops making,
// and their objects: the plan prunes nothing and says why; one that
// does not update (create-only, create-delete) says that a template
// change reaches only Applications it creates (conformance: argo-cd
// pkg/apis/application/v1alpha1/applicationset_types.go:128-134,
// applicationset/controllers/applicationset_controller.go:342, 376 at
// 37ee0097cf).
func TestApplicationSetSyncPolicyKeepsApplications(t *testing.T) {
	for _, tc := range []struct {
		policy           string
		kept, notUpdated bool
	}{{"create-only", true, true}, {"create-update", true, false}, {"create-delete", false, true}, {"sync", false, false}} {
		t.Run(tc.policy, func(t *testing.T) {
			dir := argoGitDir(t)
			set := func(envs, label string) string {
				return "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: apps, namespace: argocd}\nspec:\n  goTemplate: true\n  syncPolicy: {applicationsSync: " + tc.policy + "}\n" +
					"  generators:\n  - list: {elements: [" + envs + "]}\n" +
					"  template:\n    metadata: {name: 'app-{{.env}}'}\n    spec:\n      source: {repoURL: 'https://github.com/example/deploy.git', targetRevision: HEAD, path: app, kustomize: {commonLabels: {team: " + label + "}}}\n" +
					"      destination: {server: 'https://kubernetes.default.svc', namespace: '{{.env}}'}\n"
			}
			write(t, dir, map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": cm("settings", "k: v"), "set.yaml": set("{env: dev}, {env: prod}", "a")})
			two := commit(t, dir, "two environments")
			write(t, dir, map[string]string{"set.yaml": set("{env: dev}", "a")})
			one := commit(t, dir, "prod no longer generated")
			write(t, dir, map[string]string{"set.yaml": set("{env: dev}", "b")})
			relabelled := commit(t, dir, "the template changes")

			full, _, _ := plans(t, dir, two, one)
			var prod *inventorydiff.Overlay
			for i, o := range full.Overlays {
				if o.Path == "argocd/app-prod" {
					prod = &full.Overlays[i]
				}
			}
			if prod == nil {
				t.Fatalf("no argocd/app-prod in %v", changedTargets(full))
			}
			kept := full.Totals.Pruned == 0 && slices.ContainsFunc(prod.Notes, func(n string) bool { return strings.Contains(n, "applicationsSync: "+tc.policy) })
			if kept != tc.kept {
				t.Errorf("prod removed from the generator: pruned %d, notes %q; want kept %v", full.Totals.Pruned, prod.Notes, tc.kept)
			}

			full, _, _ = plans(t, dir, one, relabelled)
			noted := false
			for _, o := range full.Overlays {
				noted = noted || slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, "does not update an Application that exists") })
			}
			if noted != tc.notUpdated {
				t.Errorf("template changed: noted %v, want %v", noted, tc.notUpdated)
			}
		})
	}
}

// Respelling the in-cluster destination (its name for its server) moves
// nothing: Argo CD syncs the same objects to the same cluster.
func TestInClusterDestinationRespelledChangesNothing(t *testing.T) {
	dir := argoGitDir(t)
	app := func(dest string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\n" +
			"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: a}\n  destination: {" + dest + ", namespace: apps}\n"
	}
	write(t, dir, map[string]string{"apps/a.yaml": app("server: 'https://kubernetes.default.svc'"), "a/cm.yaml": cm("settings", "k: v")})
	base := commit(t, dir, "by server")
	write(t, dir, map[string]string{"apps/a.yaml": app("name: in-cluster")})
	head := commit(t, dir, "by name")
	full, _, _ := plans(t, dir, base, head)
	if full.Totals.Pruned != 0 || full.Totals.Added != 0 || len(full.Overlays) != 1 || full.Overlays[0].Path != "argocd/a" {
		t.Errorf("respelled destination: %d added, %d pruned, targets %v; want argocd/a, nothing added or pruned", full.Totals.Added, full.Totals.Pruned, changedTargets(full))
	}
}

// A custom resource without a namespace goes to its Application's
// destination namespace when the cluster serves its kind namespaced
// (NormalizeTargetObjects, controller/state.go:795 at argo-cd
// 37ee0097cf), wherever its CRD comes from: here another Application
// syncs the CRD, so moving the Application to another namespace moves
// its custom resource too (prune and add), and a kind no CRD of the
// repository defines is said on the target.
func TestArgoCDCustomResourcesGoToTheDestinationNamespace(t *testing.T) {
	dir := argoGitDir(t)
	app := func(name, ns string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: " + name + "}\n  destination: {server: 'https://kubernetes.default.svc', namespace: " + ns + "}\n"
	}
	write(t, dir, map[string]string{
		"apps/crds.yaml": app("crds", "default"),
		"apps/web.yaml":  app("web", "shop"),
		"crds/widget.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n" +
			"spec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n",
		"web/widget.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
		"web/gadget.yaml": "apiVersion: other.example.com/v1\nkind: Gadget\nmetadata: {name: g}\n",
		"web/cm.yaml":     cm("settings", "k: v"),
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"apps/web.yaml": app("web", "store")})
	head := commit(t, dir, "web moves to store")
	full, _, _ := plans(t, dir, base, head)
	var web *inventorydiff.Overlay
	for i, o := range full.Overlays {
		if o.Path == "argocd/web" {
			web = &full.Overlays[i]
		}
	}
	if web == nil {
		t.Fatalf("no argocd/web in %v", changedTargets(full))
	}
	joined := strings.Join(web.Pruned, " ") + " | " + strings.Join(web.Added, " ")
	for _, want := range []string{"Widget|shop|w", "Widget|store|w", "ConfigMap|shop|settings", "ConfigMap|store|settings"} {
		if !strings.Contains(joined, want) {
			t.Errorf("pruned | added: %s; want %s among them", joined, want)
		}
	}
	if !slices.ContainsFunc(web.Notes, func(n string) bool {
		return strings.Contains(n, "other.example.com/v1 Gadget: no CustomResourceDefinition")
	}) {
		t.Errorf("notes %q, want one on Gadget's unknown scope", web.Notes)
	}
}

// An object moved between two Applications of one destination is said
// on both, with why the outcome depends on which syncs first (Argo CD
// prunes only objects its tracking says are the Application's own:
// controller/state.go:1342-1400 at argo-cd 37ee0097cf).
func TestArgoCDObjectMovedBetweenApplicationsIsSaid(t *testing.T) {
	dir := argoGitDir(t)
	app := func(name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\n" +
			"spec:\n  source: {repoURL: 'https://github.com/example/deploy.git', path: " + name + "}\n  destination: {server: 'https://kubernetes.default.svc', namespace: apps}\n"
	}
	write(t, dir, map[string]string{"apps/a.yaml": app("a"), "apps/b.yaml": app("b"), "a/shared.yaml": cm("shared", "k: v"), "a/own.yaml": cm("own-a", "k: v"), "b/own.yaml": cm("own-b", "k: v")})
	base := commit(t, dir, "base")
	git(t, dir, "mv", "a/shared.yaml", "b/shared.yaml")
	head := commit(t, dir, "shared moves to b")
	full, _, _ := plans(t, dir, base, head)
	said := 0
	for _, o := range full.Overlays {
		if slices.ContainsFunc(o.Notes, func(n string) bool {
			return strings.Contains(n, "moves from argocd/a to argocd/b") && strings.Contains(n, "which Application syncs first")
		}) {
			said++
		}
	}
	if said != 2 {
		t.Errorf("%d targets say the move, want both: %+v", said, full.Overlays)
	}
}
