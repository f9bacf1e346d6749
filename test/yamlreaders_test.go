package test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// directParsers are the ways Go code turns repository or chart text into
// YAML nodes without internal/yamldocs: kyaml's ByteReader and Parse, a
// YAML decoder, apimachinery's document readers. A node so made may be a
// list or a scalar, on which kyaml's GetKind and GetApiVersion panic (the
// Flux discovery and Secret scrubber panics); a node from yamldocs is a
// mapping. So no GetKind/GetApiVersion call on unparsed input exists
// outside the reader as long as none of these does.
var directParsers = regexp.MustCompile(`kio\.(ByteReader|ByteReadWriter|FromBytes)\b|\b(k?yaml)\.NewDecoder\(|\b(k?yaml)\.(Must)?Parse\([^"]|\bNewYAML(OrJSON)?(Decoder|Reader)\(|\bNewDocumentDecoder\(|\byaml\.ReadFile\(`)

// allowedParsers are the direct parsers that read no repository object,
// each with why: file, then the matched text.
var allowedParsers = map[string]string{
	"internal/render/bounds.go: yaml.NewDecoder(":           "measures every node of every document (lists too) before anything reads the file as objects",
	"internal/config/parse.go: yaml.NewDecoder(":            "the webhook's own configuration file, decoded into Go structs with known fields",
	"internal/repoconfig/repoconfig.go: yaml.NewDecoder(":   ".kplan.yaml, decoded into Go structs with known fields",
	"internal/rendercache/rendercache.go: yaml.NewDecoder(": "kplan's own render cache, written by kplan",
	"internal/flux/resourceset.go: NewYAMLOrJSONDecoder(":   "reads a rendered ResourceSet template into unstructured objects as flux-operator does (fluxcd/pkg/ssa ReadObjects), its errors included",
	"internal/flux/postbuild.go: NewYAMLOrJSONDecoder(":     "decodes one object kplan has just printed, as kustomize-controller decodes it",
}

// TestOneReaderOfRepositoryYAML fails on a direct multi-document parser
// (or kyaml Parse) outside internal/yamldocs that is not allowed above
// with its reason: read repository and chart YAML with yamldocs.
func TestOneReaderOfRepositoryYAML(t *testing.T) {
	found := map[string]bool{}
	for _, dir := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := strings.TrimPrefix(filepath.ToSlash(p), "../")
			if d.IsDir() && (rel == "internal/yamldocs" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for n := 1; sc.Scan(); n++ {
				line := sc.Text()
				if c := strings.Index(line, "//"); c >= 0 {
					line = line[:c]
				}
				for _, m := range directParsers.FindAllString(line, -1) {
					if i := strings.Index(m, "("); i >= 0 {
						m = m[:i+1] // the call, without its first argument
					}
					key := rel + ": " + strings.Replace(m, "kyaml.", "yaml.", 1)
					found[key] = true
					if _, ok := allowedParsers[key]; !ok {
						t.Errorf("%s:%d parses YAML directly (%s): read repository and chart YAML with internal/yamldocs (Mappings, Objects, Split, One), or add the call to allowedParsers with why it reads no repository object", rel, n, m)
					}
				}
			}
			return sc.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var stale []string
	for k := range allowedParsers {
		if !found[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("allowedParsers lists %q, which the tree no longer has: remove it", k)
	}
}
