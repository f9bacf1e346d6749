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
