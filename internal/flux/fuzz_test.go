package flux

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// addSeeds adds every file of dir (under testdata) as a seed.
func addSeeds(f *testing.F, dir string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/%s: %v", dir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// Flux discovery reads every YAML file of a repository that names the
// Flux group: whatever a file holds, it declares Kustomizations or none,
// and never panics (a kustomize replacements file, a top-level list,
// once did: testdata/discover/replacements-list.yaml).
func FuzzDiscover(f *testing.F) {
	addSeeds(f, "discover")
	f.Fuzz(func(t *testing.T, data []byte) {
		found := foundIn(data, "x.yaml")
		ks, ins := found.Kustomizations, found.Instances
		for _, d := range ks {
			if d.Name == "" || d.Namespace == "" || d.File != "x.yaml" {
				t.Fatalf("declared %+v: a Kustomization without a name, a namespace or its file", d)
			}
			if d.NamespaceSet != (d.Object["metadata"].(map[string]any)["namespace"] == d.Namespace) {
				t.Fatalf("declared %+v: NamespaceSet says otherwise than its metadata", d)
			}
			// What the plan reads of it.
			if p := d.Path(); strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == ".." {
				t.Fatalf("path %q climbs above the repository", p)
			}
			d.Source()
			d.Suspended()
		}
		for _, in := range ins {
			if in.Path == "" || strings.HasPrefix(in.Path, "/") || strings.HasPrefix(in.Path, "../") || in.Path == ".." || in.Namespace == "" || in.Name == "" {
				t.Fatalf("instance %+v: no path, a path above the repository, or no sync name", in)
			}
		}
		for _, g := range found.GitRepositories {
			if g.Name == "" || g.Namespace == "" || g.File != "x.yaml" {
				t.Fatalf("GitRepository %+v: no name, namespace or file", g)
			}
			for _, in := range g.Include {
				if p := in.to(); strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == ".." {
					t.Fatalf("include %+v copies above the artifact", in)
				}
			}
		}
		// ArtifactGenerators are read from builds' objects, which hold
		// what a repository file says.
		objs, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
		if err != nil {
			return
		}
		arts := map[string]*artifact{}
		New(Options{}).artifacts(objs, arts)
		for id, a := range arts {
			if a.why == "" && (strings.HasPrefix(a.root, "/") || strings.HasPrefix(a.root, "..") || len(a.within) == 0) {
				t.Fatalf("artifact %s %+v: a root above the repository, or holding nothing", id, a)
			}
		}
	})
}

// flux-operator's ResourceSets are templates from the repository: kplan
// renders whatever one holds (inputs, providers, templates) into objects
// or a reason it does not, never panics, and every object it makes
// carries its ResourceSet's owner labels.
func FuzzResourceSets(f *testing.F) {
	addSeeds(f, "resourceset")
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := yamldocs.Mappings(data)
		if err != nil {
			return
		}
		res := resourceSets(objs, nil)
		for _, o := range res.objects {
			if o.GetLabels()[rsetOwnerGroup+"/name"] == "" {
				t.Fatalf("%s %s made without its owner label", o.GetKind(), o.GetName())
			}
		}
	})
}
