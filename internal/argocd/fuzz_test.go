package argocd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
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
	files, err := filepath.Glob(filepath.Join("testdata", "parse", "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/parse: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	kustomization := []byte("resources: [a.yaml]\ncommonLabels: {team: a}\nimages: [{name: nginx, newTag: '1'}]\nreplicas: [{name: a, count: 1}]\n")
	repos := NewRepos("https://github.com/example/deploy", "r")
	e := New(Options{Repos: repos})
	snap, err := snapshot.FromFS(fstest.MapFS{"apps/web/a.yaml": {Data: []byte("a: 1\n")}, "apps/api/a.yaml": {Data: []byte("a: 1\n")}}, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := ParseFile(data, "x.yaml")
		for _, a := range d.Applications {
			if a.Name == "" || a.Namespace == "" || a.File != "x.yaml" || len(a.Spec.AllSources()) == 0 {
				t.Fatalf("declared %+v: an Application without a name, a namespace, its file or a source", a)
			}
			refs := map[string]Source{}
			for _, src := range a.Spec.AllSources() {
				if src.Ref != "" {
					refs[src.Ref] = src
				}
			}
			for _, src := range a.Spec.AllSources() {
				_ = repos.Has(src.RepoURL)
				if k := src.Kustomize; k != nil {
					out, err := edit(kustomization, "kustomization.yaml", k, func(string) bool { return true }, map[string]string{"ARGOCD_APP_NAME": a.Name})
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
				if h := src.Helm; h != nil {
					for _, vf := range h.ValueFiles {
						if p, ok := valueFile(cleanPath(src.Path), vf, refs, repos); ok && (p == "" || p[0] == '/') {
							t.Fatalf("value file %q resolves to %q, not a repository path", vf, p)
						}
					}
				}
			}
		}
		for _, n := range d.Invalid {
			if n.File != "x.yaml" || n.Reason == "" {
				t.Fatalf("%+v: no file or reason", n)
			}
		}
		for _, set := range d.Sets {
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
