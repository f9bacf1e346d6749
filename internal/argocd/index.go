package argocd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Index is what plans kept of the Applications of commits, between
// plans (the render cache's index-argocd.idx): the parses of the Argo CD
// files by path and content, and for each commit kept (the sides of the
// plan that wrote it) its Argo CD files, its ApplicationSets' expansions
// and its Applications' closures. A plan whose base is such a commit, or
// a few files away from one, takes its Applications from there and
// derives again only what the files that differ can reach: it lists,
// searches and parses nothing of the rest.
//
// What the index holds was decided under the engine's settings (its
// repoURLs, clusters, globbing, the revisions it tracks): an engine with
// other settings takes none of it (Use). The parses are keyed by content
// and the commits by id, so nothing of it applies to another content or
// commit.
type Index struct {
	// settings are the engine settings it was made under (settingsKey).
	settings string
	// revisions are the targetRevisions the decisions kept depend on,
	// with whether they track the plan's branch.
	revisions map[string]bool
	files     map[fileKey]*fileRec
	commits   []*commitState // newest first
}

// commitState is what one commit's Applications are made from.
type commitState struct {
	id    string     // the commit
	files []*fileRec // its Argo CD files, by path
	sets  []*expansion
	// closures are its Applications' closures (declared in git, not
	// rendered by another), by Application.
	closures map[*Application]*closureRec
}

// expansion is what an ApplicationSet makes on one side: its
// Applications, or why it is not expanded.
type expansion struct {
	set *AppSet
	// roots are the directories its generators read below ("." for
	// the whole tree): a change below none of them leaves its
	// Applications as they are.
	roots []string
	apps  []*Application
	err   error
}

// closureRec is an Application's closure as a plan computed it, and
// whether it may render Applications (mayOutput).
type closureRec struct {
	c           *closure.Closure
	own, listed []string
	may         may
}

// may is what mayOutput says of an Application, as far as the files of
// its closure tell.
type may int8

const (
	mayAsk  may = iota // not known: ask (a pulled chart may say)
	mayNot             // no file its sources read names argoproj.io/v
	mayDoes            // some does: it is rendered on every plan
)

// settingsKey names the settings the engine's decisions depend on,
// besides the revisions it tracks (recorded one by one, see tracks).
func (e *Engine) settingsKey() string {
	o := e.opts
	var b strings.Builder
	b.WriteString("repos " + strconv.FormatBool(o.Repos.any))
	for _, u := range slices.Sorted(slices.Values(o.Repos.urls)) {
		b.WriteString(" " + strconv.Quote(u))
	}
	fmt.Fprintf(&b, "\nglobbing %t\nhelm %t\nrestrictor %t\nclusters %q", o.NewGitFileGlobbing, o.KustomizeEnableHelm, o.Render.LoadRestrictorNone, o.ClustersFile)
	for _, c := range o.Clusters {
		fmt.Fprintf(&b, " %q %q %q %q", c.Name, c.Server, sortedPairs(c.Labels), sortedPairs(c.Annotations))
	}
	return b.String()
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// Use makes the engine take what ix knows: the parses of files, and for
// base, the commit of ix whose diff with it is given as changed (nil:
// none fits; empty: it is that commit). It says why ix is not taken,
// "" when it is: an index made under other settings, or whose tracked
// revisions the engine tracks otherwise.
func (e *Engine) Use(ix *Index) string {
	if ix == nil {
		return "no index"
	}
	if ix.settings != e.settingsKey() {
		return "made under other Argo CD settings"
	}
	for rev, tracked := range ix.revisions {
		if e.tracks(rev) != tracked {
			return fmt.Sprintf("targetRevision %q is tracked otherwise", rev)
		}
	}
	e.index.Store(ix)
	return ""
}

// Commits are the commits ix keeps, newest first.
func (ix *Index) Commits() []string {
	var out []string
	for _, c := range ix.commits {
		out = append(out, c.id)
	}
	return out
}

// Prior makes the engine derive the Applications of the snapshot of
// revision rev from the commit of its index named commit, changed being
// the paths that differ between them (snapshot.Changed): call it after
// Use, before the engine plans.
func (e *Engine) Prior(rev, commit string, changed map[string]bool) error {
	ix := e.index.Load()
	if ix == nil {
		return errors.New("no index in use")
	}
	for _, c := range ix.commits {
		if c.id == commit {
			e.prior.Store(&origin{rev: rev, files: c.files, sets: setsOf(c.sets), changed: changed, reuse: newReuse(changed), closures: c.closures})
			return nil
		}
	}
	return fmt.Errorf("commit %s is not in the index", commit)
}

// setsOf are expansions by their ApplicationSet.
func setsOf(xs []*expansion) map[*AppSet]*expansion {
	out := make(map[*AppSet]*expansion, len(xs))
	for _, x := range xs {
		out[x.set] = x
	}
	return out
}

// The index is written as a magic line, then uvarint-framed records:
// strings are a length and bytes, lists a count and their items,
// references into the path and file tables their position. Version 2:
// closures hold the repo server's override files (overrides.go), which an
// index of version 1 did not, so its closures cannot be trusted.
const indexMagic = "kplan-argocd-index/2\n"

// maxIndexItems bounds every count the decoder reads, beyond the bytes
// left: a hostile file cannot make it allocate more than it holds.
const maxIndexItems = 1 << 24

// Encode writes ix for DecodeIndex.
func (ix *Index) Encode() ([]byte, error) {
	w := &writer{paths: map[string]int{}}
	// Every path a closure, an input or a file names, in one table.
	files := slices.SortedFunc(maps.Values(ix.files), func(a, b *fileRec) int {
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.id, b.id))
	})
	fileAt := map[*fileRec]int{}
	var paths []string
	for i, f := range files {
		fileAt[f] = i
		paths = append(paths, f.path)
	}
	// The closures, once each: the sides of a plan share most.
	closures := map[closureKey]int{}
	var recs []*closureRec
	for _, c := range ix.commits {
		for _, x := range c.sets {
			for _, a := range x.apps {
				paths = append(paths, a.Inputs...)
			}
		}
		for _, a := range closureOrder(c, refsOf(c, fileAt)) {
			r := c.closures[a]
			k := closureKey{r.c, r.may}
			if _, ok := closures[k]; ok {
				continue
			}
			closures[k] = len(recs)
			recs = append(recs, r)
			paths = append(paths, r.c.Paths...)
			paths = append(paths, r.own...)
			paths = append(paths, r.listed...)
		}
	}
	set := make(map[string]bool, len(paths)/4)
	for _, p := range paths {
		set[p] = true
	}
	paths = slices.Sorted(maps.Keys(set))
	for i, p := range paths {
		w.paths[p] = i
	}
	w.b.WriteString(indexMagic)
	w.str(ix.settings)
	revs := slices.Sorted(maps.Keys(ix.revisions))
	w.num(len(revs))
	for _, r := range revs {
		w.str(r)
		w.flag(ix.revisions[r])
	}
	w.strs(paths)
	w.num(len(files))
	for _, f := range files {
		w.path(f.path)
		w.str(f.id)
		w.num(len(f.decl.Applications))
		for _, a := range f.decl.Applications {
			w.app(a)
		}
		w.num(len(f.decl.Sets))
		for _, s := range f.decl.Sets {
			data, err := json.Marshal(s.Object)
			if err != nil {
				return nil, fmt.Errorf("ApplicationSet %s: %w", s.ID(), err)
			}
			w.bytes(data)
		}
		w.num(len(f.decl.Invalid))
		for _, n := range f.decl.Invalid {
			w.str(n.ID)
			w.str(n.Reason)
		}
	}
	w.num(len(recs))
	for _, rec := range recs {
		w.sortedPaths(rec.c.Paths)
		w.sortedPaths(rec.own)
		w.sortedPaths(rec.listed)
		w.str(rec.c.Unbounded)
		w.flag(rec.c.OpenAPI)
		w.flag(rec.c.Helm)
		w.num(len(rec.c.Remote))
		for _, rm := range rec.c.Remote {
			w.str(rm.Ref)
			w.str(rm.Field)
			w.str(rm.File)
		}
		w.num(int(rec.may))
	}
	w.num(len(ix.commits))
	for _, c := range ix.commits {
		w.commit(c, fileAt, closures)
	}
	return w.b.Bytes(), nil
}

// closureKey names a closure record of the index.
type closureKey struct {
	c   *closure.Closure
	may may
}

type writer struct {
	b     bytes.Buffer
	paths map[string]int
}

func (w *writer) num(n int) {
	var buf [binary.MaxVarintLen64]byte
	w.b.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
}

func (w *writer) str(s string) {
	w.num(len(s))
	w.b.WriteString(s)
}

func (w *writer) bytes(b []byte) {
	w.num(len(b))
	w.b.Write(b)
}

func (w *writer) strs(ss []string) {
	w.num(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

func (w *writer) flag(v bool) {
	if v {
		w.b.WriteByte(1)
	} else {
		w.b.WriteByte(0)
	}
}

func (w *writer) path(p string) { w.num(w.paths[p]) }

// pathList writes paths in their order.
func (w *writer) pathList(ps []string) {
	w.num(len(ps))
	for _, p := range ps {
		w.path(p)
	}
}

// sortedPaths writes a set of paths as the differences of their
// positions in the table, sorted.
func (w *writer) sortedPaths(ps []string) {
	if !slices.IsSorted(ps) {
		ps = slices.Sorted(slices.Values(ps))
	}
	ps = slices.Compact(slices.Clip(ps))
	w.num(len(ps))
	last := -1
	for _, p := range ps {
		i := w.paths[p]
		w.num(i - last - 1)
		last = i
	}
}

// app writes an Application with what the index needs of it undecoded.
func (w *writer) app(a *Application) {
	w.str(a.Namespace)
	w.str(a.Name)
	w.str(a.Destination.Server)
	w.str(a.Destination.Name)
	w.str(a.Destination.Namespace)
	w.str(a.facts.skip)
	w.flag(a.facts.renders)
	w.bytes(a.object)
}

func (w *writer) commit(c *commitState, fileAt map[*fileRec]int, closures map[closureKey]int) {
	w.str(c.id)
	w.num(len(c.files))
	for _, f := range c.files {
		w.num(fileAt[f])
	}
	ref := refsOf(c, fileAt)
	w.num(len(c.sets))
	for _, x := range c.sets {
		f, j := setRef(c.files, x.set)
		w.num(fileAt[f])
		w.num(j)
		w.strs(x.roots)
		if x.err != nil {
			w.flag(true)
			w.str(x.err.Error())
			continue
		}
		w.flag(false)
		w.num(len(x.apps))
		for _, a := range x.apps {
			w.app(a)
			w.pathList(a.Inputs)
		}
	}
	apps := closureOrder(c, ref)
	w.num(len(apps))
	for _, a := range apps {
		r := ref[a]
		// Files count from 0, expansions from -1 down: written as one
		// number, files even and expansions odd.
		if r[0] >= 0 {
			w.num(2 * r[0])
		} else {
			w.num(2*(-1-r[0]) + 1)
		}
		w.num(r[1])
		rec := c.closures[a]
		w.num(closures[closureKey{rec.c, rec.may}])
	}
}

// refsOf names each Application of c by where it is declared: a file's
// n-th (the file's position in the index), or an expansion's (-1 for
// the first expansion, down).
func refsOf(c *commitState, fileAt map[*fileRec]int) map[*Application][2]int {
	ref := map[*Application][2]int{}
	for _, f := range c.files {
		for j, a := range f.decl.Applications {
			ref[a] = [2]int{fileAt[f], j}
		}
	}
	for i, x := range c.sets {
		for k, a := range x.apps {
			ref[a] = [2]int{-1 - i, k}
		}
	}
	return ref
}

// closureOrder are the Applications of c's closures, by where they are
// declared (c declares each).
func closureOrder(c *commitState, ref map[*Application][2]int) []*Application {
	apps := maps.Keys(c.closures)
	return slices.SortedFunc(func(yield func(*Application) bool) {
		for a := range apps {
			if _, ok := ref[a]; ok && !yield(a) {
				return
			}
		}
	}, func(a, b *Application) int {
		ra, rb := ref[a], ref[b]
		return cmp.Or(cmp.Compare(ra[0], rb[0]), cmp.Compare(ra[1], rb[1]))
	})
}

// setRef finds where set is declared among files.
func setRef(files []*fileRec, set *AppSet) (*fileRec, int) {
	for _, f := range files {
		if f.path == set.File {
			if j := slices.Index(f.decl.Sets, set); j >= 0 {
				return f, j
			}
		}
	}
	return nil, -1
}

// DecodeIndex reads what Encode wrote; anything else is an error, never
// a partial index. Applications' specs are decoded when first needed,
// from their objects, which are slices of data: data must not change
// after.
func DecodeIndex(data []byte) (*Index, error) {
	if !bytes.HasPrefix(data, []byte(indexMagic)) {
		return nil, errors.New("not an Argo CD index")
	}
	r := newReader(data)
	r.off = len(indexMagic)
	ix := &Index{settings: r.str(), revisions: map[string]bool{}, files: map[fileKey]*fileRec{}}
	for range r.count() {
		rev := r.str()
		ix.revisions[rev] = r.flag()
	}
	paths := r.strs()
	for i := 1; i < len(paths); i++ {
		if paths[i-1] >= paths[i] {
			r.fail("the paths are not sorted")
		}
	}
	r.paths = paths
	var files []*fileRec
	for range r.count() {
		f := &fileRec{path: r.path(), id: r.str()}
		for range r.count() {
			a := r.app(f.path)
			f.decl.Applications = append(f.decl.Applications, a)
		}
		for range r.count() {
			var m map[string]any
			if err := json.Unmarshal(r.bytes(), &m); err != nil || m == nil {
				r.fail("an ApplicationSet is not an object")
			}
			f.decl.Sets = append(f.decl.Sets, appSetOf(m, f.path))
		}
		for range r.count() {
			f.decl.Invalid = append(f.decl.Invalid, Named{ID: r.str(), File: f.path, Reason: r.str()})
		}
		if r.err != nil {
			return nil, r.err
		}
		k := fileKey{f.path, f.id}
		if ix.files[k] != nil {
			r.fail("a file twice")
		}
		ix.files[k] = f
		files = append(files, f)
	}
	var recs []*closureRec
	for range r.count() {
		rec := &closureRec{c: &closure.Closure{Paths: r.sortedPaths()}, own: r.sortedPaths(), listed: r.sortedPaths()}
		rec.c.Unbounded = r.str()
		rec.c.OpenAPI = r.flag()
		rec.c.Helm = r.flag()
		for range r.count() {
			rec.c.Remote = append(rec.c.Remote, closure.Remote{Ref: r.str(), Field: r.str(), File: r.str()})
		}
		rec.may = may(r.num())
		if rec.may > mayDoes {
			r.fail("a bad closure")
		}
		if r.err != nil {
			return nil, r.err
		}
		recs = append(recs, rec)
	}
	for range r.count() {
		c := r.commit(files, recs)
		if r.err != nil {
			return nil, r.err
		}
		ix.commits = append(ix.commits, c)
	}
	if r.err == nil && r.left() > 0 {
		r.fail("bytes after the end")
	}
	if r.err != nil {
		return nil, r.err
	}
	return ix, nil
}

// reader reads what writer wrote; the first problem sticks (err), and
// every read after it gives zero values. Objects are slices of the data
// itself (most of an index's bytes).
type reader struct {
	b     []byte
	off   int
	paths []string
	slab  []string // what sortedPaths hands out slices of
	err   error
}

func newReader(data []byte) *reader { return &reader{b: data} }

func (r *reader) fail(why string) {
	if r.err == nil {
		r.err = errors.New("damaged Argo CD index: " + why)
	}
	r.off = len(r.b)
}

// left is how many bytes are left.
func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) num() int {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > maxIndexItems {
		r.fail("a bad number")
		return 0
	}
	r.off += n
	return int(v)
}

// count is a number of items, each at least one byte long.
func (r *reader) count() int {
	n := r.num()
	if n > r.left() {
		r.fail("a count past the end")
		return 0
	}
	return n
}

// span is the next length-prefixed run of bytes, as offsets.
func (r *reader) span() (int, int) {
	n := r.num()
	if n > r.left() {
		r.fail("a string past the end")
		return r.off, r.off
	}
	r.off += n
	return r.off - n, r.off
}

func (r *reader) bytes() []byte {
	i, j := r.span()
	return r.b[i:j:j]
}

func (r *reader) str() string {
	i, j := r.span()
	return string(r.b[i:j])
}

func (r *reader) strs() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.str())
	}
	return out
}

func (r *reader) flag() bool {
	if r.left() == 0 || r.b[r.off] > 1 {
		r.fail("a bad flag")
		return false
	}
	v := r.b[r.off] == 1
	r.off++
	return v
}

func (r *reader) path() string {
	i := r.num()
	if i >= len(r.paths) {
		r.fail("a path past the table")
		return ""
	}
	return r.paths[i]
}

func (r *reader) pathList() []string {
	var out []string
	for range r.count() {
		out = append(out, r.path())
	}
	return out
}

func (r *reader) sortedPaths() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	// Taken from one slab: an index holds thousands of closures.
	if cap(r.slab)-len(r.slab) < n {
		r.slab = make([]string, 0, max(n, 1<<14))
	}
	out := r.slab[len(r.slab) : len(r.slab) : len(r.slab)+n]
	r.slab = r.slab[:len(r.slab)+n]
	last := -1
	for range n {
		last += r.num() + 1
		if last >= len(r.paths) || last < 0 {
			r.fail("a path past the table")
			return nil
		}
		out = append(out, r.paths[last])
	}
	return out
}

// stub is an Application read from the index with its facts, in one
// allocation.
type stub struct {
	app   Application
	facts appFacts
}

// app reads an Application declared in file, its spec left to decode.
func (r *reader) app(file string) *Application {
	st := &stub{}
	a := &st.app
	a.Namespace, a.Name, a.File = r.str(), r.str(), file
	a.Destination = Destination{Server: r.str(), Name: r.str(), Namespace: r.str()}
	st.facts = appFacts{skip: r.str(), renders: r.flag()}
	a.facts = &st.facts
	a.object = r.bytes()
	if r.err == nil && (a.Name == "" || a.Namespace == "") {
		r.fail("an Application without a name")
	}
	return a.named()
}

func (r *reader) commit(files []*fileRec, recs []*closureRec) *commitState {
	c := &commitState{id: r.str()}
	in := make([]bool, len(files)) // the commit's files
	for range r.count() {
		i := r.num()
		if i >= len(files) || (len(c.files) > 0 && c.files[len(c.files)-1].path >= files[i].path) {
			r.fail("a commit's files out of order")
			return nil
		}
		c.files = append(c.files, files[i])
		in[i] = true
	}
	for range r.count() {
		i, j := r.num(), r.num()
		if i >= len(files) || j >= len(files[i].decl.Sets) || !in[i] {
			r.fail("an expansion of no ApplicationSet of the commit")
			return nil
		}
		set := files[i].decl.Sets[j]
		x := &expansion{set: set, roots: r.strs()}
		if r.flag() {
			x.err = errors.New(r.str())
		} else {
			for range r.count() {
				a := r.app(set.File)
				a.Set = set.ID()
				a.setPolicy = set.applicationsSync()
				a.Inputs = r.pathList()
				x.apps = append(x.apps, a)
			}
		}
		c.sets = append(c.sets, x)
	}
	n := r.count()
	c.closures = make(map[*Application]*closureRec, n)
	for range n {
		a := r.appRef(c, files, in)
		i := r.num()
		if r.err != nil {
			return nil
		}
		if i >= len(recs) || c.closures[a] != nil || (recs[i].c.Overlay != "" && recs[i].c.Overlay != a.ID()) {
			r.fail("a bad closure")
			return nil
		}
		recs[i].c.Overlay = a.ID()
		c.closures[a] = recs[i]
	}
	return c
}

// appRef reads which Application of c a closure is.
func (r *reader) appRef(c *commitState, files []*fileRec, in []bool) *Application {
	where, j := r.num(), r.num()
	var apps []*Application
	if where%2 == 0 && where/2 < len(files) && in[where/2] {
		apps = files[where/2].decl.Applications
	} else if where%2 == 1 && where/2 < len(c.sets) {
		apps = c.sets[where/2].apps
	}
	if j >= len(apps) {
		r.fail("a closure of no Application of the commit")
		return &Application{}
	}
	return apps[j]
}

// maxRevisions bounds the targetRevisions an index records.
const maxRevisions = 256

// Index is what the engine knows of the commits of snaps after planning
// them (res, as Plan returned them), for a later plan (DecodeIndex,
// Use): their Argo CD files, their ApplicationSets' expansions, and their
// Applications' closures with whether each may render Applications. A
// snapshot of a work tree is left out; nil when nothing is left.
func (e *Engine) Index(ctx context.Context, snaps []*snapshot.Snapshot, res []*Result) *Index {
	ix := &Index{settings: e.settingsKey(), revisions: map[string]bool{}, files: map[fileKey]*fileRec{}}
	if old := e.index.Load(); old != nil {
		maps.Copy(ix.revisions, old.revisions)
	}
	// Newest (head) first.
	for i := len(snaps) - 1; i >= 0; i-- {
		s := snaps[i]
		if s.Rev == snapshot.WorkingTree || slices.ContainsFunc(ix.commits, func(c *commitState) bool { return c.id == s.Rev }) {
			continue
		}
		v, ok := e.states.Load(s)
		if !ok {
			continue
		}
		so := v.(*stateOnce)
		if so.st == nil {
			continue
		}
		c := &commitState{id: s.Rev, files: so.st.files, sets: so.st.sets, closures: map[*Application]*closureRec{}}
		var ask []*Target
		for _, t := range res[i].Targets {
			if t.Parent != nil || t.twin || t.Closure == nil || t.Closure.Err != nil {
				continue
			}
			if t.may == mayAsk {
				ask = append(ask, t)
			}
		}
		e.mayFiles(ctx, s, ask)
		for _, t := range res[i].Targets {
			if t.Parent != nil || t.twin || t.Closure == nil || t.Closure.Err != nil {
				continue
			}
			c.closures[t.Application] = &closureRec{c: t.Closure, own: t.own, listed: t.listed, may: t.may}
		}
		var apps []*Application
		for _, f := range c.files {
			ix.files[fileKey{f.path, f.id}] = f
			apps = append(apps, f.decl.Applications...)
		}
		for _, x := range c.sets {
			apps = append(apps, x.apps...)
		}
		for _, a := range apps {
			if sp := a.spec.Load(); sp != nil && sp.err != nil {
				return nil // a damaged index is not kept
			}
			a.facts = e.factsOf(a)
		}
		ix.commits = append(ix.commits, c)
	}
	e.tracked.Range(func(k, v any) bool {
		ix.revisions[k.(string)] = v.(bool)
		return true
	})
	if len(ix.commits) == 0 || len(ix.revisions) > maxRevisions {
		return nil
	}
	return ix
}
