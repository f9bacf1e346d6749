package snapshot

import (
	"context"
	"maps"
	"slices"
)

// Regular lists the regular files of the tree, sorted: no symlink, and
// no file reached only through one (a walk that does not follow links,
// as filepath.Walk, finds these and no others).
func (s *Snapshot) Regular() []string {
	return slices.Sorted(maps.Keys(s.tree.files))
}

// Compose is a snapshot of another tree made of s's regular files:
// files maps each of its paths to the regular file of s whose content
// it has (the same path, for a file kept in place). It has no symlinks
// and shares s's contents, read once for both. It is how kplan gives a
// build the tree another program hands it instead of the commit
// (source-controller's artifact of a GitRepository: what its ignore
// rules leave, with the artifacts it includes copied in): a path absent
// from files does not exist for that build. Compose returns s itself
// when files is every file of s in place and s has no symlinks.
func (s *Snapshot) Compose(ctx context.Context, files map[string]string) (*Snapshot, error) {
	t := newTree()
	same := len(s.tree.links) == 0 && len(files) == len(s.tree.files)
	for p, from := range files {
		id, ok := s.tree.files[from]
		if !ok || tooDeep(p) {
			same = false
			continue
		}
		same = same && p == from
		t.files[p] = id
	}
	if same {
		return s, nil
	}
	return t.snapshot(ctx, s.Rev, t.index(), s.blobs, nil)
}
