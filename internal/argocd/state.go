package argocd

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// sideState is what a side's Applications are made of: the snapshot's
// Argo CD files, by path, and its ApplicationSets' expansions, in order.
type sideState struct {
	files []*fileRec
	decl  Declared // what files declare, merged
	sets  []*expansion
}

// origin is another tree whose sideState a side's is derived from:
// the base's for the head of a plan, or a commit of the index for the
// base. Only what the paths that differ can reach is derived again.
type origin struct {
	rev     string // the revision it is the origin of ("" any)
	files   []*fileRec
	sets    map[*AppSet]*expansion
	changed map[string]bool // what differs between it and the side
	reuse   *reuse          // of changed
	// closures are the closures computed on it, by Application; nil
	// when the side takes them otherwise (the head takes the base's
	// targets' own, reuse.closure).
	closures map[*Application]*closureRec
}

// stateOnce is the sideState of a snapshot, computed once.
type stateOnce struct {
	once sync.Once
	st   *sideState
	err  error
}

// state is s's sideState, derived from o (nil: from all of s),
// computed once per snapshot.
func (e *Engine) state(ctx context.Context, s *snapshot.Snapshot, o *origin) (*sideState, error) {
	v, _ := e.states.LoadOrStore(s, &stateOnce{})
	so := v.(*stateOnce)
	so.once.Do(func() { so.st, so.err = e.derive(ctx, s, o) })
	return so.st, so.err
}

// derive finds s's Argo CD files and expands its ApplicationSets:
// taking from o every file and expansion the paths that differ leave
// as they are.
func (e *Engine) derive(ctx context.Context, s *snapshot.Snapshot, o *origin) (*sideState, error) {
	st := &sideState{}
	var err error
	if o == nil {
		st.files, err = discoverFiles(ctx, s, s.Index.Paths(), e)
	} else {
		st.files, err = o.files2(ctx, s, e)
	}
	if err != nil {
		return nil, err
	}
	st.decl = merged(st.files)
	for _, set := range st.decl.Sets {
		if o != nil {
			if x := o.sets[set]; x != nil && !o.meetsRoots(x.roots) {
				st.sets = append(st.sets, x)
				continue
			}
		}
		x := &expansion{set: set, roots: setRoots(set)}
		x.apps, x.err = e.generate(ctx, s, set)
		st.sets = append(st.sets, x)
	}
	return st, nil
}

// files2 are s's Argo CD files: o's but those the paths that differ
// reach, read again from s.
func (o *origin) files2(ctx context.Context, s *snapshot.Snapshot, e *Engine) ([]*fileRec, error) {
	// A Chart.yaml appearing or going makes the files of its templates/
	// charts' templates or Applications.
	var charts []string
	for p := range o.changed {
		if path.Base(p) == "Chart.yaml" {
			charts = append(charts, path.Dir(p))
		}
	}
	again := func(p string) bool { return o.changed[p] || underTemplates(p, charts) }
	var kept []*fileRec
	for _, f := range o.files {
		if !again(f.path) {
			kept = append(kept, f)
		}
	}
	var read []string
	for p := range o.changed {
		if _, ok := s.Index.ID(p); ok {
			read = append(read, p)
		}
	}
	for _, c := range charts {
		read = append(read, tree(s, join(c, "templates"), true)...)
	}
	slices.Sort(read)
	fresh, err := discoverFiles(ctx, s, slices.Compact(read), e)
	if err != nil {
		return nil, err
	}
	out := append(kept, fresh...)
	slices.SortFunc(out, func(a, b *fileRec) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// underTemplates says whether p is below the templates/ of one of the
// chart directories.
func underTemplates(p string, charts []string) bool {
	if len(charts) == 0 {
		return false
	}
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if path.Base(d) == "templates" && slices.Contains(charts, path.Dir(d)) {
			return true
		}
	}
	return false
}

// meetsRoots says whether a path that differs is below one of roots.
func (o *origin) meetsRoots(roots []string) bool {
	for _, r := range roots {
		if r == "." || o.changed[r] || o.reuse.below[r] {
			return true
		}
	}
	return false
}

// setRoots are the directories an ApplicationSet's generators read
// below: what the git generators' paths name before any pattern or
// template ("." when one starts with either, or is not a path). Its
// list and clusters generators read no file of the repository (the
// clusters are the settings').
func setRoots(set *AppSet) []string {
	spec, _ := set.Object["spec"].(map[string]any)
	var roots []string
	var walk func(gens any)
	walk = func(gens any) {
		list, ok := gens.([]any)
		if !ok {
			if gens != nil {
				roots = append(roots, ".")
			}
			return
		}
		for _, g := range list {
			m, ok := g.(map[string]any)
			if !ok {
				roots = append(roots, ".")
				continue
			}
			for kind, v := range m {
				switch kind {
				case "git":
					roots = append(roots, gitRoots(v)...)
				case "matrix", "merge":
					c, _ := v.(map[string]any)
					walk(c["generators"])
				}
			}
		}
	}
	if spec != nil {
		walk(spec["generators"])
	}
	slices.Sort(roots)
	return slices.Compact(roots)
}

// gitRoots are the roots of a git generator's spec g.
func gitRoots(g any) []string {
	m, ok := g.(map[string]any)
	if !ok {
		return []string{"."}
	}
	var out []string
	for _, k := range []string{"directories", "files"} {
		items, ok := m[k].([]any)
		if m[k] != nil && !ok {
			return []string{"."}
		}
		for _, it := range items {
			im, _ := it.(map[string]any)
			p, ok := im["path"].(string)
			if !ok {
				return []string{"."}
			}
			out = append(out, literalDir(p))
		}
	}
	return out
}

// literalDir is the directory a path pattern names before its first
// pattern or template character, "." when none.
func literalDir(p string) string {
	p = strings.TrimPrefix(p, "./")
	var lit []string
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, `*?[]{}\`) {
			break
		}
		lit = append(lit, seg)
	}
	if len(lit) == 0 {
		return "."
	}
	return strings.Join(lit, "/")
}
