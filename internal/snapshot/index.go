package snapshot

import (
	"maps"
	"path"
	"slices"
	"sync"
)

// Index lists the files of a tree with their content's git blob id, and
// the directories that hold them. Two indexes compare without reading any
// content: a file changed exactly when its id did.
//
// Files reached through symlinks are listed under every name they are
// reached by (the link's, and the target's), so that a change of either
// is a change of the path a render reads.
type Index struct {
	files map[string]string // repository-relative path -> blob id
	// dirs has every directory holding a file as a key, "." always; the
	// values are the tree's listings, or nil.
	dirs map[string][]string
	tree *tree // for paths through a symlink loop; may be nil
	// from is the index this one was made from by applying a diff, and
	// delta what Changed(from, this) is.
	from  *Index
	delta map[string]bool

	sortOnce sync.Once
	sorted   []string // Paths
}

func newIndex(t *tree, files map[string]string) *Index {
	ix := &Index{files: files, dirs: map[string][]string{".": nil}, tree: t}
	for name := range files {
		for d := path.Dir(name); !ix.isDir(d); d = path.Dir(d) {
			ix.dirs[d] = nil
		}
	}
	return ix
}

func (ix *Index) isDir(rel string) bool {
	_, ok := ix.dirs[rel]
	return ok
}

// ID returns the blob id of the file at a repository-relative path.
func (ix *Index) ID(rel string) (string, bool) {
	if id, ok := ix.files[rel]; ok {
		return id, true
	}
	if real, k := ix.resolve(rel); k == regular {
		return ix.tree.files[real], true
	}
	return "", false
}

// IsDir reports whether rel is a directory of the tree (git has no empty
// directories, so: whether some file lies below it).
func (ix *Index) IsDir(rel string) bool {
	if ix.isDir(rel) {
		return true
	}
	_, k := ix.resolve(rel)
	return k == directory
}

// resolve looks up the paths the listing leaves out: those that go round
// a symlink loop, which the OS still resolves.
func (ix *Index) resolve(rel string) (string, kind) {
	if ix.tree == nil || len(ix.tree.links) == 0 {
		return "", absent
	}
	real, k, err := resolve(ix.tree.lstat, rel)
	if err != nil {
		return "", absent
	}
	return real, k
}

// State describes a path for comparison and cache keys: "f:<blob id>",
// "d" for a directory, "-" for nothing.
func (ix *Index) State(rel string) string {
	if id, ok := ix.ID(rel); ok {
		return "f:" + id
	}
	if ix.IsDir(rel) {
		return "d"
	}
	return "-"
}

// Paths lists every file, sorted; the caller must not change it.
func (ix *Index) Paths() []string {
	ix.sortOnce.Do(func() {
		if ix.from == nil {
			ix.sorted = slices.Sorted(maps.Keys(ix.files))
			return
		}
		// from's list, without the files gone, with those added.
		var added []string
		for p := range ix.delta {
			if _, now := ix.files[p]; now {
				if _, before := ix.from.files[p]; !before {
					added = append(added, p)
				}
			}
		}
		slices.Sort(added)
		out := make([]string, 0, len(ix.files))
		for _, p := range ix.from.Paths() {
			for len(added) > 0 && added[0] < p {
				out, added = append(out, added[0]), added[1:]
			}
			if _, ok := ix.files[p]; ok {
				out = append(out, p)
			}
		}
		ix.sorted = append(out, added...)
	})
	return ix.sorted
}

// Changed returns the paths whose state differs between two trees: files
// added, deleted or modified, and directories that appear or disappear
// with them. A render reads paths (files, and directories it checks), so
// it can only differ between the trees if one of its paths is here.
func Changed(a, b *Index) map[string]bool {
	switch {
	case b.from == a:
		return b.delta
	case a.from == b:
		return a.delta
	}
	changed := map[string]bool{}
	for p, id := range a.files {
		if b.files[p] != id {
			markChanged(changed, a, b, p)
		}
	}
	for p := range b.files {
		if _, ok := a.files[p]; !ok {
			markChanged(changed, a, b, p)
		}
	}
	return changed
}

// markChanged adds p, a file of a or b that differs between them, to
// changed, with the directories above it that exist on one side only.
func markChanged(changed map[string]bool, a, b *Index, p string) {
	changed[p] = true
	for d := path.Dir(p); d != "." && !changed[d]; d = path.Dir(d) {
		if a.isDir(d) != b.isDir(d) {
			changed[d] = true
		}
	}
}

// IsYAML says whether a file is YAML by its name (.yaml or .yml), as
// kustomize and the GitOps controllers read it.
func IsYAML(rel string) bool {
	ext := path.Ext(rel)
	return ext == ".yaml" || ext == ".yml"
}
