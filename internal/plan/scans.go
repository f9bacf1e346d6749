package plan

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// scanner is a row whose detection searches the YAML files of a side for
// strings (the API groups of its kinds) before parsing any: the planner
// searches for every row's strings in one pass over the base's files, and
// keeps what it found in the render cache, per commit (the files holding
// each string) and per content (whether it holds each), so that the next
// plan of a commit a plan read, or of one a diff away, searches only the
// files of the diff, and any other reads only the contents no plan has
// searched (most of a commit's contents are its parent's).
type scanner interface {
	// needles are the strings searched for, nil when opts leave the row
	// nothing to detect.
	needles(opts Options) []string
}

// detectNeedles are the needles of every scanner row, sorted.
func detectNeedles(opts Options, engines []engine) []string {
	var out []string
	for _, e := range engines {
		if s, ok := e.(scanner); ok {
			out = append(out, s.needles(opts)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// grepAtLeast is the fewest contents not searched yet worth a git grep
// (snapshot.SearchYAML).
const grepAtLeast = 64

// maxDiffSearched is the most YAML files of a diff with a commit a plan
// read that the base's search reads from that commit's answers; past it,
// the base is searched whole (git grep, the answers by content).
const maxDiffSearched = 1024

// scanBase searches every YAML file of base for needles, in one pass, or
// takes what a plan before it found (st): the rows' detections then find
// the answers known (snapshot.KnowYAMLHolders). An error is met again by
// the detection that needs the answer.
func scanBase(ctx context.Context, log *slog.Logger, base *snapshot.Snapshot, needles []string, st *scanStore, near *nearby) {
	if len(needles) == 0 || st.fromCommits(ctx, log, base, needles, near) {
		return
	}
	st.loadContents(base.Blobs())
	if err := base.SearchYAML(ctx, grepAtLeast, needles...); err != nil {
		log.Debug("searching with git grep failed; reading the files instead", "err", err)
	}
	each, err := base.ContainingEach(ctx, yamlPaths(base.Index.Paths()), needles...)
	if err != nil {
		return
	}
	for i, n := range needles {
		base.KnowYAMLHolders(n, each[i])
	}
}

// yamlPaths are the YAML files among paths.
func yamlPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if snapshot.IsYAML(p) {
			out = append(out, p)
		}
	}
	return out
}

// scanStore keeps the searches' answers in the render cache between
// plans (never for --full, which reads no cache).
type scanStore struct {
	cache   *rendercache.Cache
	version string
	commits []rendercache.CommitScans // what plans found of commits, newest first
	// contents are the answers by content, read only when the base
	// is searched (nil: not read).
	contents rendercache.Scans
	// hit says the base's answers were those kept of its commit: a
	// plan of it keeps its sides' only when warming the cache
	// (Options.Warm, a push to the default branch).
	hit, warm bool
}

// loadScans reads what earlier plans found of commits, when the plan
// keeps a render cache; nil otherwise.
func loadScans(opts Options) *scanStore {
	if opts.Full || opts.CacheDir == "" {
		return nil
	}
	c, err := rendercache.Open(opts.CacheDir)
	if err != nil {
		return nil // the planner reports the cache's error when it opens it
	}
	st := &scanStore{cache: c, version: buildVersion(), warm: opts.Warm}
	st.commits, err = c.CommitScans(st.version)
	if err != nil {
		opts.Logger.Debug("the render cache's searches of commits are not read", "err", err)
	}
	return st
}

// fromCommits makes base know its YAML files holding needles from what a
// plan found of base's commit, or of a commit a diff away (near) and the
// diff's files; false when it cannot.
func (st *scanStore) fromCommits(ctx context.Context, log *slog.Logger, base *snapshot.Snapshot, needles []string, near *nearby) bool {
	if st == nil {
		return false
	}
	var from *rendercache.CommitScans
	for i, c := range st.commits {
		covers := !slices.ContainsFunc(needles, func(n string) bool { _, ok := c.Found[n]; return !ok })
		if covers && (c.Commit == base.Rev || from == nil) {
			from = &st.commits[i]
		}
	}
	if from == nil {
		return false
	}
	var changed map[string]bool
	if from.Commit != base.Rev {
		var err error
		if changed, err = near.diff(ctx, from.Commit); err != nil {
			log.Debug("the render cache's searches of a commit are not used", "commit", from.Commit, "err", err)
			return false
		}
	}
	var search []string
	for p := range changed {
		if _, ok := base.Index.ID(p); ok && snapshot.IsYAML(p) {
			search = append(search, p)
		}
	}
	if len(search) > maxDiffSearched {
		return false
	}
	slices.Sort(search)
	each, err := base.ContainingEach(ctx, search, needles...)
	if err != nil {
		return false
	}
	for i, n := range needles {
		ps := slices.DeleteFunc(slices.Clone(from.Found[n]), func(p string) bool { return changed[p] })
		base.KnowYAMLHolders(n, append(ps, each[i]...))
	}
	st.hit = from.Commit == base.Rev && !st.warm
	return true
}

// loadContents gives blobs what earlier plans found by content, read
// once.
func (st *scanStore) loadContents(blobs *snapshot.Blobs) {
	if st == nil || st.contents != nil {
		return
	}
	st.contents = st.cache.Scans()
	blobs.Remember(st.contents)
}

// save writes what the plan knows of the needles: for each side's
// commit, its YAML files holding each (unless the file holds those
// commits already); and when the base was searched, for every content of
// the sides' YAML files whether it holds each, when it learnt something
// (the answers for contents no side has any more are left out, so the
// file stays the size of the repository's YAML).
func (st *scanStore) save(ctx context.Context, needles []string, base, head *snapshot.Snapshot) error {
	if st == nil || len(needles) == 0 {
		return nil
	}
	if err := st.saveCommits(ctx, needles, base, head); err != nil {
		return err
	}
	if st.contents == nil {
		return nil
	}
	seen := map[string]bool{}
	var ids []string
	for _, s := range []*snapshot.Snapshot{base, head} {
		for _, p := range yamlPaths(s.Index.Paths()) {
			if id, ok := s.Index.ID(p); ok && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	out := rendercache.Scans{}
	changed := false
	for _, n := range needles {
		out[n] = base.Blobs().Found(n, ids)
		changed = changed || !maps.Equal(out[n], st.contents[n])
	}
	if !changed {
		return nil
	}
	return st.cache.PutScans(out)
}

// saveCommits keeps the YAML files holding each needle of the sides'
// commits: base's as known, head's as base's but for the files the
// change touched.
func (st *scanStore) saveCommits(ctx context.Context, needles []string, base, head *snapshot.Snapshot) error {
	if st.hit {
		return nil
	}
	b := rendercache.CommitScans{Commit: base.Rev, Found: map[string][]string{}}
	for _, n := range needles {
		ps, ok := base.YAMLHolders(n)
		if !ok {
			return nil // the base's search failed
		}
		b.Found[n] = ps
	}
	out := []rendercache.CommitScans{b}
	if head.Rev != snapshot.WorkingTree && head.Rev != base.Rev {
		changed := snapshot.Changed(base.Index, head.Index)
		var search []string
		for p := range changed {
			if _, ok := head.Index.ID(p); ok && snapshot.IsYAML(p) {
				search = append(search, p)
			}
		}
		slices.Sort(search)
		each, err := head.ContainingEach(ctx, search, needles...)
		if err != nil {
			return err
		}
		h := rendercache.CommitScans{Commit: head.Rev, Found: map[string][]string{}}
		for i, n := range needles {
			h.Found[n] = append(slices.DeleteFunc(slices.Clone(b.Found[n]), func(p string) bool { return changed[p] }), each[i]...)
		}
		out = []rendercache.CommitScans{h, b}
	}
	same := len(out) == len(st.commits)
	for i := range out {
		same = same && out[i].Commit == st.commits[i].Commit
	}
	if same {
		return nil
	}
	return st.cache.PutCommitScans(st.version, out)
}

// nearby are the diffs between a plan's base and the commits plans
// before it read (the render cache's), each listed once for every row
// that asks.
type nearby struct {
	base  *snapshot.Snapshot
	mu    sync.Mutex
	diffs map[string]*diffOnce
}

type diffOnce struct {
	once    sync.Once
	changed map[string]bool
	err     error
}

func newNearby(base *snapshot.Snapshot) *nearby {
	return &nearby{base: base, diffs: map[string]*diffOnce{}}
}

// diff are the paths that differ between the base and commit
// (snapshot.Changed), listed from the base's listing and their diff.
func (n *nearby) diff(ctx context.Context, commit string) (map[string]bool, error) {
	n.mu.Lock()
	d := n.diffs[commit]
	if d == nil {
		d = &diffOnce{}
		n.diffs[commit] = d
	}
	n.mu.Unlock()
	d.once.Do(func() {
		from, err := snapshot.OpenFrom(ctx, n.base, commit)
		if err != nil {
			d.err = err
			return
		}
		d.changed = snapshot.Changed(n.base.Index, from.Index)
	})
	return d.changed, d.err
}
