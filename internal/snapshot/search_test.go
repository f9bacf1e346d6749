package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSearchYAMLAgreesWithContaining pins that answers git grep found
// (SearchYAML) are the answers reading every content gives (Containing),
// over generated trees: needles at the start, middle and end of files,
// across lines, in binary content, in files of other kinds, in names
// only, through symlinks, several needles in one file, and a repository
// whose git config asks grep for line numbers, columns, colours and full
// names.
func TestSearchYAMLAgreesWithContaining(t *testing.T) {
	needles := []string{"kustomize.toolkit.fluxcd.io", "argoproj.io", "flux-instance", "x"}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 34))
			files := map[string]string{}
			var paths []string
			exts := []string{".yaml", ".yml", ".json", ".txt", ".YAML"}
			for i := range 40 + r.IntN(60) {
				var b strings.Builder
				fmt.Fprintf(&b, "file %d\n", i) // no two alike: a tree of copies is not grepped
				for range r.IntN(6) {
					switch r.IntN(5) {
					case 0:
						b.WriteString(needles[r.IntN(len(needles))])
					case 1:
						b.WriteString("\x00\xff binary ")
					case 2:
						b.WriteString("kustomize.toolkit.\nfluxcd.io") // split: no match
					default:
						b.WriteString("apiVersion: v1\nkind: ConfigMap\n")
					}
				}
				b.WriteString("end\n")
				name := fmt.Sprintf("d%d/%s-%d%s", r.IntN(4), needles[i%len(needles)], i, exts[r.IntN(len(exts))])
				files[name] = b.String()
				paths = append(paths, name)
			}
			// Links to YAML files, and to a directory of them.
			files["links/to.yaml"] = "->../" + paths[0]
			files["linkdir"] = "->d1"
			dir := commitFiles(t, files)
			git(t, dir, "config", "grep.lineNumber", "true")
			git(t, dir, "config", "grep.column", "true")
			git(t, dir, "config", "color.grep", "always")
			git(t, dir, "config", "grep.fullName", "true")
			ctx := context.Background()
			read, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
			if err != nil {
				t.Fatal(err)
			}
			grepped, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
			if err != nil {
				t.Fatal(err)
			}
			if err := grepped.SearchYAML(ctx, 0, needles...); err != nil {
				t.Fatal(err)
			}
			if n := grepped.blobs.unsearched(yamlIDs(grepped), needles); n != 0 {
				t.Fatalf("git grep left %d YAML contents unsearched", n)
			}
			all := read.Index.Paths()
			want, err := read.ContainingEach(ctx, all, needles...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := grepped.ContainingEach(ctx, all, needles...)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range needles {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("files holding %q:\n git grep %v\n     read %v", n, got[i], want[i])
				}
			}
			if len(want[0]) == 0 || len(want[1]) == 0 {
				t.Errorf("the generated tree holds no %q or %q: the test proves nothing", needles[0], needles[1])
			}
		})
	}
}

// TestSearchYAMLLeavesSmallSearchesToTheBatch pins that a tree with fewer
// unsearched contents than asked is not grepped.
func TestSearchYAMLLeavesSmallSearchesToTheBatch(t *testing.T) {
	dir := commitFiles(t, map[string]string{"a.yaml": "argoproj.io\n", "b.yaml": "none\n"})
	ctx := context.Background()
	s, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SearchYAML(ctx, 3, "argoproj.io"); err != nil {
		t.Fatal(err)
	}
	if n := s.blobs.unsearched(yamlIDs(s), []string{"argoproj.io"}); n != 2 {
		t.Errorf("%d contents unsearched after a search of 2 asking for 3; want both left", n)
	}
}

func yamlIDs(s *Snapshot) map[string]bool {
	ids := map[string]bool{}
	for p, id := range s.tree.files {
		if IsYAML(p) {
			ids[id] = true
		}
	}
	return ids
}

// TestSearchYAMLLeavesCopiesToTheBatch pins that a tree whose YAML files
// are mostly copies (a monorepo of one application many times) is read
// content by content, not grepped path by path.
func TestSearchYAMLLeavesCopiesToTheBatch(t *testing.T) {
	files := map[string]string{}
	for c := range 5 {
		for i := range 10 {
			files[fmt.Sprintf("copy-%d/f-%d.yaml", c, i)] = fmt.Sprintf("file %d\n", i)
		}
	}
	dir := commitFiles(t, files)
	ctx := context.Background()
	s, err := Open(ctx, dir, "HEAD", NewBlobs(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SearchYAML(ctx, 1, "argoproj.io"); err != nil {
		t.Fatal(err)
	}
	if n := s.blobs.unsearched(yamlIDs(s), []string{"argoproj.io"}); n != 10 {
		t.Errorf("%d of 10 contents unsearched after a search of 5 copies of them; want all left to the batch", n)
	}
}
