package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// One overlay's render is bounded in time and in what YAML aliases may
// add to it, so that a pathological input fails its overlay alone and
// the process (the webhook, a plan) goes on.
//
// Why aliases: kustomize expands every YAML alias as it reads a file
// (kio.ByteReader's DeAnchor copies the anchored node for each alias), so
// a "billion laughs" file of a few hundred bytes becomes billions of
// nodes — measured, 10^6 scalars take 1.4 s and 414 MB of heap, and every
// level of ten aliases multiplies that by ten. An alias that refers to a
// node containing it never ends: the copy recurses until Go's stack
// overflows, which kills the process (recover cannot catch it). krusty
// offers no limit, so kplan measures each file it serves to krusty before
// krusty parses it.

const (
	// DefaultTimeout bounds one overlay's render when Options.Timeout is
	// 0. kustomize builds the largest kubeflow overlay in about 2 s; helm
	// inflation may fetch charts.
	DefaultTimeout = 5 * time.Minute
	// DefaultMaxAliasNodes bounds, when Options.MaxAliasNodes is 0, the
	// YAML nodes that aliases may add to one render beyond what they
	// repeat within a file's own size. A node costs kustomize about
	// 300 bytes, and a render holds two or three copies: ~200 MB at most.
	DefaultMaxAliasNodes = 250_000
	// DefaultMaxReadBytes bounds, when Options.MaxReadBytes is 0, the
	// bytes one render reads: its files, each time krusty reads one, and
	// what it fetches. The largest kubeflow overlay reads about 12 MB.
	DefaultMaxReadBytes = 256 << 20
	// DefaultMaxPathDepth bounds, when Options.MaxPathDepth is 0, how
	// many directories deep a path a render touches may be. Linux cannot
	// check out a path longer than 4096 bytes; kubeflow's deepest is 9.
	DefaultMaxPathDepth = 128
)

// ReadLimitError says a render read more bytes than its budget.
type ReadLimitError struct {
	File        string // repository-relative, or the URL fetched
	Size, Limit int64
}

func (e *ReadLimitError) Error() string {
	return fmt.Sprintf("%s: reading its %d bytes takes the render past the %d bytes kplan lets one overlay's render read (kplan's --max-render-bytes raises it)", e.File, e.Size, e.Limit)
}

// DepthError says a render reached a path deeper than its budget.
type DepthError struct {
	Path         string // repository-relative, shortened
	Depth, Limit int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("%s: the path is %d levels deep; a render reads paths of at most %d levels (kplan's --max-path-depth raises it, up to %d)", e.Path, e.Depth, e.Limit, snapshot.MaxPathDepth)
}

// LimitError says that a file of a render was refused before kustomize
// parsed it: its YAML aliases expand too far, or refer to themselves.
type LimitError struct {
	File string // repository-relative
	// Nodes is what the file holds; Expanded what its aliases make of
	// it (a lower bound when the expansion was not counted to its end).
	Nodes, Expanded int64
	Limit           int64 // nodes aliases may add beyond the file's size
	Cycle           bool  // an alias refers to a node that contains it
}

func (e *LimitError) Error() string {
	if e.Cycle {
		return fmt.Sprintf("%s: a YAML alias refers to a node that contains it, so the document never ends (kustomize would recurse until the process dies); remove the alias (*name) or its anchor (&name)", e.File)
	}
	return fmt.Sprintf("%s: its YAML aliases expand %d nodes into %s nodes — an alias bomb? kplan lets aliases repeat up to a file's own size plus %d nodes per overlay; write the repeated YAML out instead of anchors and aliases (&name, *name)",
		e.File, e.Nodes, atLeast(e.Expanded), e.Limit)
}

func atLeast(n int64) string {
	if n >= saturated {
		return fmt.Sprintf("more than %d", int64(saturated))
	}
	return fmt.Sprint(n)
}

// TimeoutError says an overlay's render did not finish within its budget.
type TimeoutError struct {
	Dir     string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("render %s: not done within %s: kplan abandoned it (a very large or pathological input, or a slow remote resource); make the overlay smaller or check what it fetches", e.Dir, e.Timeout)
}

// saturated caps node counts: anything this large is refused anyway, and
// counting on would overflow.
const saturated = 1 << 40

// budget is what one render may still spend on alias expansion.
type budget struct {
	mu    sync.Mutex
	left  int64 // < 0: unbounded
	limit int64
}

func newBudget(limit int) *budget {
	return &budget{left: int64(limit), limit: int64(limit)}
}

// charge checks data, the content of file, and takes what its aliases
// add beyond the file's own size from the budget. It fails with a
// *LimitError and takes nothing when the budget cannot pay.
func (b *budget) charge(file string, data []byte) error {
	if b.left < 0 || !mayAlias(data) {
		return nil
	}
	nodes, expanded, cycle := measure(data, 0)
	if cycle {
		return &LimitError{File: file, Cycle: true}
	}
	over := expanded - 2*nodes // aliases may double a file for free
	if over <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if over > b.left {
		return &LimitError{File: file, Nodes: nodes, Expanded: expanded, Limit: b.limit}
	}
	b.left -= over
	return nil
}

// mayAlias is a cheap first look: only a document in which some alias
// (*name) names an anchor (&name) can expand. Text that merely holds "&"
// and "*" (descriptions, URLs, regular expressions) is passed without
// parsing it. Names are compared as written and, when the data holds
// escapes, as a double-quoted string would decode them, since a quoted
// string that kustomize parses as YAML (an inline patch) may spell its
// anchors with escapes ("\x26a", a name split by an escaped line break).
func mayAlias(data []byte) bool {
	if namesMatch(data) {
		return true
	}
	return bytes.IndexByte(data, '\\') >= 0 && namesMatch(unescape(data))
}

func namesMatch(data []byte) bool {
	if bytes.IndexByte(data, '*') < 0 {
		return false
	}
	anchors := markedNames(data, '&', nil)
	if len(anchors) == 0 {
		return false
	}
	found := false
	markedNames(data, '*', func(name string) bool {
		found = anchors[name]
		return !found
	})
	return found
}

// unescape decodes, everywhere in data, the escapes of YAML's
// double-quoted strings that can spell an anchor or alias: \xHH, \uHHHH,
// \UHHHHHHHH, an escaped line break (joined with the next line's text)
// and the one-letter escapes.
func unescape(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c != '\\' || i+1 == len(data) {
			out = append(out, c)
			continue
		}
		switch e := data[i+1]; e {
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+2+n <= len(data) {
				if v, err := strconv.ParseUint(string(data[i+2:i+2+n]), 16, 32); err == nil {
					out = utf8.AppendRune(out, rune(v))
					i += 1 + n
					continue
				}
			}
		case '\n', '\r':
			j := i + 1
			for j < len(data) && (data[j] == '\n' || data[j] == '\r') {
				j++
			}
			for j < len(data) && (data[j] == ' ' || data[j] == '\t') {
				j++
			}
			i = j - 1
			continue
		case 'n', 't', 'r', '0':
			out = append(out, ' ') // ends a name, as the control character would
			i++
			continue
		case ' ', '"', '/', '\\', '\t':
			out = append(out, e)
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

// markedNames finds the names that follow mark anywhere, not only where
// an anchor or alias can start a node (in a quoted string it may follow
// any character). A name ends at a space, a flow indicator or a quote:
// cut short, names only match more often. It collects the names, or
// hands each to more until it says stop.
func markedNames(data []byte, mark byte, more func(string) bool) map[string]bool {
	var out map[string]bool
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], mark)
		if j < 0 {
			break
		}
		at := i + j
		i = at + 1
		end := at + 1
		for end < len(data) && !strings.ContainsRune(" \t\n\r[]{},\"'", rune(data[end])) {
			end++
		}
		if end == at+1 {
			continue
		}
		name := string(data[at+1 : end])
		if more != nil {
			if !more(name) {
				break
			}
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[name] = true
	}
	return out
}

// maxNesting bounds how deep measure looks into YAML held in strings.
const maxNesting = 2

// measure parses data as YAML documents, as kustomize does, and counts
// the nodes they hold and the nodes they become once every alias is
// expanded. Strings that hold YAML themselves (an inline patch in a
// kustomization) are measured too, since kustomize parses them the same
// way. Data that is not YAML counts as nothing: kustomize reports it.
func measure(data []byte, depth int) (nodes, expanded int64, cycle bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err != nil { // io.EOF, or not YAML
			return nodes, expanded, false
		}
		m := &measurer{sizes: map[*yaml.Node]int64{}, depth: depth}
		nodes += m.count(&doc)
		e, ok := m.expand(&doc)
		if !ok {
			return nodes, expanded, true
		}
		expanded = min(saturated, expanded+e+m.nested)
		nodes += m.nestedNodes
	}
}

type measurer struct {
	sizes               map[*yaml.Node]int64 // expanded size; -1 while being expanded
	depth               int
	nested, nestedNodes int64 // what YAML in strings expands to, and holds
}

// count is the number of nodes as parsed: the tree of Content, where an
// alias is one node.
func (m *measurer) count(n *yaml.Node) int64 {
	if n == nil {
		return 0
	}
	c := int64(1)
	for _, ch := range n.Content {
		c += m.count(ch)
	}
	return c
}

// expand is the number of nodes n becomes with every alias replaced by a
// copy of its anchor, as kyaml's DeAnchor does; ok is false when an alias
// refers to a node that contains it.
func (m *measurer) expand(n *yaml.Node) (size int64, ok bool) {
	if n == nil {
		return 0, true
	}
	if s, done := m.sizes[n]; done {
		return s, s >= 0
	}
	m.sizes[n] = -1
	size = 1
	switch n.Kind {
	case yaml.AliasNode:
		s, ok := m.expand(n.Alias)
		if !ok {
			return 0, false
		}
		size = s
	case yaml.ScalarNode:
		if m.depth < maxNesting && mayAlias([]byte(n.Value)) {
			nn, ne, cycle := measure([]byte(n.Value), m.depth+1)
			if cycle {
				return 0, false
			}
			m.nested = min(saturated, m.nested+ne)
			m.nestedNodes += nn
		}
	default:
		for _, ch := range n.Content {
			s, ok := m.expand(ch)
			if !ok {
				return 0, false
			}
			size = min(saturated, size+s)
		}
	}
	m.sizes[n] = size
	return size, true
}

// guardFS is the file system one render sees: the overlay's files, each
// measured against the render's alias budget before krusty reads it, and
// nothing at all once the render's context is done — krusty takes no
// context, so failing its next file access is how an abandoned build
// stops early.
type guardFS struct {
	filesys.FileSystem
	ctx      context.Context
	budget   *budget
	fetcher  Fetcher         // nil: nothing is fetched
	git      GitFetcher      // nil: no git base is fetched
	charts   *charts.Fetcher // helmCharts' charts from repositories and registries
	maxRead  int64           // < 0: no limit
	maxDepth int             // < 0: no limit

	mu       sync.Mutex
	refused  error             // the first refusal, which fails the render
	remote   map[string]string // path krusty sees -> the URL it stands for
	mounts   []string          // directories of fetched git bases, served from disk
	readLeft int64
	secrets  scrubber // what the render's errors must not show
}

func newGuardFS(ctx context.Context, fSys filesys.FileSystem, k *Kustomizer) *guardFS {
	return &guardFS{FileSystem: fSys, ctx: ctx, budget: newBudget(k.maxAliasNodes), fetcher: k.remote, git: k.git, charts: k.charts,
		maxRead: k.maxRead, readLeft: k.maxRead, maxDepth: k.maxDepth}
}

// take charges n bytes read from file to the render's read budget.
func (g *guardFS) take(file string, n int64) error {
	if g.maxRead < 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > g.readLeft {
		return &ReadLimitError{File: file, Size: n, Limit: g.maxRead}
	}
	g.readLeft -= n
	return nil
}

// deep refuses a path deeper than the render's depth budget.
func (g *guardFS) deep(p string) error {
	if g.maxDepth < 0 {
		return nil
	}
	rel := relName(p)
	depth := strings.Count(rel, "/") + 1
	if depth <= g.maxDepth {
		return nil
	}
	if len(rel) > 120 {
		rel = rel[:60] + "…" + rel[len(rel)-60:]
	}
	return g.fail(&DepthError{Path: rel, Depth: depth, Limit: g.maxDepth})
}

// fail records err as the render's refusal, if it is the first, and
// returns it.
func (g *guardFS) fail(err error) error {
	g.mu.Lock()
	if g.refused == nil {
		g.refused = err
	}
	g.mu.Unlock()
	return err
}

// bytesLeft is what a fetch may still read; <= 0 is no limit.
func (g *guardFS) bytesLeft() int64 {
	if g.maxRead < 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(g.readLeft, 1) // 0 would be no limit
}

func (g *guardFS) stopped(op, p string) error {
	if err := g.ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: the render was stopped: %w", op, p, err)
	}
	return g.deep(p)
}

func (g *guardFS) refusal() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// check measures the content of p before krusty sees it.
func (g *guardFS) check(p string, data []byte) error {
	if err := g.take(relName(p), int64(len(data))); err != nil {
		return g.fail(err)
	}
	if err := g.budget.charge(relName(p), data); err != nil {
		return g.fail(err)
	}
	return nil
}

// tooLarge fails the render on a file the snapshot would not hold,
// naming it; other errors are krusty's to handle.
func (g *guardFS) tooLarge(p string, err error) error {
	var tl *snapshot.TooLargeError
	if errors.As(err, &tl) {
		return g.fail(fmt.Errorf("%s: %w", relName(p), tl))
	}
	return err
}

// relName names a file as a user knows it: repository-relative.
func relName(p string) string {
	p = filepath.ToSlash(p)
	if p == snapshot.Root || strings.HasPrefix(p, snapshot.Root+"/") {
		return snapshot.Rel(p)
	}
	return p
}

func (g *guardFS) ReadFile(p string) ([]byte, error) {
	if err := g.stopped("read", p); err != nil {
		return nil, err
	}
	var (
		data []byte
		err  error
	)
	if ref, ok := g.remoteURL(p); ok {
		data, err = g.fetch(ref)
	} else {
		data, err = g.fs(p).ReadFile(p)
	}
	if err != nil {
		return nil, g.tooLarge(p, err)
	}
	if err := g.check(p, data); err != nil {
		return nil, err
	}
	g.secrets.collect(p, data)
	data, err = g.rewriteRemote(p, data)
	if err != nil {
		return nil, g.fail(err)
	}
	return data, nil
}

func (g *guardFS) Open(p string) (filesys.File, error) {
	if err := g.stopped("open", p); err != nil {
		return nil, err
	}
	if _, ok := g.remoteURL(p); ok {
		// krusty reads files with ReadFile; nothing opens these.
		return nil, fmt.Errorf("open %s: a remote resource is read, not opened", relName(p))
	}
	if !g.fs(p).IsDir(p) {
		// Measure what the file will give; krusty itself reads files
		// with ReadFile.
		data, err := g.fs(p).ReadFile(p)
		var tl *snapshot.TooLargeError
		switch {
		case errors.As(err, &tl):
			return nil, g.tooLarge(p, err)
		case err == nil:
			if err := g.check(p, data); err != nil {
				return nil, err
			}
		}
	}
	return g.fs(p).Open(p)
}

func (g *guardFS) Exists(p string) bool {
	if g.deep(p) != nil {
		return false
	}
	if _, ok := g.remoteURL(p); ok {
		return g.ctx.Err() == nil
	}
	return g.ctx.Err() == nil && (g.fs(p).Exists(p) || g.remoteDirOf(p))
}

func (g *guardFS) IsDir(p string) bool {
	if g.deep(p) != nil {
		return false
	}
	return g.ctx.Err() == nil && (g.fs(p).IsDir(p) || g.remoteDirOf(p))
}

func (g *guardFS) ReadDir(p string) ([]string, error) {
	if err := g.stopped("read directory", p); err != nil {
		return nil, err
	}
	return g.fs(p).ReadDir(p)
}

func (g *guardFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if err := g.stopped("resolve", p); err != nil {
		return "", "", err
	}
	if _, ok := g.remoteURL(p); ok {
		// The kustomization's directory is real; remoteDir below it
		// holds no links.
		d, f := path.Split(path.Clean(p))
		return filesys.ConfirmedDir(path.Clean(d)), f, nil
	}
	return g.fs(p).CleanedAbs(p)
}

func (g *guardFS) Glob(pattern string) ([]string, error) {
	if err := g.stopped("glob", pattern); err != nil {
		return nil, err
	}
	return g.fs(pattern).Glob(pattern)
}

func (g *guardFS) Walk(p string, fn filepath.WalkFunc) error {
	if err := g.stopped("walk", p); err != nil {
		return err
	}
	return g.fs(p).Walk(p, func(p string, info fs.FileInfo, err error) error {
		if serr := g.stopped("walk", p); serr != nil {
			return serr
		}
		return fn(p, info, err)
	})
}
