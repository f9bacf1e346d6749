package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kind is what a path names, as lstat sees it.
type kind uint8

const (
	absent kind = iota
	regular
	directory
	symlink
)

// maxLinks bounds the symlinks one lookup follows, as Linux's MAXSYMLINKS
// does: more means a loop.
const maxLinks = 40

// lister describes a tree without following symlinks. Paths are
// repository-relative, slash-separated and clean, "." for the top.
type lister interface {
	// lstat says what rel is; for a symlink, also its target as written.
	lstat(rel string) (kind, string)
	// children lists the names in directory rel, sorted.
	children(rel string) []string
}

// store is where an FS's tree comes from: a commit, or a disk.
type store interface {
	lister
	// read returns the content of the regular file rel.
	read(rel string) ([]byte, error)
}

// FS is kplan's read-only kyaml filesys.FileSystem over a repository tree:
// the repository's top is Root, any name git stores is a valid name, and
// symlinks resolve as the OS resolves them, except that a link leaving the
// repository (absolute, or climbing above its top) leads nowhere. Paths
// above Root do not exist. kplan's own rewrites of files (Override) sit
// above the tree without changing it.
type FS struct {
	st store
	// mu guards overrides; the store guards itself.
	mu        sync.RWMutex
	overrides map[string][]byte // real repository-relative path -> content
}

var _ filesys.FileSystem = (*FS)(nil)

func newFS(st store) *FS { return &FS{st: st, overrides: map[string][]byte{}} }

// errReadOnly is the answer to every write: a plan must not change the
// tree it plans.
var errReadOnly = errors.New("the repository snapshot is read-only")

// notFound is the error for a path the FS does not have, worded as
// kyaml's in-memory FS words it, with the reason when there is more to
// say than that the name is missing.
type notFound struct {
	path   string
	reason error // nil: the name is missing
}

func (e *notFound) Error() string {
	if e.reason == nil {
		return fmt.Sprintf("'%s' doesn't exist", e.path)
	}
	return fmt.Sprintf("'%s' doesn't exist: %v", e.path, e.reason)
}

func (e *notFound) Unwrap() error { return fs.ErrNotExist }

// errMissing is resolve's reason for a name that is not there.
var errMissing = errors.New("no such file or directory")

// rel maps an absolute FS path to a repository-relative one; relative
// paths are taken from Root. Paths above Root are not in the repository.
func rel(p string) (string, error) {
	p = filepath.ToSlash(p)
	if !path.IsAbs(p) {
		p = path.Join(Root, p)
	}
	p = path.Clean(p)
	if p == Root {
		return ".", nil
	}
	r, ok := strings.CutPrefix(p, Root+"/")
	if !ok {
		return "", errors.New("it is above the repository's top")
	}
	return r, nil
}

// resolve walks p (repository-relative; it may hold ".." and links) one
// name at a time as the OS does: a symlink met on the way, the last name
// included, is replaced by its target, relative to the link's directory,
// and a ".." after it leaves the target, not the link. It returns the
// real path (no links) and its kind, or why the path leads nowhere:
// errMissing, or a link that leaves the repository or loops.
func resolve(lstat func(string) (kind, string), p string) (string, kind, error) {
	if real, k, err, ok := resolveDirect(lstat, p); ok {
		return real, k, err
	}
	done := make([]string, 0, strings.Count(p, "/")+1)
	todo := strings.Split(p, "/")
	k, links := directory, 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", absent, fmt.Errorf("%s climbs above the repository's top", p)
			}
			done = done[:len(done)-1]
			k = directory
			continue
		}
		if k != directory {
			return "", absent, fmt.Errorf("%s is not a directory", strings.Join(done, "/"))
		}
		cur := strings.Join(append(done, c), "/")
		var target string
		k, target = lstat(cur)
		switch {
		case k == absent:
			return "", absent, errMissing
		case k == symlink:
			if links++; links > maxLinks {
				return "", absent, errors.New("too many levels of symbolic links")
			}
			if target == "" || path.IsAbs(target) {
				return "", absent, fmt.Errorf("symlink %s leads outside the repository (%s)", cur, target)
			}
			todo = append(strings.Split(target, "/"), todo...)
			k = directory // the link's directory, where its target starts
			continue
		}
		done = append(done, c)
	}
	if len(done) == 0 {
		return ".", directory, nil
	}
	return strings.Join(done, "/"), k, nil
}

// resolveDirect is resolve for the common path: clean (no ".", ".." or
// empty name) and with no symlink on the way, each prefix looked up as a
// slice of p. The walk below builds every prefix anew, which costs the
// path's length squared: a 10,000-deep directory in a pull request made
// 200 MB of garbage (TestResolveDeepPathIsLinear). ok false leaves the
// path to that walk: it holds a link, or is not clean.
func resolveDirect(lstat func(string) (kind, string), p string) (real string, k kind, err error, ok bool) {
	if p == "" || p == "." || p == ".." || strings.HasPrefix(p, "../") || path.Clean(p) != p {
		return "", absent, nil, false
	}
	for i := 0; ; {
		end := len(p)
		if j := strings.IndexByte(p[i:], '/'); j >= 0 {
			end = i + j
		}
		switch k, _ = lstat(p[:end]); {
		case k == absent:
			return "", absent, errMissing, true
		case k == symlink:
			return "", absent, nil, false
		case end == len(p):
			return p, k, nil, true
		case k != directory:
			return "", absent, nil, false // the walk says which is no directory
		}
		i = end + 1
	}
}

// stat resolves an FS path, following a final symlink.
func (f *FS) stat(p string) (string, kind, error) {
	r, err := rel(p)
	if err != nil {
		return "", absent, &notFound{path: p, reason: err}
	}
	if pl, ok := f.st.(interface{ plain() bool }); ok && pl.plain() {
		// Without symlinks a path is its real path, and a file or
		// directory present has its directories present.
		if k, _ := f.st.lstat(r); k == regular || k == directory {
			return r, k, nil
		}
	}
	real, k, err := resolve(f.st.lstat, r)
	if errors.Is(err, errMissing) {
		return "", absent, &notFound{path: p}
	}
	if err != nil {
		return "", absent, &notFound{path: p, reason: err}
	}
	return real, k, nil
}

// KustomizationFiles lists the kustomization files of a tree that can
// list them without a walk (render's discovery), sorted; false when it
// cannot.
func (f *FS) KustomizationFiles() ([]string, bool) {
	if l, ok := f.st.(interface{ KustomizationFiles() ([]string, bool) }); ok {
		return l.KustomizationFiles()
	}
	return nil, false
}

// Override makes the file at p read as data from now on, for rewrites
// kplan makes before krusty reads a file (removing the inventory field).
// The tree, its Index and its blob ids keep what was committed.
func (f *FS) Override(p string, data []byte) error {
	real, k, err := f.stat(p)
	if err != nil {
		return err
	}
	if k != regular {
		return &fs.PathError{Op: "override", Path: p, Err: errors.New("not a regular file")}
	}
	f.mu.Lock()
	f.overrides[real] = data
	f.mu.Unlock()
	return nil
}

func (f *FS) read(real string) ([]byte, error) {
	f.mu.RLock()
	data, ok := f.overrides[real]
	f.mu.RUnlock()
	if ok {
		return data, nil
	}
	return f.st.read(real)
}

// ReadFile returns the content of the file at p.
func (f *FS) ReadFile(p string) ([]byte, error) {
	real, k, err := f.stat(p)
	if err != nil {
		return nil, err
	}
	if k != regular {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("is a directory")}
	}
	data, err := f.read(real)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	return data, nil
}

// Open opens the file or directory at p for reading.
func (f *FS) Open(p string) (filesys.File, error) {
	real, k, err := f.stat(p)
	if err != nil {
		return nil, err
	}
	var data []byte
	if k == regular {
		if data, err = f.read(real); err != nil {
			return nil, &fs.PathError{Op: "open", Path: p, Err: err}
		}
	}
	return &file{Reader: bytes.NewReader(data), info: fileInfo{name: path.Base(p), size: int64(len(data)), dir: k == directory}}, nil
}

// Exists reports whether p names a file or directory.
func (f *FS) Exists(p string) bool {
	_, _, err := f.stat(p)
	return err == nil
}

// IsDir reports whether p names a directory.
func (f *FS) IsDir(p string) bool {
	_, k, err := f.stat(p)
	return err == nil && k == directory
}

// ReadDir lists the names in the directory p, sorted.
func (f *FS) ReadDir(p string) ([]string, error) {
	real, k, err := f.stat(p)
	if err != nil {
		return nil, err
	}
	if k != directory {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: errors.New("not a directory")}
	}
	return f.st.children(real), nil
}

// CleanedAbs splits p into the directory holding it and its name, both
// with every symlink resolved, as kustomize's on-disk FS does with
// filepath.EvalSymlinks: krusty's load restrictor compares that directory
// with the kustomization root, so a link reaching outside the root is
// refused as it is on disk.
func (f *FS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	real, k, err := f.stat(p)
	if err != nil {
		return "", "", err
	}
	abs := Abs(real)
	if k == directory {
		return filesys.ConfirmedDir(abs), "", nil
	}
	return filesys.ConfirmedDir(path.Dir(abs)), path.Base(abs), nil
}

// Glob returns the paths matching pattern, as filepath.Glob, without
// hidden files unless the pattern names them (as kustomize's FS does).
func (f *FS) Glob(pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	matches := f.glob(path.Clean(filepath.ToSlash(pattern)))
	if filesys.IsHiddenFilePath(pattern) {
		return matches, nil
	}
	return filesys.RemoveHiddenFiles(matches), nil
}

func (f *FS) glob(pattern string) []string {
	if !strings.ContainsAny(pattern, `*?[\`) {
		if f.Exists(pattern) {
			return []string{pattern}
		}
		return nil
	}
	dir, name := path.Split(pattern)
	dir = path.Clean(dir)
	var dirs []string
	if strings.ContainsAny(dir, `*?[\`) {
		dirs = f.glob(dir)
	} else {
		dirs = []string{dir}
	}
	var out []string
	for _, d := range dirs {
		names, err := f.ReadDir(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if ok, _ := path.Match(name, n); ok {
				out = append(out, path.Join(d, n))
			}
		}
	}
	return out
}

// Walk visits p and what lies below it in lexical order, as filepath.Walk
// does, except that it follows symlinks that stay in the repository, so
// the files a link reaches are found under the link's name, as the Index
// lists them; a link back to a directory on the way (a loop) is not
// entered. Sizes are not reported: discovery needs names only.
func (f *FS) Walk(p string, fn filepath.WalkFunc) error {
	real, k, err := f.stat(p)
	if err != nil {
		return fn(p, nil, err)
	}
	err = walkLinks(f.st, p, real, k, nil, func(p, _ string, k kind) error {
		return fn(p, fileInfo{name: path.Base(p), dir: k == directory}, nil)
	})
	if errors.Is(err, filepath.SkipDir) || errors.Is(err, filepath.SkipAll) {
		return nil
	}
	return err
}

// walkLinks calls visit for p (whose real path is real) and, for a
// directory, for what lies below it in lexical order, following symlinks:
// p is the path as reached, real the path with links resolved. A link
// that dangles, loops or leaves the repository is skipped, and so is a
// directory already open on the way down. visit's filepath.SkipDir skips
// a directory, or the rest of the directory of a file.
func walkLinks(st lister, p, real string, k kind, open []string, visit func(p, real string, k kind) error) error {
	if err := visit(p, real, k); err != nil || k != directory {
		return err
	}
	if slices.Contains(open, real) {
		return nil
	}
	open = append(open, real)
	for _, name := range st.children(real) {
		cr := path.Join(real, name)
		ck, _ := st.lstat(cr)
		if ck == absent {
			continue // listed, but gone from a work tree
		}
		if ck == symlink {
			var err error
			if cr, ck, err = resolve(st.lstat, cr); err != nil {
				continue
			}
		}
		err := walkLinks(st, path.Join(p, name), cr, ck, open, visit)
		if errors.Is(err, filepath.SkipDir) {
			if ck == directory {
				continue
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Create is refused: the FS is read-only.
func (f *FS) Create(p string) (filesys.File, error) {
	return nil, &fs.PathError{Op: "create", Path: p, Err: errReadOnly}
}

// Mkdir is refused: the FS is read-only.
func (f *FS) Mkdir(p string) error { return &fs.PathError{Op: "mkdir", Path: p, Err: errReadOnly} }

// MkdirAll is refused: the FS is read-only.
func (f *FS) MkdirAll(p string) error { return &fs.PathError{Op: "mkdir", Path: p, Err: errReadOnly} }

// RemoveAll is refused: the FS is read-only.
func (f *FS) RemoveAll(p string) error { return &fs.PathError{Op: "remove", Path: p, Err: errReadOnly} }

// WriteFile is refused: the FS is read-only (see Override).
func (f *FS) WriteFile(p string, _ []byte) error {
	return &fs.PathError{Op: "write", Path: p, Err: errReadOnly}
}

// file is an open file of an FS: its content, read-only.
type file struct {
	*bytes.Reader
	info fileInfo
}

func (f *file) Write([]byte) (int, error)  { return 0, errReadOnly }
func (f *file) Close() error               { return nil }
func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }

type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
