package plan

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// scanner is a row whose detection searches the YAML files of a side for
// strings (the API groups of its kinds) before parsing any: the planner
// searches for every row's strings in one pass over the base's files, one
// read of each content for all rows, and keeps what it found by content in
// the render cache, so that the next plan reads only contents no plan has
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

// scanBase searches every YAML file of base for needles, in one pass; the
// rows' detections then find the answers remembered. An error is met
// again by the detection that needs the answer.
func scanBase(ctx context.Context, log *slog.Logger, base *snapshot.Snapshot, needles []string) {
	if len(needles) == 0 {
		return
	}
	if err := base.SearchYAML(ctx, grepAtLeast, needles...); err != nil {
		log.Debug("searching with git grep failed; reading the files instead", "err", err)
	}
	_, _ = base.ContainingEach(ctx, yamlPaths(base.Index.Paths()), needles...)
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

// scanStore keeps the searches' answers in the render cache between plans.
type scanStore struct {
	cache  *rendercache.Cache
	loaded rendercache.Scans // the answers read
}

// loadScans gives blobs what earlier plans found, when the plan keeps a
// render cache (never for --full, which reads no cache); nil otherwise.
func loadScans(opts Options, blobs *snapshot.Blobs) *scanStore {
	if opts.Full || opts.CacheDir == "" {
		return nil
	}
	c, err := rendercache.Open(opts.CacheDir)
	if err != nil {
		return nil // the planner reports the cache's error when it opens it
	}
	st := &scanStore{cache: c, loaded: c.Scans()}
	blobs.Remember(st.loaded)
	return st
}

// save writes what the plan knows of the needles for the YAML files of
// sides, when it learnt something: the answers for contents no side has
// any more are left out, so the file stays the size of the repository's
// YAML.
func (st *scanStore) save(needles []string, sides ...*snapshot.Snapshot) error {
	if st == nil || len(needles) == 0 || len(sides) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var ids []string
	for _, s := range sides {
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
		out[n] = sides[0].Blobs().Found(n, ids)
		changed = changed || !maps.Equal(out[n], st.loaded[n])
	}
	if !changed {
		return nil
	}
	return st.cache.PutScans(out)
}
