package closure

import (
	"context"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// snapshotSource reads a snapshot as the closure needs it: existence from
// its index, content as committed.
type snapshotSource struct {
	ctx context.Context
	s   *snapshot.Snapshot
}

// SnapshotSource is a Source over s; reads that wait for git use ctx.
func SnapshotSource(ctx context.Context, s *snapshot.Snapshot) Source {
	return snapshotSource{ctx: ctx, s: s}
}

func (src snapshotSource) Stat(rel string) Kind {
	if _, ok := src.s.Index.ID(rel); ok {
		return File
	}
	if src.s.Index.IsDir(rel) {
		return Dir
	}
	return Absent
}

func (src snapshotSource) ReadFile(rel string) ([]byte, error) {
	return src.s.ReadFile(src.ctx, rel)
}

func (src snapshotSource) Files(dir string) []string {
	all := src.s.Index.Paths()
	if dir == "." {
		return all
	}
	i, _ := slices.BinarySearch(all, dir+"/")
	j := i
	for j < len(all) && strings.HasPrefix(all[j], dir+"/") {
		j++
	}
	return all[i:j]
}
