package render

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// bomb is a "billion laughs" object: levels lists, each holding width
// aliases of the one before, so it expands to width^levels scalars.
func bomb(name string, levels, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\nlol:\n", name)
	b.WriteString("  l0: &l0 [" + strings.TrimSuffix(strings.Repeat(`"lol",`, width), ",") + "]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), width), ","))
	}
	return b.String()
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+prefix) + "\n"
}

// Anchors used as people use them: the same env in two containers.
const anchored = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: web:1
        env: &env
        - {name: LOG, value: info}
        - {name: REGION, value: eu}
      - name: sidecar
        image: side:1
        env: *env
`

// An alias bomb, in whatever file an overlay reads, fails that overlay
// quickly, naming the file, with bounded memory, while a sibling overlay
// (anchors used sensibly) renders. Unbounded, each of these takes
// hundreds of gigabytes, or (the self-reference) overflows the stack and
// kills the process.
func TestAliasBombFailsItsOverlayAlone(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"good/kustomization.yaml": "resources: [deploy.yaml]\n",
		"good/deploy.yaml":        anchored,
		// 10^9 scalars from a 600-byte file.
		"resource/kustomization.yaml": "resources: [bomb.yaml]\n",
		"resource/bomb.yaml":          bomb("bomb", 9, 10),
		// krusty parses an inline patch as YAML too.
		"patch/kustomization.yaml": "resources: [cm.yaml]\npatches:\n- patch: |\n" + indent(bomb("c", 9, 10), "    "),
		"patch/cm.yaml":            strings.ReplaceAll(cm, "%s", "c"),
		// The same, as a double-quoted string that spells its anchors
		// with escapes.
		"escaped/kustomization.yaml": "resources: [cm.yaml]\npatches:\n- patch: " + strings.ReplaceAll(strconv.Quote(bomb("c", 9, 10)), "&", `\x26`) + "\n",
		"escaped/cm.yaml":            strings.ReplaceAll(cm, "%s", "c"),
		// A patch file, read by a base.
		"patchfile/base/kustomization.yaml": "resources: [cm.yaml]\npatches: [{path: patch.yaml}]\n",
		"patchfile/base/cm.yaml":            strings.ReplaceAll(cm, "%s", "bomb"),
		"patchfile/base/patch.yaml":         bomb("bomb", 9, 10),
		"patchfile/kustomization.yaml":      "resources: [base]\n",
		// An alias inside its own anchor never ends.
		"cycle/kustomization.yaml": "resources: [cm.yaml]\n",
		"cycle/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nx: &a [*a]\n",
		// In the kustomization itself (its YAML decoder would refuse it
		// too, as "excessive aliasing").
		"kust/kustomization.yaml": "resources: [cm.yaml]\nlabels:\n- pairs: {a: b}\n  x:\n" + indent(strings.SplitN(bomb("c", 9, 10), "lol:\n", 2)[1], "  "),
		"kust/cm.yaml":            strings.ReplaceAll(cm, "%s", "c"),
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	got := renderAll(t, s)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("7 overlays in %s, %d MB allocated, heap reserved from the OS %d MB", took.Round(time.Millisecond), allocated>>20, after.HeapSys>>20)

	if r := got["good"]; r.Err != nil || len(r.Objects) != 1 {
		t.Fatalf("good: %d objects, %v", len(r.Objects), r.Err)
	}
	if y := toYAML(t, got["good"].Objects); strings.Count(y, "REGION") != 2 {
		t.Errorf("good: the alias is not expanded:\n%s", y)
	}
	for _, tc := range []struct{ overlay, file, want string }{
		{"resource", "resource/bomb.yaml", "expand"},
		{"patch", "patch/kustomization.yaml", "expand"},
		{"escaped", "escaped/kustomization.yaml", "expand"},
		{"patchfile", "patchfile/base/patch.yaml", "expand"},
		{"cycle", "cycle/cm.yaml", "refers to a node that contains it"},
		{"kust", "kust/kustomization.yaml", "expand"},
	} {
		err := got[tc.overlay].Err
		if err == nil {
			t.Errorf("%s: rendered, want an error", tc.overlay)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "render "+tc.overlay) {
			t.Errorf("%s: error %q, want it to say %q and name the overlay", tc.overlay, err, tc.want)
		}
		var le *LimitError
		if !errors.As(err, &le) || le.File != tc.file {
			t.Errorf("%s: error %v, want a LimitError naming %s", tc.overlay, err, tc.file)
		}
	}
	if le := (*LimitError)(nil); errors.As(got["resource"].Err, &le) && !strings.Contains(le.Error(), "write the repeated YAML out") {
		t.Errorf("the error does not say what to do: %v", le)
	}
	// Unbounded, the smallest of these bombs allocates ~400 GB.
	if allocated > 256<<20 {
		t.Errorf("rendering allocated %d MB, want the bombs refused before they expand", allocated>>20)
	}
	if took > time.Minute {
		t.Errorf("rendering took %s", took)
	}
}

// Aliases that repeat more than a file holds draw on one budget per
// overlay: files that each fit fail together once they exceed it.
func TestAliasBudgetIsPerOverlay(t *testing.T) {
	files := map[string]string{
		// 10^4 scalars, ~11,000 nodes over twice the file's size.
		"one/kustomization.yaml":   "resources: [a.yaml]\n",
		"one/a.yaml":               bomb("a", 4, 10),
		"three/kustomization.yaml": "resources: [a.yaml, b.yaml, c.yaml]\n",
		"three/a.yaml":             bomb("a", 4, 10),
		"three/b.yaml":             bomb("b", 4, 10),
		"three/c.yaml":             bomb("c", 4, 10),
	}
	s := testkit.Snapshot(t, "test", files)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Render(context.Background(), s.FS, tree, []string{"one", "three"}, Options{MaxAliasNodes: 25_000})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != nil {
		t.Errorf("one: %v", rs[0].Err)
	}
	var le *LimitError
	if !errors.As(rs[1].Err, &le) || le.File != "three/c.yaml" || le.Limit != 25_000 {
		t.Errorf("three: %v, want c.yaml refused with the budget spent by a and b", rs[1].Err)
	}
	// No limit: everything renders.
	rs, err = Render(context.Background(), s.FS, tree, []string{"three"}, Options{MaxAliasNodes: -1})
	if err != nil || rs[0].Err != nil {
		t.Errorf("no limit: %v %v", err, rs[0].Err)
	}
}

func TestMeasure(t *testing.T) {
	cases := []struct {
		name            string
		yaml            string
		nodes, expanded int64
		cycle           bool
	}{
		// Nodes: the document, mappings, sequences, keys and scalars.
		{"no aliases", "a: 1\nb: [x, y]\n", 8, 8, false},
		{"one alias", "a: &x [1, 2]\nb: *x\n", 8, 10, false},
		{"merge key", "a: &x {k: v}\nb: {<<: *x, j: w}\n", 12, 14, false},
		{"documents add up", "a: &x [1, 2]\nb: *x\n---\nc: &y [1]\nd: [*y, *y]\n", 8 + 9, 10 + 11, false},
		// l0 is 4 nodes, l1 1+3×4, l2 1+3×13, and 12 nodes around them.
		{"bomb", bomb("b", 3, 3), 27, 12 + (1 + 4) + (1 + 13) + (1 + 40), false},
		{"self", "x: &a [*a]\n", 0, 0, true},
		{"inside a mapping it anchors", "x: &a {y: *a}\n", 0, 0, true},
		{"yaml in a string", "p: |\n  a: &x [1, 2]\n  b: [*x, *x]\n", 4 + 10, 4 + 14, false},
		{"not yaml", "a: [unterminated\n&*", 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, expanded, cycle := measure([]byte(tc.yaml), 0)
			if cycle != tc.cycle || (!cycle && (nodes != tc.nodes || expanded != tc.expanded)) {
				t.Errorf("measure = %d nodes, %d expanded, cycle %v; want %d, %d, %v", nodes, expanded, cycle, tc.nodes, tc.expanded, tc.cycle)
			}
		})
	}
}

func TestMayAlias(t *testing.T) {
	cases := []struct {
		name, data string
		want       bool
	}{
		{"anchor and alias", "a: &x [1]\nb: *x\n", true},
		{"anchor only", "a: &x [1]\n", false},
		{"alias of another name", "a: &x [1]\nb: *y\n", false},
		{"prose and patterns", "description: a & b, *bold*\npattern: ^[!#$%&'*+\\-.^_\\x60|~]+$\nurl: http://h/?a=1&b=2 *b=2x\n", false},
		{"flow", "[&a 1, *a]", true},
		{"escaped anchor", `p: "x: \x26a [1]\ny: *a"`, true},
		{"escaped alias", `p: "x: &a [1]\ny: \u002aa"`, true},
		{"escape inside the name", `p: "x: &a\x62 [1]\ny: *ab"`, true},
		{"name split by an escaped line break", "p: \"x: &a\\\n    b [1]\\ny: *ab\"", true},
		{"escapes that spell nothing", `p: "tab\there \u00e9 &x"`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayAlias([]byte(tc.data)); got != tc.want {
				t.Errorf("mayAlias(%q) = %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}

// blockingFS holds the read of one file until released, as a render
// stuck on a slow input would be.
type blockingFS struct {
	filesys.FileSystem
	file     string
	reached  chan struct{}
	release  chan struct{}
	once     sync.Once
	released atomic.Bool
	after    atomic.Int32 // reads that reached the file system after release
}

func (b *blockingFS) ReadFile(p string) ([]byte, error) {
	if b.released.Load() {
		b.after.Add(1)
	}
	if strings.HasSuffix(p, b.file) {
		b.once.Do(func() { close(b.reached) })
		<-b.release
	}
	return b.FileSystem.ReadFile(p)
}

// A render past its time budget fails its overlay at once; the abandoned
// build stops at its next file access, and releases the schema lock.
func TestRenderPastItsBudgetIsAbandoned(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"slow/kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
		"slow/a.yaml":             strings.ReplaceAll(cm, "%s", "a"),
		"slow/b.yaml":             strings.ReplaceAll(cm, "%s", "b"),
		"fast/kustomization.yaml": "resources: [a.yaml]\n",
		"fast/a.yaml":             strings.ReplaceAll(cm, "%s", "a"),
	})
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	fs := &blockingFS{FileSystem: s.FS, file: "slow/a.yaml", reached: make(chan struct{}), release: make(chan struct{})}
	const budget = 300 * time.Millisecond
	start := time.Now()
	rs, err := Render(context.Background(), fs, tree, []string{"slow", "fast"}, Options{Timeout: budget})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var te *TimeoutError
	if !errors.As(rs[0].Err, &te) || te.Dir != "slow" || !strings.Contains(te.Error(), "not done within 300ms") {
		t.Errorf("slow: %v, want a TimeoutError", rs[0].Err)
	}
	if rs[1].Err != nil || len(rs[1].Objects) != 1 {
		t.Errorf("fast: %d objects, %v", len(rs[1].Objects), rs[1].Err)
	}
	if took < budget || took > budget+30*time.Second {
		t.Errorf("Render returned after %s, want just after the %s budget", took, budget)
	}
	// Let the abandoned build go on: it must not read b.yaml, and it must
	// let go of the schema lock (an exclusive lock waits for it).
	fs.released.Store(true)
	close(fs.release)
	lockSchema(true)()
	if n := fs.after.Load(); n != 0 {
		t.Errorf("the abandoned build read %d more files", n)
	}

	// A cancelled context stops a render the same way.
	ctx, cancel := context.WithCancel(context.Background())
	fs2 := &blockingFS{FileSystem: s.FS, file: "slow/a.yaml", reached: make(chan struct{}), release: make(chan struct{})}
	go func() { <-fs2.reached; cancel() }()
	rs, _ = Render(ctx, fs2, tree, []string{"slow"}, Options{})
	if !errors.Is(rs[0].Err, context.Canceled) {
		t.Errorf("cancelled: %v", rs[0].Err)
	}
	close(fs2.release)
	lockSchema(true)()
}

// A render that reads more bytes than its budget, or a path deeper than
// its budget, fails its overlay alone, naming the file, the limit and
// the flag that raises it; raised, the same overlay renders.
func TestReadAndDepthBudgets(t *testing.T) {
	deep := strings.TrimSuffix(strings.Repeat("d/", 40), "/")
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  v: " + strings.Repeat("x", 4000) + "\n"
	s := testkit.Snapshot(t, "test", map[string]string{
		"good/kustomization.yaml":   "resources: [cm.yaml]\n",
		"good/cm.yaml":              fmt.Sprintf(cm, "good"),
		"big/kustomization.yaml":    "resources: [cm.yaml]\n",
		"big/cm.yaml":               big,
		"deep/kustomization.yaml":   "resources: [" + deep + "/cm.yaml]\n",
		"deep/" + deep + "/cm.yaml": fmt.Sprintf(cm, "deep"),
	})
	render := func(opts Options) map[string]error {
		tree, err := Discover(s.FS, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		results, err := Render(context.Background(), s.FS, tree, tree.Overlays, opts)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]error{}
		for _, r := range results {
			out[r.Path] = r.Err
		}
		return out
	}
	got := render(Options{MaxReadBytes: 2000, MaxPathDepth: 20})
	if got["good"] != nil {
		t.Errorf("good: %v", got["good"])
	}
	var readErr *ReadLimitError
	if err := got["big"]; !errors.As(err, &readErr) || readErr.File != "big/cm.yaml" || !strings.Contains(err.Error(), "--max-render-bytes") || !strings.Contains(err.Error(), "2000") {
		t.Errorf("big: %v, want the read budget naming big/cm.yaml, 2000 and the flag", err)
	}
	var depthErr *DepthError
	if err := got["deep"]; !errors.As(err, &depthErr) || depthErr.Limit != 20 || !strings.Contains(err.Error(), "--max-path-depth") {
		t.Errorf("deep: %v, want the depth budget", err)
	}
	for name, err := range render(Options{MaxReadBytes: 1 << 20, MaxPathDepth: 64}) {
		if err != nil {
			t.Errorf("raised budgets: %s: %v", name, err)
		}
	}
	for name, err := range render(Options{MaxReadBytes: -1, MaxPathDepth: -1}) {
		if err != nil {
			t.Errorf("no budgets: %s: %v", name, err)
		}
	}
}
