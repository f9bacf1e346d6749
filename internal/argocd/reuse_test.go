package argocd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/test/gittest"
)

// reuseApp is an Application of reuseFiles: name, source path, and the
// rest of its source.
func reuseApp(name, path, rest string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %s, namespace: argocd}
spec:
  source: {repoURL: %s, targetRevision: HEAD, path: %s%s}
  destination: {server: https://kubernetes.default.svc, namespace: %s}
`, name, repoURL, path, rest, name)
}

func reuseCM(name, v string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {v: %q}\n", name, v)
}

// reuseFiles are a repository of Applications of every kind of source,
// and ApplicationSets of git directory and file generators.
var reuseFiles = map[string]string{
	"apps/web.yaml":            reuseApp("web", "web", ", kustomize: {namePrefix: a-}"),
	"web/kustomization.yaml":   "resources: [cm.yaml]\n",
	"web/cm.yaml":              reuseCM("web", "1"),
	"apps/chart.yaml":          reuseApp("chart", "chart", ""),
	"chart/Chart.yaml":         "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
	"chart/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}'}\n",
	"apps/plain.yaml":          reuseApp("plain", "plain", ", directory: {recurse: true}"),
	"plain/cm.yaml":            reuseCM("plain", "1"),
	"apps/other.yaml":          reuseApp("other", "other", ""),
	"other/kustomization.yaml": "resources: [cm.yaml]\n",
	"other/cm.yaml":            reuseCM("other", "1"),
	"sets/dirs.yaml": `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: dirs, namespace: argocd}
spec:
  generators: [{git: {repoURL: ` + repoURL + `, revision: HEAD, directories: [{path: gen/*}]}}]
  template:
    metadata: {name: 'gen-{{path.basename}}'}
    spec:
      source: {repoURL: ` + repoURL + `, path: '{{path}}'}
      destination: {server: https://kubernetes.default.svc, namespace: '{{path.basename}}'}
`,
	"gen/a/kustomization.yaml": "resources: [cm.yaml]\n",
	"gen/a/cm.yaml":            reuseCM("a", "1"),
	"gen/b/kustomization.yaml": "resources: [cm.yaml]\n",
	"gen/b/cm.yaml":            reuseCM("b", "1"),
	"sets/files.yaml": `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: files, namespace: argocd}
spec:
  generators: [{git: {repoURL: ` + repoURL + `, revision: HEAD, files: [{path: config/*.json}]}}]
  template:
    metadata: {name: 'cfg-{{name}}'}
    spec:
      source: {repoURL: ` + repoURL + `, path: '{{dir}}'}
      destination: {server: https://kubernetes.default.svc, namespace: '{{name}}'}
`,
	"config/x.json": `{"name": "x", "dir": "other"}`,
}

// reuseSides commits reuseFiles, then them with head's changes, and opens
// both as a plan does: head from base, sharing its contents.
func reuseSides(t *testing.T, head map[string]string) (base, hd *snapshot.Snapshot) {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q")
	gittest.Write(t, dir, reuseFiles)
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "base")
	gittest.Write(t, dir, head)
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "head")
	ctx := context.Background()
	blobs := snapshot.NewBlobs(dir)
	t.Cleanup(func() { blobs.Close() })
	base, err := snapshot.Open(ctx, dir, "HEAD~", blobs)
	if err != nil {
		t.Fatal(err)
	}
	hd, err = snapshot.OpenFrom(ctx, base, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return base, hd
}

// TestChangedOnlyReusesOnlyWhatTheChangeCannotTouch: a changed-only plan
// shares between the sides the parses, closures and ApplicationSet
// makings the change cannot have touched, and nothing else: each head
// change below is planned from head's own files (a fresh parse, a
// closure computed again, an Application templated again), and the plan
// renders what the full plan renders. An Application nothing reaches is
// the same on both sides, its closure computed once, and not rendered.
func TestChangedOnlyReusesOnlyWhatTheChangeCannotTouch(t *testing.T) {
	for _, tc := range []struct {
		name string
		head map[string]string
		// fresh are the targets whose Application head parses or makes
		// anew; rendered those the plan renders.
		fresh, rendered []string
		// objects are head's objects of a target, by name and data.
		objects map[string][]string
	}{
		{name: "the file declaring an Application", head: map[string]string{"apps/web.yaml": reuseApp("web", "web", ", kustomize: {namePrefix: b-}")},
			fresh: []string{"argocd/web"}, rendered: []string{"argocd/web"}, objects: map[string][]string{"argocd/web": {"b-web 1"}}},
		{name: "a file its kustomization reads", head: map[string]string{"web/cm.yaml": reuseCM("web", "2")},
			rendered: []string{"argocd/web"}, objects: map[string][]string{"argocd/web": {"a-web 2"}}},
		{name: "its kustomization", head: map[string]string{"web/kustomization.yaml": "resources: [cm.yaml, extra.yaml]\n", "web/extra.yaml": reuseCM("extra", "1")},
			rendered: []string{"argocd/web"}, objects: map[string][]string{"argocd/web": {"a-extra 1", "a-web 1"}}},
		{name: "a file added below its chart", head: map[string]string{"chart/templates/extra.yaml": reuseCM("extra", "1")},
			rendered: []string{"argocd/chart"}, objects: map[string][]string{"argocd/chart": {"chart ", "extra 1"}}},
		{name: "a file added below its directory", head: map[string]string{"plain/sub/extra.yaml": reuseCM("extra", "1")},
			rendered: []string{"argocd/plain"}, objects: map[string][]string{"argocd/plain": {"extra 1", "plain 1"}}},
		{name: "a directory its ApplicationSet's generator lists", head: map[string]string{"gen/c/kustomization.yaml": "resources: [cm.yaml]\n", "gen/c/cm.yaml": reuseCM("c", "1")},
			fresh: []string{"argocd/gen-c"}, rendered: []string{"argocd/gen-c"}, objects: map[string][]string{"argocd/gen-c": {"c 1"}}},
		{name: "its ApplicationSet", head: map[string]string{"sets/dirs.yaml": reuseFiles["sets/dirs.yaml"] + "      syncPolicy: {automated: {}}\n"},
			fresh: []string{"argocd/gen-a", "argocd/gen-b"}, rendered: []string{"argocd/gen-a", "argocd/gen-b"}},
		{name: "the file its ApplicationSet's generator reads", head: map[string]string{"config/x.json": `{"name": "x", "dir": "web"}`},
			fresh: []string{"argocd/cfg-x"}, rendered: []string{"argocd/cfg-x"}, objects: map[string][]string{"argocd/cfg-x": {"web 1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, hs := reuseSides(t, tc.head)
			ctx := context.Background()
			changed := snapshot.Changed(bs.Index, hs.Index)
			got, err := testEngine().Plan(ctx, bs, hs, changed)
			if err != nil {
				t.Fatal(err)
			}
			base, head := got[0], got[1]
			var fresh, rendered []string
			for _, h := range head.Targets {
				if h.Err != nil {
					t.Errorf("%s: %v", h.Name(), h.Err)
				}
				b := base.Target(h.Name())
				if b == nil || b.Application != h.Application {
					fresh = append(fresh, h.Name())
				}
				if !h.Deferred {
					rendered = append(rendered, h.Name())
				}
				if b != nil && b.Deferred != h.Deferred {
					t.Errorf("%s: deferred %v on base, %v on head", h.Name(), b.Deferred, h.Deferred)
				}
				// What nothing reaches is planned from base's closure.
				if h.Name() == "argocd/other" && (b == nil || b.Closure != h.Closure || !h.Deferred) {
					t.Errorf("argocd/other: closure computed again or rendered (deferred %v)", h.Deferred)
				}
			}
			if !slices.Equal(fresh, tc.fresh) {
				t.Errorf("head made anew %q, want %q", fresh, tc.fresh)
			}
			if !slices.Equal(rendered, tc.rendered) {
				t.Errorf("rendered %q, want %q", rendered, tc.rendered)
			}
			for name, want := range tc.objects {
				var objs []string
				if h := head.Target(name); h != nil {
					for _, o := range h.Objects {
						objs = append(objs, o.GetName()+" "+o.GetDataMap()["v"])
					}
				}
				slices.Sort(objs)
				if !slices.Equal(objs, want) {
					t.Errorf("%s renders %q, want %q", name, objs, want)
				}
			}
			sameAsFull(t, ctx, bs, hs, got)
		})
	}
}

// sameAsFull checks a changed-only plan against the full plan of the
// same sides: the same targets, and what it renders rendered alike.
func sameAsFull(t *testing.T, ctx context.Context, bs, hs *snapshot.Snapshot, got [2]*Result) {
	t.Helper()
	full, err := testEngine().Plan(ctx, bs, hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		names := func(r *Result) []string {
			out := map[string]bool{}
			for _, tg := range r.Targets {
				out[tg.Name()] = true
			}
			return slices.Sorted(maps.Keys(out))
		}
		if g, f := names(got[i]), names(full[i]); !slices.Equal(g, f) {
			t.Fatalf("side %d: targets %q, full plan %q", i, g, f)
		}
		for _, ft := range full[i].Targets {
			gt := got[i].Target(ft.Name())
			if gt.Deferred {
				continue
			}
			if (gt.Err == nil) != (ft.Err == nil) {
				t.Errorf("side %d: %s: error %v, full plan %v", i, ft.Name(), gt.Err, ft.Err)
				continue
			}
			if ft.Err == nil {
				sameObjects(t, ft.Name(), gt.Objects, ft.Objects)
			}
		}
	}
}

// TestFileDependenciesHowEverWritten: a chart's file:// dependencies are
// found whichever way Chart.yaml writes the repository (the quick look
// for "file://" before parsing must not miss an escaped or tagged one).
func TestFileDependenciesHowEverWritten(t *testing.T) {
	for chart, want := range map[string][]string{
		"dependencies: [{name: d, repository: file://../dep}]\n":                 {"dep"},
		"dependencies: [{name: d, repository: \"\\x66ile://../dep\"}]\n":         {"dep"},
		"dependencies: [{name: d, repository: !!binary ZmlsZTovLy4uL2RlcA==}]\n": {"dep"},
		"dependencies: [{name: d, repository: https://charts.example.com}]\n":    nil,
		"name: c\nversion: 0.1.0\n":                                              nil,
		"dependencies: [{name: d, repository: 'file://../../../above'}]\n":       nil,
	} {
		s, err := snapshot.FromFS(fstest.MapFS{"charts/c/Chart.yaml": {Data: []byte(chart)}}, "test")
		if err != nil {
			t.Fatal(err)
		}
		got := fileDependencies(context.Background(), s, "charts/c")
		for i := range want {
			want[i] = "charts/" + want[i]
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: dependencies %q, want %q", chart, got, want)
		}
	}
}
