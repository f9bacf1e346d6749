package argocd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Argo CD discovery reads every YAML file of a repository naming
// argoproj.io, and an Application's settings become kustomization edits,
// include/exclude globs and value file paths: whatever a file holds,
// it declares Applications with a name, a namespace and at least one
// source, or none, its ApplicationSets make Applications or fail with
// ErrGenerator, and its settings edit a kustomization into YAML, or
// fail with an error, never a panic.
func FuzzParseFile(f *testing.F) {
	addParseFileSeeds(f)
	repos := NewRepos("https://github.com/example/deploy", "r")
	// The seeds of testdata/generators name the repository with .git.
	repos = NewRepos("https://github.com/example/deploy", "https://github.com/example/deploy.git", "r")
	e := New(Options{Repos: repos, ClustersFile: ".kplan.yaml", Clusters: []Cluster{{Name: "prod", Server: "https://prod.example.com", Labels: map[string]string{"env": "prod"}}}})
	snap, err := snapshot.FromFS(fstest.MapFS{
		"apps/web/a.yaml": {Data: []byte("a: 1\n")}, "apps/api/a.yaml": {Data: []byte("a: 1\n")},
		"config/web/config.json": {Data: []byte(`{"app": {"name": "web", "dir": "apps/web"}, "env": "prod"}`)},
		"config/api/config.yaml": {Data: []byte("- app: {name: api, dir: apps/api}\n  env: dev\n")},
	}, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := ParseFile(data, "x.yaml")
		if len(d.Applications)+len(d.Sets) > 0 && !bytes.Contains(data, []byte("Application")) && !bytes.Contains(data, []byte(`\`)) && !bytes.Contains(data, []byte("!!")) {
			t.Errorf("the file declares %d Applications and %d ApplicationSets, but Discover's prefilter leaves it unparsed", len(d.Applications), len(d.Sets))
		}
		for _, a := range d.Applications {
			checkParsedApplication(t, a, repos)
		}
		checkInvalid(t, d.Invalid)
		checkGeneratedApplications(t, e, snap, data, d.Sets)
	})
}

// addParseFileSeeds adds FuzzParseFile's seeds: the files of
// testdata/parse and the ApplicationSets of testdata/generators/sets.
func addParseFileSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "parse", "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/parse: %v", err)
	}
	sets, err := filepath.Glob(filepath.Join("testdata", "generators", "sets", "*"))
	if err != nil || len(sets) == 0 {
		f.Fatalf("no seeds in testdata/generators/sets: %v", err)
	}
	files = append(files, sets...)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// fuzzKustomization is the kustomization FuzzParseFile's Applications'
// kustomize settings edit.
var fuzzKustomization = []byte("resources: [a.yaml]\ncommonLabels: {team: a}\nimages: [{name: nginx, newTag: '1'}]\nreplicas: [{name: a, count: 1}]\n")

// checkParsedApplication: a declared Application has a name, a
// namespace, its file and a source, and each source's settings hold.
func checkParsedApplication(t *testing.T, a *Application, repos Repos) {
	t.Helper()
	if a.Name == "" || a.Namespace == "" || a.File != "x.yaml" || len(a.Spec().AllSources()) == 0 {
		t.Fatalf("declared %+v: an Application without a name, a namespace, its file or a source", a)
	}
	refs := map[string]Source{}
	for _, src := range a.Spec().AllSources() {
		if src.Ref != "" {
			refs[src.Ref] = src
		}
	}
	for _, src := range a.Spec().AllSources() {
		checkParsedSource(t, a, src, refs, repos)
	}
}

// checkParsedSource: a source's kustomize settings edit a kustomization
// into YAML (or fail), its directory globs compile (or fail), its value
// files resolve inside the repository or a chart, and its Helm
// parameters keep their commas escaped.
func checkParsedSource(t *testing.T, a *Application, src Source, refs map[string]Source, repos Repos) {
	t.Helper()
	_ = repos.Has(src.RepoURL)
	if k := src.Kustomize; k != nil {
		out, err := edit(fuzzKustomization, "kustomization.yaml", k, func(string) bool { return true }, map[string]string{"ARGOCD_APP_NAME": a.Name})
		if err == nil {
			var m map[string]any
			if err := sigsyaml.Unmarshal(out, &m); err != nil {
				t.Fatalf("edited kustomization does not parse: %v\n%s", err, out)
			}
		}
	}
	if dir := src.Directory; dir != nil {
		_, _ = globs(dir.Include)
		_, _ = globs(dir.Exclude)
	}
	dir := cleanPath(src.Path)
	if src.Chart != "" {
		dir = ""
	}
	for _, vf := range helmFiles(src) {
		if p, _, ok := resolve(dir, vf, refs, repos, map[string]string{"ARGOCD_APP_NAME": a.Name}); ok && (p == "" || p[0] == '/' || p == ".." || strings.HasPrefix(p, "../")) {
			t.Fatalf("value file %q resolves to %q, not a repository or chart path", vf, p)
		}
	}
	if h := src.Helm; h != nil {
		for _, p := range h.Parameters {
			if esc := escapeSet(p.Value); strings.Count(esc, ",") < strings.Count(p.Value, ",") {
				t.Fatalf("escapeSet(%q) = %q lost a comma", p.Value, esc)
			}
		}
	}
}

// checkInvalid: an object that does not parse names its file and why.
func checkInvalid(t *testing.T, invalid []Named) {
	t.Helper()
	for _, n := range invalid {
		if n.File != "x.yaml" || n.Reason == "" {
			t.Fatalf("%+v: no file or reason", n)
		}
	}
}

// checkGeneratedApplications: each ApplicationSet makes Applications
// with a name, its namespace and its file, or fails with ErrGenerator.
func checkGeneratedApplications(t *testing.T, e *Engine, snap *snapshot.Snapshot, data []byte, sets []*AppSet) {
	t.Helper()
	for _, set := range sets {
		if bytes.Contains(data, []byte("range")) {
			// A template may range over a number without writing:
			// bounded by time (TestGoTemplateIsBounded), its abandoned
			// loop would slow every later input of the worker.
			continue
		}
		apps, err := e.generate(context.Background(), snap, set)
		if err != nil && !errors.Is(err, ErrGenerator) {
			t.Fatalf("ApplicationSet %s: %v, not an ErrGenerator", set.ID(), err)
		}
		for _, a := range apps {
			if a.Name == "" || a.Namespace != set.Namespace || a.File != "x.yaml" {
				t.Fatalf("ApplicationSet %s made %+v", set.ID(), a)
			}
		}
	}
}

// A git files generator reads any file of the repository its paths
// match: whatever a file holds, the ApplicationSets reading it (default
// syntax and Go templates, in a matrix and a merge) make Applications
// or fail with ErrGenerator naming it, never a panic.
func FuzzGitFile(f *testing.F) {
	for _, p := range []string{"config/web/config.json", "config/api/config.yaml", "config/workers/config.yaml", "config/nested/deep/config.yaml", "sets/list.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "generators", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: [1, {b: null}]\nc: {}\n"))
	f.Add([]byte("[]"))
	var sets []*AppSet
	for _, name := range []string{"files.yaml", "files-go.yaml", "matrix.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "generators", "sets", name))
		if err != nil {
			f.Fatal(err)
		}
		sets = append(sets, ParseFile(data, name).Sets...)
	}
	merge := "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: m}\nspec:\n  goTemplate: true\n" +
		"  generators: [{merge: {mergeKeys: [env], generators: [{list: {elements: [{env: prod}]}}, {git: {repoURL: https://github.com/example/deploy.git, files: [{path: 'config/*'}]}}]}, selector: {matchLabels: {env: prod}}}]\n" +
		"  template: {metadata: {name: '{{ .env }}'}, spec: {source: {repoURL: https://github.com/example/deploy.git, path: apps/web}, destination: {name: in-cluster}}}\n"
	sets = append(sets, ParseFile([]byte(merge), "merge.yaml").Sets...)
	if len(sets) != 5 {
		f.Fatalf("%d ApplicationSets, want 5", len(sets))
	}
	e := New(Options{Repos: NewRepos("https://github.com/example/deploy.git"), ClustersFile: "config/web/config.json", Clusters: []Cluster{{Name: "prod", Server: "https://prod.example.com"}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := snapshot.FromFS(fstest.MapFS{
			"apps/web/a.yaml":        {Data: []byte("a: 1\n")},
			"apps/api/a.yaml":        {Data: []byte("a: 1\n")},
			"config/web/config.json": {Data: data},
			"config/api/config.yaml": {Data: data},
		}, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range sets {
			apps, err := e.generate(context.Background(), snap, set)
			if err != nil && !errors.Is(err, ErrGenerator) {
				t.Fatalf("ApplicationSet %s: %v, not an ErrGenerator", set.ID(), err)
			}
			for _, a := range apps {
				if a.Name == "" {
					t.Fatalf("ApplicationSet %s made %+v: no name", set.ID(), a)
				}
				for _, p := range a.Inputs {
					if _, ok := snap.Index.ID(p); !ok {
						t.Fatalf("ApplicationSet %s made %s from %s, not a file of the repository", set.ID(), a.ID(), p)
					}
				}
			}
		}
	})
}

// FuzzDirectoryManifests: a directory source's file, whatever it holds,
// gives objects or an error, never a crash.
func FuzzDirectoryManifests(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: on, y: 'off', z: 0755, w: 1:20}\n",
		"---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}, data: {n: no}}\n",
		`[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]`,
		"a: [on, yes, ~, .inf, -.Inf, 1e3, 0x1F, Y]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifests(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if _, err := o.String(); err != nil {
				t.Fatalf("an object that does not print: %v", err)
			}
		}
	})
}
