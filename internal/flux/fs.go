package flux

import (
	"path"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// overlayFS serves a snapshot with one kustomization file replaced (or
// added) by the one Flux's generator made, for one build: other builds
// of the same directory see the committed file.
type overlayFS struct {
	filesys.FileSystem
	file string // absolute snapshot path
	data []byte
	mem  filesys.FileSystem // holds file, for Open
}

var _ filesys.FileSystem = (*overlayFS)(nil)

func newOverlayFS(base filesys.FileSystem, g *generated) (*overlayFS, error) {
	o := &overlayFS{FileSystem: base, file: snapshot.Abs(g.File), data: g.Data, mem: filesys.MakeFsInMemory()}
	if err := o.mem.WriteFile(o.file, g.Data); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *overlayFS) is(p string) bool { return path.Clean(filepath.ToSlash(p)) == o.file }

func (o *overlayFS) ReadFile(p string) ([]byte, error) {
	if o.is(p) {
		return slices.Clone(o.data), nil
	}
	return o.FileSystem.ReadFile(p)
}

func (o *overlayFS) Open(p string) (filesys.File, error) {
	if o.is(p) {
		return o.mem.Open(o.file)
	}
	return o.FileSystem.Open(p)
}

func (o *overlayFS) Exists(p string) bool { return o.is(p) || o.FileSystem.Exists(p) }

func (o *overlayFS) IsDir(p string) bool { return !o.is(p) && o.FileSystem.IsDir(p) }

func (o *overlayFS) ReadDir(p string) ([]string, error) {
	names, err := o.FileSystem.ReadDir(p)
	if err != nil || path.Clean(filepath.ToSlash(p)) != path.Dir(o.file) {
		return names, err
	}
	if base := path.Base(o.file); !slices.Contains(names, base) {
		names = append(names, base)
		slices.Sort(names)
	}
	return names, nil
}

func (o *overlayFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if o.is(p) {
		return filesys.ConfirmedDir(path.Dir(o.file)), path.Base(o.file), nil
	}
	return o.FileSystem.CleanedAbs(p)
}
