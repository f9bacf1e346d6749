package snapshot

import (
	"path"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlayFS serves a file system with one file replaced (or added), for
// one build: the kustomization Flux's generator made, or the one with an
// Argo CD Application's kustomize settings. Other builds of the same
// directory see the committed file.
type overlayFS struct {
	filesys.FileSystem
	file string // absolute snapshot path
	data []byte
	mem  filesys.FileSystem // holds file, for Open
}

var _ filesys.FileSystem = (*overlayFS)(nil)

// WithFile is base with the file rel (repository-relative) reading as
// data, for one build.
func WithFile(base filesys.FileSystem, rel string, data []byte) (filesys.FileSystem, error) {
	o := &overlayFS{FileSystem: base, file: Abs(rel), data: data, mem: filesys.MakeFsInMemory()}
	if err := o.mem.WriteFile(o.file, data); err != nil {
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
