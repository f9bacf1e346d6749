package argocd

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
)

// objectCases are YAML documents whose scalars go-yaml v2 and kyaml's
// YAML read differently, or that objectOf leaves to the long way.
var objectCases = []string{
	"a: yes\nb: on\nc: off\nd: y\ne: N\nf: true\ng: False\nh: null\ni: ~\nj:\nk: ''\n",
	"a: 1\nb: -2\nc: +3\nd: 0755\ne: 0x1f\nf: 1_000\ng: 1.5\nh: .5\ni: 1e3\nj: -.inf\nk: .nan\n",
	"a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 1:20\nd: 12345678901234567890\ne: 9007199254740993\n",
	"a: '1'\nb: \"yes\"\nc: |\n  multi\n  line\nd: >\n  folded\n  text\ne: plain\n  over lines\nf: \"tab\\there\"\n",
	"a: &x {b: 1}\nc: *x\n",
	"base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",
	"a: !!str 1\nb: !!int '2'\nc: !custom x\n",
	"1: one\ntrue: t\nnull: n\n'2': two\n",
	"a: {b: [1, yes, 'no', {c: ~}]}\nd: []\ne: {}\n",
	"a: 1\na: 2\n",
	"a: -\nb: --x\nc: '-'\nd: .hidden\ne: +x\nf: 0b101\ng: 0o17\nh: 1.0e+3\ni: 1_0.5\n",
	"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, finalizers: [resources-finalizer.argocd.argoproj.io]}\nspec:\n  source: {repoURL: r, path: p, kustomize: {replicas: [{name: a, count: 3}]}}\n",
}

// TestObjectOfReadsAsTheLongWay: the one-pass reading of a parsed
// document is the long way's (YAML text, then sigs.k8s.io/yaml), for
// every mapping of the cases and of the parse fixtures.
func TestObjectOfReadsAsTheLongWay(t *testing.T) {
	docs := slicesOfBytes(objectCases)
	files, _ := filepath.Glob(filepath.Join("testdata", "parse", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	for _, d := range docs {
		checkObjectOf(t, d)
	}
}

func slicesOfBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// checkObjectOf compares objectOf with objectSlow on every document of
// data kyaml reads.
func checkObjectOf(t *testing.T, data []byte) {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
	if err != nil {
		return
	}
	for _, n := range nodes {
		fast, ferr := objectOf(n)
		want, werr := objectSlow(n)
		if (ferr == nil) != (werr == nil) || !reflect.DeepEqual(fast, want) {
			t.Errorf("document %q:\none pass  %#v (%v)\nlong way  %#v (%v)", n.MustString(), fast, ferr, want, werr)
		}
	}
}

// FuzzObjectOf: whatever the YAML, the one pass reads what the long way
// reads.
func FuzzObjectOf(f *testing.F) {
	for _, c := range objectCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkObjectOf(t, data)
	})
}

// TestObjectOfIsOnePass: an Application and YAML 1.1 scalars are read in
// the one pass, not the long way (which would be as right, and slow).
func TestObjectOfIsOnePass(t *testing.T) {
	for _, c := range []string{objectCases[0], objectCases[3], objectCases[8], objectCases[11], "a: 1\nb: 0755\nc: 2001-12-14\n"} {
		nodes, err := (&kio.ByteReader{Reader: bytes.NewReader([]byte(c)), OmitReaderAnnotations: true}).Read()
		if err != nil || len(nodes) != 1 {
			t.Fatalf("%q: %v", c, err)
		}
		if _, ok := jsonValue(nodes[0].YNode(), false).(map[string]any); !ok {
			t.Errorf("%q is read the long way", c)
		}
	}
}
