package argocd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testhelm"
)

// generatorsEngine is testEngine with the clusters testdata/generators'
// .kplan.yaml declares.
func generatorsEngine() *Engine {
	return New(Options{Repos: NewRepos(repoURL), Revisions: []string{"main"}, ClustersFile: ".kplan.yaml", Clusters: []Cluster{
		{Name: "prod", Server: "https://prod.example.com", Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"owner": "shop"}},
		{Name: "staging", Server: "https://staging.example.com/", Labels: map[string]string{"env": "staging"}},
	}})
}

// Every generator of testdata/generators makes the Applications Argo
// CD's controller makes, each rendered from its source as kustomize
// builds it, with the files its parameters came from among its inputs:
// git files (default syntax flattened, Go templates nested,
// pathParamPrefix, a list file, `*` crossing directories, an excluded
// file), clusters (selector, values, labels and annotations), a matrix
// whose second generator reads the first's parameters, a matrix of
// clusters and directories with a selector, a merge, and a list with a
// selector and a templatePatch.
func TestApplicationSetGeneratorsMakeArgoCDsApplications(t *testing.T) {
	s, err := snapshot.FromFS(os.DirFS("testdata/generators"), "test")
	if err != nil {
		t.Fatal(err)
	}
	r, err := generatorsEngine().Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) > 0 {
		t.Errorf("skipped %+v", r.Skipped)
	}
	type app struct{ path, ns, inputs, extra string }
	got := map[string]app{}
	for _, tg := range r.Targets {
		if tg.Err != nil {
			t.Errorf("%s: %v", tg.Name(), tg.Err)
			continue
		}
		md, _ := tg.Object()["metadata"].(map[string]any)
		var extra []string
		if l, ok := md["labels"].(map[string]any); ok {
			extra = append(extra, "labels "+l["file"].(string)+" "+l["dir"].(string))
		}
		if a, ok := md["annotations"].(map[string]any); ok {
			extra = append(extra, "owner "+a["owner"].(string))
		}
		if sp := tg.Spec().SyncPolicy; sp != nil && sp.Automated != nil && sp.Automated.Prune {
			extra = append(extra, "prune")
		}
		if fs, _ := md["finalizers"].([]any); len(fs) == 0 {
			extra = append(extra, "no finalizer")
		}
		got[tg.Name()] = app{tg.Spec().AllSources()[0].Path, tg.Namespace, strings.Join(tg.Inputs, ","), strings.Join(extra, "; ")}
	}
	want := map[string]app{
		"in-cluster: argocd/web-files":      {"apps/web", "web-team", "config/web/config.json", "labels config.json web"},
		"in-cluster: argocd/api-files":      {"apps/api", "api-team", "config/api/config.yaml", "labels config.yaml api"},
		"in-cluster: argocd/worker-a-files": {"apps/worker", "worker-a-team", "config/workers/config.yaml", "labels config.yaml workers"},
		"in-cluster: argocd/worker-b-files": {"apps/worker", "worker-b-team", "config/workers/config.yaml", "labels config.yaml workers"},
		"in-cluster: argocd/deep-files":     {"apps/web", "deep-team", "config/nested/deep/config.yaml", "labels config.yaml nested"},
		"in-cluster: argocd/web-go":         {"apps/web", "prod-web", "config/web/config.json", ""},
		"in-cluster: argocd/api-go":         {"apps/api", "staging-api", "config/api/config.yaml", ""},
		"prod: argocd/web-prod":             {"apps/web", "web-prod", ".kplan.yaml", "owner shop"},
		"staging: argocd/web-staging":       {"apps/web", "web-staging", ".kplan.yaml", "owner {{metadata.annotations.owner}}"}, // the default syntax leaves an unknown parameter
		"in-cluster: argocd/api-staging-m":  {"apps/api", "staging", "config/api/config.yaml", ""},
		"in-cluster: argocd/web-prod-m":     {"apps/web", "prod", "config/web/config.json", ""},
		"prod: argocd/prod-web":             {"apps/web", "web-prod", ".kplan.yaml", ""},
		"in-cluster: argocd/merged-api":     {"apps/api", "api-merged", "", ""},
		"in-cluster: argocd/merged-worker":  {"apps/worker", "worker-one", "", ""},
		"in-cluster: argocd/patched-api":    {"apps/api", "patched-prod", "", "prune; no finalizer"},
		"in-cluster: argocd/patched-web":    {"apps/web", "patched-staging", "", "no finalizer"},
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s is made, which Argo CD does not make", k)
		}
	}
	// Each render is kustomize build of the Application's path.
	kz := filepath.Join(testhelm.Dir(t), "kustomize")
	built := map[string][]byte{}
	for _, tg := range r.Targets {
		p := tg.Spec().AllSources()[0].Path
		if built[p] == nil {
			built[p] = run(t, filepath.Join("testdata/generators", p), kz, "build", ".")
		}
		sameObjects(t, tg.Name(), tg.Objects, parseStream(t, built[p]))
	}
	// A cluster's Application reads .kplan.yaml, so its closure holds it.
	if c := r.Target("prod: argocd/web-prod").Closure; !slices.Contains(c.Paths, ".kplan.yaml") {
		t.Errorf("web-prod's closure %q lacks .kplan.yaml", c.Paths)
	}
}

// The parameters of a git files generator's file are Argo CD's: the
// default syntax flattens the content with dots and prints values; Go
// templates keep it nested; both add the path parameters.
func TestGitFileParams(t *testing.T) {
	fs := fstest.MapFS{
		"cfg/My_App/config.json": {Data: []byte(`{"a": {"b": {"c": 1.5}}, "list": ["x", "y"], "n": 3, "on": true, "empty": {}}`)},
		"cfg/list.yaml":          {Data: []byte("- k: one\n- k: two\n")},
		"cfg/empty.yaml":         {Data: []byte("")},
	}
	s, err := snapshot.FromFS(fs, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		goTpl bool
		file  string
		want  []map[string]any
	}{
		{"default syntax flattened", false, "cfg/My_App/config.json", []map[string]any{{
			"a.b.c": "1.5", "list.0": "x", "list.1": "y", "n": "3", "on": "true",
			"path": "cfg/My_App", "path.basename": "My_App", "path.basenameNormalized": "my-app", "path[0]": "cfg", "path[1]": "My_App",
			"path.filename": "config.json", "path.filenameNormalized": "config.json",
		}}},
		{"Go templates nested", true, "cfg/My_App/config.json", []map[string]any{{
			"a": map[string]any{"b": map[string]any{"c": 1.5}}, "list": []any{"x", "y"}, "n": float64(3), "on": true, "empty": map[string]any{},
			"path": map[string]any{"path": "cfg/My_App", "basename": "My_App", "basenameNormalized": "my-app", "segments": []any{"cfg", "My_App"},
				"filename": "config.json", "filenameNormalized": "config.json"},
		}}},
		{"a list, one set per element", false, "cfg/list.yaml", []map[string]any{
			{"k": "one", "path": "cfg", "path.basename": "cfg", "path.basenameNormalized": "cfg", "path[0]": "cfg", "path.filename": "list.yaml", "path.filenameNormalized": "list.yaml"},
			{"k": "two", "path": "cfg", "path.basename": "cfg", "path.basenameNormalized": "cfg", "path[0]": "cfg", "path.filename": "list.yaml", "path.filenameNormalized": "list.yaml"},
		}},
		{"an empty file, one set of path parameters", false, "cfg/empty.yaml", []map[string]any{
			{"path": "cfg", "path.basename": "cfg", "path.basenameNormalized": "cfg", "path[0]": "cfg", "path.filename": "empty.yaml", "path.filenameNormalized": "empty.yaml"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &genCtx{e: testEngine(), ctx: context.Background(), s: s, spec: appSetSpec{GoTemplate: tc.goTpl}}
			sets, err := g.git(gitGenerator{RepoURL: repoURL, Files: []gitItem{{Path: tc.file}}})
			if err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			for _, ps := range sets {
				got = append(got, ps.p)
				if !slices.Equal(ps.inputs, []string{tc.file}) {
					t.Errorf("inputs %q, want %s", ps.inputs, tc.file)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := sigsyaml.Marshal(got)
				w, _ := sigsyaml.Marshal(tc.want)
				t.Errorf("params:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// A git files generator's paths match as git ls-files matches them,
// Argo CD's default: `*` and `?` cross directories, a path without
// wildcards names a file or a directory above files.
func TestPathspecMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, file string
		want          bool
	}{
		{"config/*/config.json", "config/a/config.json", true},
		{"config/*/config.json", "config/a/b/config.json", true},
		{"config/*.yaml", "config/a/b.yaml", true},
		{"config/*.yaml", "other/b.yaml", false},
		{"config/a/config.json", "config/a/config.json", true},
		{"config/a", "config/a/config.json", true},
		{"config/a", "config/ab/config.json", false},
		{"config/?/c.json", "config/a/c.json", true},
		{"config/[ab]/c.json", "config/b/c.json", true},
		{"config/[!ab]/c.json", "config/b/c.json", false},
		{"config/[!ab]/c.json", "config/c/c.json", true},
		{"config/[ab/c.json", "config/a/c.json", false},
		{`config/\*.json`, "config/*.json", true},
		{`config/\*.json`, "config/a.json", false},
		{"./config/a.json", "config/a.json", true},
		{"**/config.json", "a/b/config.json", true},
	} {
		if got := pathspecMatcher(tc.pattern)(tc.file); got != tc.want {
			t.Errorf("pathspecMatcher(%q)(%q) = %v, want %v", tc.pattern, tc.file, got, tc.want)
		}
	}
}

// With Argo CD's applicationset.enableNewGitFileGlobbing (.kplan.yaml
// argocdNewGitFileGlobbing), `*` stays within a directory and `**`
// crosses them, so a files generator reads other files.
func TestNewGitFileGlobbing(t *testing.T) {
	s, err := snapshot.FromFS(os.DirFS("testdata/generators"), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pattern     string
		newGlobbing bool
		want        []string
	}{
		{"config/*/config.*", false, []string{"config/api/config.yaml", "config/nested/deep/config.yaml", "config/old/config.yaml", "config/web/config.json", "config/workers/config.yaml"}},
		{"config/*/config.*", true, []string{"config/api/config.yaml", "config/old/config.yaml", "config/web/config.json", "config/workers/config.yaml"}},
		{"config/**/config.yaml", true, []string{"config/api/config.yaml", "config/nested/deep/config.yaml", "config/old/config.yaml", "config/workers/config.yaml"}},
		{"config/{web,api}/*", true, []string{"config/api/config.yaml", "config/web/config.json"}},
	} {
		if got := filesMatching(s, []gitItem{{Path: tc.pattern}}, tc.newGlobbing); !slices.Equal(got, tc.want) {
			t.Errorf("%s (new globbing %v): %q, want %q", tc.pattern, tc.newGlobbing, got, tc.want)
		}
	}
}

// Names normalize as the controller's SanitizeName: lower case, '-' for
// other characters than letters, digits, '-' and '.', trimmed.
func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"My_App":                 "my-app",
		"config.json":            "config.json",
		"-x.":                    "x",
		"a b/c":                  "a-b-c",
		strings.Repeat("a", 300): strings.Repeat("a", 253),
	} {
		if got := sanitizeName(in); got != want {
			t.Errorf("sanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Label selectors (a generator's, a clusters generator's) match as
// Kubernetes' do, without limits on values.
func TestLabelSelector(t *testing.T) {
	labels := map[string]string{"env": "prod", "url": "https://x.example.com"}
	for _, tc := range []struct {
		sel  string
		want bool
		err  string
	}{
		{`{}`, true, ""},
		{`{matchLabels: {env: prod}}`, true, ""},
		{`{matchLabels: {env: dev}}`, false, ""},
		{`{matchLabels: {url: "https://x.example.com"}}`, true, ""},
		{`{matchExpressions: [{key: env, operator: In, values: [dev, prod]}]}`, true, ""},
		{`{matchExpressions: [{key: env, operator: NotIn, values: [prod]}]}`, false, ""},
		{`{matchExpressions: [{key: team, operator: NotIn, values: [a]}]}`, true, ""},
		{`{matchExpressions: [{key: env, operator: Exists}]}`, true, ""},
		{`{matchExpressions: [{key: env, operator: DoesNotExist}]}`, false, ""},
		{`{matchExpressions: [{key: env, operator: Gt, values: ["1"]}]}`, false, "operator \"Gt\""},
	} {
		var ls labelSelector
		if err := sigsyaml.Unmarshal([]byte(tc.sel), &ls); err != nil {
			t.Fatal(err)
		}
		got, err := ls.matches(labels)
		if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("%s: %v, %v; want %v, %q", tc.sel, got, err, tc.want, tc.err)
		}
	}
}

// What kplan cannot expand is said, never guessed: the ApplicationSet
// fails with ErrGenerator and the reason, naming the generator.
func TestGeneratorErrorsSayWhy(t *testing.T) {
	s, err := snapshot.FromFS(fstest.MapFS{
		"apps/a/cm.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")},
		"bad/config.yaml": {Data: []byte("a: [\n")},
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	list := func(els string) string { return "{list: {elements: " + els + "}}" }
	git := "{git: {repoURL: " + repoURL + ", revision: HEAD, directories: [{path: 'apps/*'}]}}"
	for _, tc := range []struct {
		name, generators, want string
		goTpl                  bool
	}{
		{"scm provider", "[{scmProvider: {github: {organization: o}}}]", "generators[0]: the scmProvider generator is not evaluated (it lists a forge's repositories at run time)", false},
		{"pull request", "[{pullRequest: {github: {owner: o, repo: r}}}]", "the pullRequest generator is not evaluated", false},
		{"two kinds in one entry", "[{list: {elements: []}, clusters: {}}]", `one generator per entry, found ["clusters" "list"]`, false},
		{"matrix of three", "[{matrix: {generators: [" + list("[{a: x}]") + ", " + list("[{b: two}]") + ", " + list("[{c: z}]") + "]}}]", "generators[0].matrix: has 3 generators; a matrix combines two", false},
		{"matrix clash", "[{matrix: {generators: [" + list("[{a: one}]") + ", " + list("[{a: two}]") + "]}}]", "generators[0].matrix: both generators set a", false},
		{"merge without keys", "[{merge: {generators: [" + list("[{a: one}]") + ", " + list("[{a: two}]") + "]}}]", "generators[0].merge: no mergeKeys", false},
		{"merge duplicate keys", "[{merge: {mergeKeys: [a], generators: [" + list("[{a: one}, {a: one}]") + ", " + list("[{a: two}]") + "]}}]", `generators[0].merge.generators[0] makes two parameter sets with mergeKeys {"a":"one"}`, false},
		{"nested too deep", "[{matrix: {generators: [{matrix: {generators: [{matrix: {generators: [" + list("[]") + "," + list("[]") + "]}}, " + list("[]") + "]}}, " + git + "]}}]", "Argo CD nests them one level", false},
		{"default syntax non-string", "[" + list("[{a: 1}]") + "]", "elements[0].a: not a string", false},
		{"git file that does not parse", "[{git: {repoURL: " + repoURL + ", revision: HEAD, files: [{path: bad/config.yaml}]}}]", "bad/config.yaml: neither a YAML/JSON object nor a list of objects", false},
		{"git of another revision", "[{git: {repoURL: " + repoURL + ", revision: v1, directories: [{path: 'apps/*'}]}}]", "tracks another revision (v1)", false},
		{"elementsYaml not a list", "[{list: {elementsYaml: 'a: b'}}]", "elementsYaml: not a YAML list of maps", false},
		{"bad selector", "[{list: {elements: [{a: x}]}, selector: {matchExpressions: [{key: a, operator: Gt}]}}]", `operator "Gt"`, false},
		{"template error", "[" + list("[{a: x}]") + "]", "map has no entry for key", true},
		{"unknown setting", "[{clusters: {flatList: true}}]", `generators[0].clusters: json: unknown field "flatList"`, false},
		{"duplicate names", "[" + list("[{a: x}]") + ", " + list("[{a: x}]") + "]", "generators[0] and generators[1] both make an Application named {{ .missing }}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s}\nspec:\n  goTemplate: " + map[bool]string{true: "true", false: "false"}[tc.goTpl] +
				"\n  goTemplateOptions: [missingkey=error]\n  generators: " + tc.generators +
				"\n  template: {metadata: {name: '{{ .missing }}'}, spec: {source: {repoURL: " + repoURL + ", path: apps/a}, destination: {name: in-cluster}}}\n"
			d := ParseFile([]byte(obj), "s.yaml")
			if len(d.Sets) != 1 {
				t.Fatalf("parsed %+v", d)
			}
			_, err := testEngine().generate(context.Background(), s, d.Sets[0])
			if !errors.Is(err, ErrGenerator) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want ErrGenerator saying %q", err, tc.want)
			}
		})
	}
}

// A templatePatch merges into the Application as the controller's
// strategic merge patch does: maps merged, lists replaced, null
// deleting, finalizers merged; directives are refused.
func TestTemplatePatch(t *testing.T) {
	app := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1", "w": "2"}, "finalizers": []any{ResourcesFinalizer}},
		"spec":     map[string]any{"sources": []any{map[string]any{"path": "a"}}, "project": "default"},
	}
	for _, tc := range []struct{ name, patch, want, err string }{
		{"maps merge, lists replace", "metadata: {labels: {w: '{{ .v }}', z: '3'}}\nspec: {sources: [{path: b}]}",
			"metadata:\n  finalizers:\n  - resources-finalizer.argocd.argoproj.io\n  labels:\n    w: v\n    x: \"1\"\n    z: \"3\"\n  name: a\nspec:\n  project: default\n  sources:\n  - path: b\n", ""},
		{"null deletes", "spec: {project: null}",
			"metadata:\n  finalizers:\n  - resources-finalizer.argocd.argoproj.io\n  labels:\n    w: \"2\"\n    x: \"1\"\n  name: a\nspec:\n  sources:\n  - path: a\n", ""},
		{"finalizers merge", "metadata: {finalizers: [other]}",
			"metadata:\n  finalizers:\n  - resources-finalizer.argocd.argoproj.io\n  - other\n  labels:\n    w: \"2\"\n    x: \"1\"\n  name: a\nspec:\n  project: default\n  sources:\n  - path: a\n", ""},
		{"empty after templating", "{{ if false }}spec: {project: x}{{ end }}",
			"metadata:\n  finalizers:\n  - resources-finalizer.argocd.argoproj.io\n  labels:\n    w: \"2\"\n    x: \"1\"\n  name: a\nspec:\n  project: default\n  sources:\n  - path: a\n", ""},
		{"directive", "spec: {sources: [{$patch: delete}]}", "", "strategic merge directives"},
		{"not a map", "- a", "", "not a YAML map"},
	} {
		got, err := templatePatch(nil, app, tc.patch, map[string]any{"v": "v"}, true, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if y, _ := sigsyaml.Marshal(got); string(y) != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, y, tc.want)
		}
	}
}
