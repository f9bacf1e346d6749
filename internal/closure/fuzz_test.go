package closure_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// mapSource is a tree of files in memory; directories are the files'
// parents.
type mapSource map[string][]byte

func (m mapSource) Stat(rel string) closure.Kind {
	if _, ok := m[rel]; ok {
		return closure.File
	}
	for p := range m {
		if rel == "." || strings.HasPrefix(p, rel+"/") {
			return closure.Dir
		}
	}
	return closure.Absent
}

func (m mapSource) ReadFile(rel string) ([]byte, error) {
	if data, ok := m[rel]; ok {
		return data, nil
	}
	return nil, os.ErrNotExist
}

// seeds are the files of testdata/kustomizations.
func seeds(f *testing.F) [][]byte { return fuzzseed.Files(f, "testdata/kustomizations/*") }

// The closure reads every kustomization of a repository, as written in a
// pull request: whatever a kustomization and the file it names hold, the
// closure is computed without a panic (a recovered one is its Err), its
// paths sorted and in the repository, and the probe agrees with it on
// whether a change meets it.
func FuzzClosure(f *testing.F) {
	all := seeds(f)
	for _, k := range all {
		for _, x := range all {
			f.Add(k, x)
		}
	}
	f.Fuzz(func(t *testing.T, kustomization, file []byte) {
		src := mapSource{"o/kustomization.yaml": kustomization, "o/x.yaml": file, "o/base/kustomization.yaml": file}
		for _, helm := range []bool{false, true} {
			b := closure.New(src, closure.Options{EnableHelm: helm, Memo: closure.NewMemo()})
			c := b.Overlay("o")
			if c.Err != nil {
				t.Fatalf("helm=%v: %v", helm, c.Err)
			}
			if !slices.IsSorted(c.Paths) || len(c.Paths) == 0 || c.Paths[0] != "." {
				t.Fatalf("helm=%v: paths %q, want sorted, from the top", helm, c.Paths)
			}
			for _, p := range c.Paths {
				if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
					t.Fatalf("helm=%v: path %q is outside the repository", helm, p)
				}
			}
			for _, changed := range []string{"o/x.yaml", "o/base/kustomization.yaml", "elsewhere"} {
				set := map[string]bool{changed: true}
				meets, pc := closure.New(src, closure.Options{EnableHelm: helm}).Probe(set).Overlay("o")
				if pc.Err != nil {
					t.Fatalf("helm=%v: probe: %v", helm, pc.Err)
				}
				if meets != c.Meets(set) {
					t.Fatalf("helm=%v: the probe says a change of %s meets the closure: %v; the closure's paths say %v", helm, changed, meets, !meets)
				}
			}
		}
	})
}

// Memo.JSON converts every kustomization file from YAML to JSON for
// discovery and the closures: whatever the file holds, it returns JSON or
// an error, without a panic, and the same on a second call.
func FuzzJSON(f *testing.F) {
	for _, k := range seeds(f) {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := closure.NewMemo()
		j, err := m.JSON(data)
		if err == nil && !json.Valid(j) {
			t.Fatalf("JSON of %q is not JSON: %q", data, j)
		}
		j2, err2 := m.JSON(data)
		if string(j2) != string(j) || (err == nil) != (err2 == nil) {
			t.Fatalf("a second conversion differs: %q %v, then %q %v", j, err, j2, err2)
		}
	})
}

// panicSource is a Source with a bug: reading one file panics.
type panicSource struct {
	mapSource
	file string
}

func (p panicSource) ReadFile(rel string) ([]byte, error) {
	if rel == p.file {
		panic("injected: read " + rel)
	}
	return p.mapSource.ReadFile(rel)
}

// A panic reading one kustomization is the Err of the closures that
// build it (the planner fails those overlays with it), which are
// unbounded, so that no plan skips them; other overlays' closures are
// computed as ever.
func TestPanicReadingAKustomizationIsItsClosuresErr(t *testing.T) {
	src := panicSource{mapSource{
		"a/kustomization.yaml":    []byte("resources: [../base]\n"),
		"b/kustomization.yaml":    []byte("resources: [b.yaml]\n"),
		"b/b.yaml":                []byte("kind: ConfigMap\n"),
		"base/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
	}, "base/kustomization.yaml"}
	b := closure.New(src, closure.Options{})
	a := b.Overlay("a")
	if c := crash.As(a.Err); c == nil || c.Value != "injected: read base/kustomization.yaml" || !strings.Contains(a.Err.Error(), "base") || a.Unbounded == "" {
		t.Errorf("a: Err %v, Unbounded %q; want the panic reading base, unbounded", a.Err, a.Unbounded)
	}
	if c := b.Overlay("b"); c.Err != nil || c.Unbounded != "" || !slices.Contains(c.Paths, "b/b.yaml") {
		t.Errorf("b: %+v, want its closure", c)
	}
}
