package argocd

// Conformance cases: each pins one rule of Argo CD that a plan depends
// on, citing the file and lines of github.com/argoproj/argo-cd (at commit
// 37ee0097cf, fetched read-only) that make it. Argo CD's own packages do
// not build from the module proxy here (docs/argocd.md, "Conformance"),
// so these cases are the oracle: each fails on a kplan that does
// otherwise.

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// writeTree writes files (path → content; "" removes) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if content == "" {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// planChange plans base → base+change changed-only, checks it says what
// the full plan says of every target, and returns the changed-only plan.
func planChange(t *testing.T, base, change map[string]string) [2]*Result {
	t.Helper()
	bdir, hdir := t.TempDir(), t.TempDir()
	writeTree(t, bdir, base)
	writeTree(t, hdir, base)
	writeTree(t, hdir, change)
	bs, err := snapshot.FromFS(os.DirFS(bdir), "base")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := snapshot.FromFS(os.DirFS(hdir), "head")
	if err != nil {
		t.Fatal(err)
	}
	got, err := testEngine().Plan(context.Background(), bs, hs, snapshot.Changed(bs.Index, hs.Index))
	if err != nil {
		t.Fatal(err)
	}
	full, err := testEngine().Plan(context.Background(), bs, hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		for _, ft := range full[i].Targets {
			gt := got[i].Target(ft.Name())
			if gt == nil {
				t.Fatalf("side %d: changed-only plans no %s", i, ft.Name())
			}
			if gt.Deferred || ft.Err != nil {
				continue
			}
			sameObjects(t, ft.Name(), gt.Objects, ft.Objects)
		}
	}
	return [2]*Result{got[0], got[1]}
}

// image is the image of the first container of the Deployment named in
// objs, or "".
func image(t *testing.T, tg *Target, name string) string {
	t.Helper()
	if tg == nil {
		t.Fatal("no such target")
	}
	if tg.Err != nil {
		t.Fatalf("%s: %v", tg.Name(), tg.Err)
	}
	for k, o := range objects(t, tg.Objects) {
		if !strings.HasPrefix(k, "Deployment ") || !strings.HasSuffix(k, "/"+name) {
			continue
		}
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		return c["image"].(string)
	}
	return ""
}

const kustomizeApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: shop}
  destination: {server: https://kubernetes.default.svc, namespace: shop}
`

const shopDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers: [{name: shop, image: registry.example.com/shop:1.0}]
`

// The repo server merges .argocd-source.yaml, then
// .argocd-source-<instance name>.yaml, at the source's path into the
// source before rendering it (reposerver/repository/repository.go:81-82,
// 1890-1947, called from GetAppSourceType at 1951-1952); the instance
// name is the Application's name in the control plane's namespace, else
// namespace_name (pkg/apis/application/v1alpha1/types.go:4137-4144).
// Argo CD Image Updater's git write-back writes the second file: its
// commit changes what Argo CD renders, and the plan shows it.
func TestConformanceSourceOverrideFiles(t *testing.T) {
	base := map[string]string{
		"apps/shop.yaml":          kustomizeApp,
		"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
		"shop/deployment.yaml":    shopDeployment,
	}
	t.Run("image updater write-back", func(t *testing.T) {
		p := planChange(t, base, map[string]string{
			"shop/.argocd-source-shop.yaml": "kustomize:\n  images:\n  - registry.example.com/shop:1.1\n",
		})
		if got := image(t, p[0].Target("argocd/shop"), "shop"); got != "registry.example.com/shop:1.0" {
			t.Errorf("base image %q", got)
		}
		if got := image(t, p[1].Target("argocd/shop"), "shop"); got != "registry.example.com/shop:1.1" {
			t.Errorf("head renders image %q, want the override's registry.example.com/shop:1.1", got)
		}
	})
	t.Run("both files, the Application's last; source fields kept", func(t *testing.T) {
		p := planChange(t, base, map[string]string{
			"shop/.argocd-source.yaml":      "kustomize:\n  namePrefix: a-\n  images: [registry.example.com/shop:2.0]\npath: elsewhere\n",
			"shop/.argocd-source-shop.yaml": "kustomize:\n  images: [registry.example.com/shop:3.0]\n",
		})
		tg := p[1].Target("argocd/shop")
		if got := image(t, tg, "a-shop"); got != "registry.example.com/shop:3.0" {
			t.Errorf("head renders a-shop with image %q, want the prefix of the first file and the image of the second", got)
		}
	})
	t.Run("another namespace's Application reads namespace_name", func(t *testing.T) {
		p := planChange(t, map[string]string{
			"apps/shop.yaml":          strings.Replace(kustomizeApp, "namespace: argocd", "namespace: team", 1),
			"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
			"shop/deployment.yaml":    shopDeployment,
		}, map[string]string{
			"shop/.argocd-source-shop.yaml":      "kustomize:\n  images: [registry.example.com/shop:9.9]\n",
			"shop/.argocd-source-team_shop.yaml": "kustomize:\n  images: [registry.example.com/shop:1.2]\n",
		})
		if got := image(t, p[1].Target("team/shop"), "shop"); got != "registry.example.com/shop:1.2" {
			t.Errorf("head renders image %q, want team_shop's registry.example.com/shop:1.2", got)
		}
	})
	t.Run("a broken override fails the Application, naming it", func(t *testing.T) {
		p := planChange(t, base, map[string]string{"shop/.argocd-source.yaml": "kustomize: [\n"})
		tg := p[1].Target("argocd/shop")
		if tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "shop/.argocd-source.yaml") {
			t.Errorf("head: %+v, want the Application failed naming shop/.argocd-source.yaml", tg)
		}
	})
}

// build renders files as one commit and returns its target id.
func build(t *testing.T, files map[string]string, id string) *Target {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	return buildRepo(t, dir).Target(id)
}

// metadataOf is the metadata of the object key ("Kind ns/name") of tg.
func metadataOf(t *testing.T, tg *Target, key string) map[string]any {
	t.Helper()
	if tg == nil {
		t.Fatal("no such target")
	}
	if tg.Err != nil {
		t.Fatalf("%s: %v", tg.Name(), tg.Err)
	}
	o, ok := objects(t, tg.Objects)[key]
	if !ok {
		t.Fatalf("%s renders no %s", tg.Name(), key)
	}
	return o["metadata"].(map[string]any)
}

// The kustomize settings the repo server writes with kustomize edit
// (util/kustomize/kustomize.go:221-262 at 37ee0097cf): commonLabels'
// values are always expanded (Env.Envsubst, pkg/apis/application/
// v1alpha1/types.go:180-193: $$ is a dollar, an unset variable is
// empty); commonAnnotations' only with commonAnnotationsEnvsubst;
// labelIncludeTemplates is --include-templates, which kustomize edit
// add label accepts only with --without-selector.
func TestConformanceKustomizeEditSettings(t *testing.T) {
	app := func(kustomize string) map[string]string {
		return map[string]string{
			"apps/shop.yaml":          strings.Replace(kustomizeApp, "path: shop}", "path: shop, kustomize: "+kustomize+"}", 1),
			"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
			"shop/deployment.yaml":    shopDeployment,
		}
	}
	t.Run("annotations as written unless commonAnnotationsEnvsubst", func(t *testing.T) {
		tg := build(t, app(`{commonAnnotations: {a: "$ARGOCD_APP_NAME", b: "$$x"}, commonLabels: {l: "$ARGOCD_APP_NAME-$UNSET$$"}}`), "argocd/shop")
		md := metadataOf(t, tg, "Deployment /shop")
		ann := md["annotations"].(map[string]any)
		if ann["a"] != "$ARGOCD_APP_NAME" || ann["b"] != "$$x" {
			t.Errorf("annotations %v, want them as written", ann)
		}
		if l := md["labels"].(map[string]any)["l"]; l != "shop-$" {
			t.Errorf("label %q, want shop-$ (name expanded, unset variable empty, $$ a dollar)", l)
		}
	})
	t.Run("commonAnnotationsEnvsubst", func(t *testing.T) {
		tg := build(t, app(`{commonAnnotations: {a: "$ARGOCD_APP_NAME/$ARGOCD_APP_PROJECT_NAME", b: "$$x$NOPE"}, commonAnnotationsEnvsubst: true}`), "argocd/shop")
		ann := metadataOf(t, tg, "Deployment /shop")["annotations"].(map[string]any)
		if ann["a"] != "shop/default" || ann["b"] != "$x" {
			t.Errorf("annotations %v, want a: shop/default, b: $x", ann)
		}
	})
	t.Run("labelIncludeTemplates with labelWithoutSelector", func(t *testing.T) {
		tg := build(t, app(`{commonLabels: {team: a}, labelWithoutSelector: true, labelIncludeTemplates: true}`), "argocd/shop")
		var d map[string]any
		for k, o := range objects(t, tg.Objects) {
			if k == "Deployment /shop" {
				d = o
			}
		}
		tpl := d["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
		sel := d["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
		if tpl["team"] != "a" || sel["team"] != nil {
			t.Errorf("template labels %v, selector %v: want the label on the template, not the selector", tpl, sel)
		}
	})
	t.Run("labelIncludeTemplates alone fails as kustomize edit does", func(t *testing.T) {
		tg := build(t, app(`{commonLabels: {team: a}, labelIncludeTemplates: true}`), "argocd/shop")
		if tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "--without-selector") {
			t.Errorf("%+v, want the Application failed as kustomize edit add label fails", tg)
		}
	})
}

// The Application's names in the build environment (newEnv,
// reposerver/repository/repository.go:1857-1871 at 37ee0097cf):
// ARGOCD_APP_NAME is the instance name (namespace_name outside the
// control plane's namespace), ARGOCD_APP_PROJECT_NAME its project; the
// revision variables are the synced commit, which the plan names
// instead of guessing.
func TestConformanceBuildEnvironment(t *testing.T) {
	files := map[string]string{
		"apps/shop.yaml": strings.Replace(strings.Replace(kustomizeApp, "namespace: argocd", "namespace: team", 1), "path: shop}",
			`path: shop, kustomize: {commonLabels: {app-name: "$ARGOCD_APP_NAME", project: "$ARGOCD_APP_PROJECT_NAME"}, commonAnnotations: {rev: "$ARGOCD_APP_REVISION"}, commonAnnotationsEnvsubst: true}}`, 1),
		"shop/kustomization.yaml": "resources: [deployment.yaml]\n",
		"shop/deployment.yaml":    shopDeployment,
	}
	tg := build(t, files, "team/shop")
	md := metadataOf(t, tg, "Deployment /shop")
	if l := md["labels"].(map[string]any); l["app-name"] != "team_shop" || l["project"] != "default" {
		t.Errorf("labels %v, want app-name team_shop, project default", l)
	}
	if a := md["annotations"].(map[string]any); a["rev"] != "$ARGOCD_APP_REVISION" {
		t.Errorf("annotation rev %q, want the variable as written", a["rev"])
	}
	if !slices.ContainsFunc(tg.Notes, func(n string) bool {
		return strings.Contains(n, "$ARGOCD_APP_REVISION") && strings.Contains(n, "after the merge")
	}) {
		t.Errorf("notes %q, want one saying the revision is known only after the merge", tg.Notes)
	}
}

// Helm options the repo server passes to helm template (helmTemplate,
// reposerver/repository/repository.go:1373, 1379-1384 at 37ee0097cf):
// parameters' values expanded (--set, --set-string), and
// skipSchemaValidation as --skip-schema-validation.
func TestConformanceHelmOptions(t *testing.T) {
	chart := map[string]string{
		"chart/Chart.yaml":         "apiVersion: v2\nname: typed\nversion: 1.0.0\n",
		"chart/values.yaml":        "owner: nobody\nreplicas: 1\n",
		"chart/values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer"}}}`,
		"chart/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typed\ndata:\n  owner: {{ .Values.owner | quote }}\n  replicas: {{ .Values.replicas | quote }}\n",
	}
	app := func(helm string) map[string]string {
		files := map[string]string{"apps/typed.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: typed, namespace: argocd}
spec:
  project: shop
  source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: chart, helm: ` + helm + `}
  destination: {server: https://kubernetes.default.svc, namespace: typed}
`}
		maps.Copy(files, chart)
		return files
	}
	tg := build(t, app(`{parameters: [{name: owner, value: "$ARGOCD_APP_NAME@$ARGOCD_APP_PROJECT_NAME"}]}`), "argocd/typed")
	if tg == nil || tg.Err != nil {
		t.Fatalf("%+v", tg)
	}
	if o := objects(t, tg.Objects)["ConfigMap /typed"]; o == nil || o["data"].(map[string]any)["owner"] != "typed@shop" {
		t.Errorf("ConfigMap %v, want owner typed@shop", o)
	}
	bad := `{parameters: [{name: replicas, value: two, forceString: true}]`
	if tg := build(t, app(bad+`}`), "argocd/typed"); tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "schema") {
		t.Errorf("%+v, want the schema to refuse replicas: two", tg)
	}
	if tg := build(t, app(bad+`, skipSchemaValidation: true}`), "argocd/typed"); tg == nil || tg.Err != nil {
		t.Errorf("%+v, want skipSchemaValidation to render", tg)
	}
}

// Settings that set nothing do not force a source's type: the
// application controller drops them (NormalizeSource, util/argo/
// argo.go:1046-1065 at 37ee0097cf, with the IsZero methods of
// pkg/apis/application/v1alpha1/types.go:682, 852, 926, 949) and the
// repo server detects the type from the path's files; a directory's
// include or exclude keep it a directory. disableExtensionFilter reads
// files of any extension (getPotentiallyValidManifestFile,
// reposerver/repository/repository.go:2148-2153).
func TestConformanceEmptySettingsDoNotForceTheType(t *testing.T) {
	base := map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-chart}\n",
		"kust/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: k-\n",
		"kust/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
		"kust/extra.txt":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: txt}\n",
	}
	for _, tc := range []struct {
		name, source string
		want         []string
	}{
		{"kustomize: {} on a chart", `{path: chart, kustomize: {}}`, []string{"ConfigMap /from-chart"}},
		{"kustomize with only force options on a chart", `{path: chart, kustomize: {forceCommonLabels: true}}`, []string{"ConfigMap /from-chart"}},
		{"helm: {} on a kustomization", `{path: kust, helm: {}}`, []string{"ConfigMap /k-cm"}},
		{"directory: {} on a kustomization", `{path: kust, directory: {}}`, []string{"ConfigMap /k-cm"}},
		{"directory include keeps a directory", `{path: kust, directory: {include: "cm.yaml"}}`, []string{"ConfigMap /cm"}},
		{"disableExtensionFilter", `{path: kust, directory: {disableExtensionFilter: true, include: "*.txt"}}`, []string{"ConfigMap /txt"}},
		{"kustomize and an empty helm", `{path: kust, kustomize: {namePrefix: p-}, helm: {}}`, []string{"ConfigMap /p-cm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := maps.Clone(base)
			files["apps/a.yaml"] = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\nspec:\n  source: " +
				strings.Replace(tc.source, "{", "{repoURL: https://github.com/example/deploy, targetRevision: main, ", 1) +
				"\n  destination: {server: https://kubernetes.default.svc, namespace: a}\n"
			tg := build(t, files, "argocd/a")
			if tg == nil || tg.Err != nil {
				t.Fatalf("%+v", tg)
			}
			got := slices.Sorted(maps.Keys(objects(t, tg.Objects)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("objects %q, want %q", got, tc.want)
			}
		})
	}
}

// Hooks are not the Application's objects: gitops-engine splits them off
// before the diff (hook.IsHook, hook.Skip, ignore.Ignore in
// gitops-engine/pkg/sync/hook/hook.go:23-50, pkg/sync/ignore/
// ignore.go:10-12, pkg/sync/reconcile.go:13-27; controller/state.go:1040
// at 37ee0097cf): an Argo CD hook of a type it runs, a Helm hook other
// than crd-install (its pre-/post-install and -upgrade mapped onto
// PreSync and PostSync, pkg/sync/hook/helm/type.go), Skip alone, and
// hooks of no type the sync runs. None is planned, added or pruned;
// each is said. A file holding +argocd:skip-file-rendering is not read
// by a directory source (reposerver/repository/repository.go:2204-2207).
func TestConformanceHooks(t *testing.T) {
	obj := func(name, ann string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations: {" + ann + "}\n"
	}
	base := map[string]string{
		"apps/a.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\nspec:\n  source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: a}\n  destination: {server: https://kubernetes.default.svc, namespace: a}\n",
		"a/objects.yaml": obj("plain", "") + obj("presync", `argocd.argoproj.io/hook: PreSync`) + obj("skip", `argocd.argoproj.io/hook: Skip`) +
			obj("skip-and-sync", `argocd.argoproj.io/hook: "Skip, Sync"`) + obj("postdelete", `argocd.argoproj.io/hook: PostDelete`) +
			obj("helm-pre", `helm.sh/hook: pre-upgrade`) + obj("helm-test", `helm.sh/hook: test`) + obj("helm-crd", `helm.sh/hook: crd-install`) +
			obj("argo-over-helm", `argocd.argoproj.io/hook: Sync, helm.sh/hook: test`),
		"a/marked.yaml": "# +argocd:skip-file-rendering\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: marked}\n",
	}
	tg := build(t, base, "argocd/a")
	if tg == nil || tg.Err != nil {
		t.Fatalf("%+v", tg)
	}
	got := slices.Sorted(maps.Keys(objects(t, tg.Objects)))
	if want := []string{"ConfigMap /helm-crd", "ConfigMap /plain"}; !slices.Equal(got, want) {
		t.Errorf("objects %q, want %q (hooks and Skip not planned)", got, want)
	}
	for _, want := range []string{"presync is not planned as an object: a PreSync hook", "skip is not planned as an object: argocd.argoproj.io/hook: Skip",
		"skip-and-sync is not planned as an object: a Skip,Sync hook", "postdelete is not planned as an object: argocd.argoproj.io/hook: PostDelete: a hook the sync does not run",
		"helm-pre is not planned as an object: helm.sh/hook: pre-upgrade, a PreSync hook", "helm-test is not planned as an object: helm.sh/hook: test: a Helm hook Argo CD's sync does not run",
		"argo-over-helm is not planned as an object: a Sync hook", "a/marked.yaml holds +argocd:skip-file-rendering"} {
		if !slices.ContainsFunc(tg.Notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("no note says %q: %q", want, tg.Notes)
		}
	}
	// A hook's change plans no object change, and no prune.
	p := planChange(t, base, map[string]string{"a/objects.yaml": obj("plain", "") + obj("presync", `argocd.argoproj.io/hook: PreSync, x: changed`) + obj("helm-crd", `helm.sh/hook: crd-install`)})
	for i, side := range p {
		if o := objects(t, side.Target("argocd/a").Objects); len(o) != 2 {
			t.Errorf("side %d plans %d objects, want plain and helm-crd", i, len(o))
		}
	}
}

// Argo CD leaves its excluded resources out of every Application: its
// core exclusions (util/settings/resources_filter.go:7-11 at 37ee0097cf)
// and the resource.exclusions of the argocd-cm it installs
// (manifests/base/config/argocd-cm.yaml:66-119), applied to the target
// objects in controller/state.go:805-815. They are not planned, and said.
func TestConformanceResourceExclusions(t *testing.T) {
	obj := func(apiVersion, kind, name string) string {
		return "---\napiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {name: " + name + "}\n"
	}
	files := map[string]string{
		"apps/a.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: argocd}\nspec:\n  source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: a}\n  destination: {server: https://kubernetes.default.svc, namespace: a}\n",
		"a/objects.yaml": obj("v1", "ConfigMap", "kept") + obj("v1", "Event", "e") + obj("events.k8s.io/v1", "Event", "e2") + obj("v1", "Endpoints", "ep") +
			obj("discovery.k8s.io/v1", "EndpointSlice", "eps") + obj("coordination.k8s.io/v1", "Lease", "l") + obj("cert-manager.io/v1", "CertificateRequest", "cr") +
			obj("cert-manager.io/v1", "Certificate", "cert") + obj("kyverno.io/v1", "UpdateRequest", "ur") + obj("kyverno.io/v1", "ClusterPolicy", "cp"),
	}
	tg := build(t, files, "argocd/a")
	if tg == nil || tg.Err != nil {
		t.Fatalf("%+v", tg)
	}
	got := slices.Sorted(maps.Keys(objects(t, tg.Objects)))
	if want := []string{"Certificate /cert", "ClusterPolicy /cp", "ConfigMap /kept"}; !slices.Equal(got, want) {
		t.Errorf("objects %q, want %q", got, want)
	}
	if n := len(slices.DeleteFunc(slices.Clone(tg.Notes), func(n string) bool { return !strings.Contains(n, "default resource exclusions") })); n != 7 {
		t.Errorf("%d notes say an object is excluded, want 7: %q", n, tg.Notes)
	}
}

// The clusters generator's parameters of a cluster Secret include its
// project ("" without one), and Argo CD's own cluster, without a Secret,
// comes last with an empty project (applicationset/generators/
// cluster.go:90-104, 128-160 at 37ee0097cf).
func TestConformanceClustersGeneratorProject(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"sets/apps.yaml": `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: apps, namespace: argocd}
spec:
  goTemplate: true
  generators: [{clusters: {}}]
  template:
    metadata: {name: 'app-{{.name}}'}
    spec:
      project: '{{if .project}}{{.project}}{{else}}default{{end}}'
      source: {repoURL: https://github.com/example/deploy, targetRevision: main, path: app}
      destination: {server: '{{.server}}', namespace: app}
`,
		"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
	})
	s, err := snapshot.FromFS(os.DirFS(dir), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := New(Options{Repos: NewRepos(repoURL), Revisions: []string{"main"}, ClustersFile: ".kplan.yaml",
		Clusters: []Cluster{{Name: "prod", Server: "https://prod.example.com", Project: "team-a"}, {Name: "dev", Server: "https://dev.example.com"}}})
	r, err := e.Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range r.Targets {
		got[tg.Application.Name] = tg.Spec().Project
	}
	if want := map[string]string{"app-prod": "team-a", "app-dev": "default", "app-in-cluster": "default"}; !maps.Equal(got, want) {
		t.Errorf("projects %v, want %v", got, want)
	}
}
