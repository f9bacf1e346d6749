package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// TestPatchedKyamlRendersAsKustomize: kplan builds with a patched kyaml
// (third_party/README.md: de-anchoring keeps a mapping with no merge
// key instead of deep-copying it). Generated documents full of anchors,
// aliases, merge keys (one and several), duplicate keys, flow and block
// styles, quoting and comments render in process exactly as the
// kustomize CLI built from the upstream modules renders them (tools/helm
// has no replace), failures included, each through a transformer and a
// strategic-merge patch as well.
func TestPatchedKyamlRendersAsKustomize(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 34))
	files := map[string]string{}
	var overlays []string
	for i := range 40 {
		dir := fmt.Sprintf("o%02d", i)
		g := &docGen{r: r, dups: i%5 == 4}
		files[dir+"/thing.yaml"] = g.document(i)
		k := "resources:\n- thing.yaml\n"
		if i%3 == 0 {
			k += "namePrefix: p-\nlabels:\n- pairs:\n    team: a\n"
		}
		if i%4 == 1 {
			files[dir+"/patch.yaml"] = fmt.Sprintf("apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: thing-%d\nspec:\n  patched: &p {x: 1}\n  again: *p\n", i)
			k += "patches:\n- path: patch.yaml\n"
		}
		files[dir+"/kustomization.yaml"] = k
		overlays = append(overlays, dir)
	}
	results := besideKustomize(t, files, overlays)
	failed := 0
	for _, r := range results {
		res, cliErr := r.res, r.cliErr
		switch {
		case cliErr != nil && res.Err == nil:
			t.Errorf("%s: kustomize fails (%s), kplan renders:\n%s", res.Path, cliErr.Stderr, files[res.Path+"/thing.yaml"])
		case cliErr == nil && res.Err != nil:
			t.Errorf("%s: kplan fails (%v), kustomize renders:\n%s", res.Path, res.Err, files[res.Path+"/thing.yaml"])
		case cliErr != nil:
			failed++
			t.Logf("%s: both fail: %v", res.Path, res.Err)
		default:
			if got := toYAML(t, res.Objects); got != string(r.cli) {
				t.Errorf("%s: kplan renders\n%s\nkustomize\n%s\nfrom\n%s", res.Path, got, r.cli, files[res.Path+"/thing.yaml"])
			}
		}
	}
	if failed > len(results)/3 {
		t.Errorf("%d of %d generated overlays fail to build: the generator tests too little", failed, len(results))
	}
}

// twoRenders is one overlay rendered in process (res) and by the kustomize
// CLI built from the upstream modules (its output, or its failure).
type twoRenders struct {
	res    Result
	cli    []byte
	cliErr *exec.ExitError
}

// besideKustomize renders overlays of files in process and with the
// upstream kustomize CLI (tools/helm has no replace), for the tests that
// check kplan's patched kyaml renders as upstream does.
func besideKustomize(t *testing.T, files map[string]string, overlays []string) []twoRenders {
	t.Helper()
	bin := testhelm.Dir(t)
	s := testkit.Snapshot(t, "generated", files)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	results, err := Render(context.Background(), s.FS, tree, overlays, Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]twoRenders, 0, len(results))
	for _, res := range results {
		cli, err := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, res.Path)).Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		out = append(out, twoRenders{res: res, cli: cli, cliErr: ee})
	}
	return out
}

// docGen writes a YAML document with anchors, aliases and merge keys.
type docGen struct {
	r        *rand.Rand
	b        strings.Builder
	anchors  []string // defined so far, any node
	mappings []string // of those, mappings (what a merge key may name)
	dups     bool     // write duplicate keys (which kustomize refuses)
}

func (g *docGen) document(i int) string {
	fmt.Fprintf(&g.b, "# generated %d\napiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: thing-%d\nspec:\n", i, i)
	g.mapping(1, 3)
	return g.b.String()
}

func (g *docGen) indent(level int) { g.b.WriteString(strings.Repeat("  ", level)) }

// mapping writes n to n+2 fields at level, block style.
func (g *docGen) mapping(level, n int) {
	keys := n + g.r.IntN(3)
	if len(g.mappings) > 0 && g.r.IntN(3) == 0 { // a merge key
		g.indent(level)
		if len(g.mappings) > 1 && g.r.IntN(2) == 0 {
			fmt.Fprintf(&g.b, "<<: [*%s, *%s]\n", g.mappings[g.r.IntN(len(g.mappings))], g.mappings[g.r.IntN(len(g.mappings))])
		} else {
			fmt.Fprintf(&g.b, "<<: *%s\n", g.mappings[g.r.IntN(len(g.mappings))])
		}
	}
	for k := range keys {
		name := fmt.Sprintf("k%d", k)
		if g.dups && k > 0 && g.r.IntN(4) == 0 {
			name = "k0" // a duplicate key
		}
		g.indent(level)
		g.b.WriteString(name + ":")
		g.value(level)
	}
}

// value writes a field's value after its key: a scalar, an alias, a flow
// mapping, or (if not too deep) a nested block mapping or sequence, any
// of them anchored.
func (g *docGen) value(level int) {
	if len(g.anchors) > 0 && g.r.IntN(5) == 0 {
		fmt.Fprintf(&g.b, " *%s\n", g.anchors[g.r.IntN(len(g.anchors))])
		return
	}
	anchor := ""
	if g.r.IntN(3) == 0 {
		anchor = fmt.Sprintf("a%d", len(g.anchors))
		g.b.WriteString(" &" + anchor)
	}
	kind := g.r.IntN(5)
	if level >= 4 {
		kind = g.r.IntN(2)
	}
	switch kind {
	case 0:
		scalars := []string{"1", "true", `"quoted"`, "'single'", "plain text", "null", "~", "0o17", "v1.2"}
		g.b.WriteString(" " + scalars[g.r.IntN(len(scalars))] + "\n")
	case 1:
		g.b.WriteString(" {a: 1, b: [x, y]}\n")
		g.mappingAnchor(anchor)
	case 2, 3:
		g.b.WriteString(" # nested\n")
		g.mapping(level+1, 1)
		g.mappingAnchor(anchor)
	default:
		g.b.WriteString("\n")
		for range 1 + g.r.IntN(3) {
			g.indent(level + 1)
			g.b.WriteString("- ")
			if g.r.IntN(2) == 0 {
				g.b.WriteString("item\n")
				continue
			}
			g.b.WriteString("name: n\n")
			g.indent(level + 2)
			g.b.WriteString("v: 2\n")
		}
	}
	if anchor != "" {
		g.anchors = append(g.anchors, anchor)
	}
}

func (g *docGen) mappingAnchor(anchor string) {
	if anchor != "" {
		g.mappings = append(g.mappings, anchor)
	}
}
