package snapshot

import (
	"path"
	"slices"
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
	dirs  map[string]bool   // every directory holding a file; "." always
	tree  *tree             // for paths through a symlink loop; may be nil
}

func newIndex(t *tree, files map[string]string) *Index {
	ix := &Index{files: files, dirs: map[string]bool{".": true}, tree: t}
	for name := range files {
		for d := path.Dir(name); !ix.dirs[d]; d = path.Dir(d) {
			ix.dirs[d] = true
		}
	}
	return ix
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
	if ix.dirs[rel] {
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

// Paths lists every file, sorted.
func (ix *Index) Paths() []string {
	out := make([]string, 0, len(ix.files))
	for p := range ix.files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Changed returns the paths whose state differs between two trees: files
// added, deleted or modified, and directories that appear or disappear
// with them. A render reads paths (files, and directories it checks), so
// it can only differ between the trees if one of its paths is here.
func Changed(a, b *Index) map[string]bool {
	changed := map[string]bool{}
	mark := func(p string) {
		changed[p] = true
		for d := path.Dir(p); d != "." && !changed[d]; d = path.Dir(d) {
			if a.dirs[d] != b.dirs[d] {
				changed[d] = true
			}
		}
	}
	for p, id := range a.files {
		if b.files[p] != id {
			mark(p)
		}
	}
	for p := range b.files {
		if _, ok := a.files[p]; !ok {
			mark(p)
		}
	}
	return changed
}
