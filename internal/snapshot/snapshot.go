// Package snapshot loads one side of a plan — a git commit or a working
// tree — into an in-memory, read-only file system that krusty renders from.
//
// Reading a commit this way lets kplan compare any two commits without
// checking either out, and it bounds what a render can read to the
// repository: a symlink or a "../../.." path cannot reach the rest of the
// machine.
//
// Every snapshot has an Index naming each file's content by its git blob
// id, so that two sides can be compared, and a render's inputs named,
// without reading file contents. A commit can be opened lazily (Open):
// only the files a plan needs are read from git and put into the FS.
package snapshot

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Root is where the repository's top level sits inside a snapshot's FS.
const Root = "/"

// WorkingTree is the Rev of a snapshot of files on disk.
const WorkingTree = "working tree"

// Snapshot is a repository tree at one revision.
type Snapshot struct {
	// FS holds the files of the tree under Root: every file, or for a
	// snapshot from Open, the kustomization files and what Load added.
	FS filesys.FileSystem
	// Rev names the revision: a commit SHA, or "working tree".
	Rev string
	// Files counts the regular files of the tree (loaded or not).
	Files int
	// Index names every file of the tree and its content.
	Index *Index

	blobs *Blobs
	// mu guards loaded and writes to FS; renders only read FS, after Load.
	mu     sync.Mutex
	loaded map[string]bool // repository-relative paths written to FS
}

// tree collects files before they go into the FS, so that symlinks can be
// resolved against the whole tree first.
type tree struct {
	files    map[string]string // repo-relative slash path -> blob id
	symlinks map[string]string // repo-relative slash path -> link target
}

func newTree() *tree {
	return &tree{files: map[string]string{}, symlinks: map[string]string{}}
}

// FromCommit loads the whole tree of rev from the repository at repoDir.
func FromCommit(ctx context.Context, repoDir, rev string) (*Snapshot, error) {
	s, err := Open(ctx, repoDir, rev, NewBlobs(repoDir))
	if err != nil {
		return nil, err
	}
	if err := s.LoadAll(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Open reads the file list of rev and its kustomization files, and leaves
// the other files to Load. Both sides of a plan share blobs, so content
// common to them is read from git once.
func Open(ctx context.Context, repoDir, rev string, blobs *Blobs) (*Snapshot, error) {
	repo := gitcli.Repo{Dir: repoDir}
	sha, err := repo.ResolveCommit(ctx, rev)
	if err != nil {
		return nil, err
	}
	// One ls-tree lists the commit with each file's blob id; contents are
	// read later, in one batch, and only when needed.
	out, err := repo.Run(ctx, "ls-tree", "-r", "-z", "--full-tree", sha)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", sha, err)
	}
	t := newTree()
	var links []string // symlink path, blob id pairs
	for _, rec := range strings.Split(string(out), "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("read commit %s: unexpected ls-tree line %q", sha, rec)
		}
		switch {
		case f[1] != "blob":
			// Submodules (commits) are not part of the tree's content.
		case f[0] == "120000":
			links = append(links, name, f[2])
		default:
			t.files[name] = f[2]
		}
	}
	if len(links) > 0 {
		ids := make([]string, 0, len(links)/2)
		for i := 1; i < len(links); i += 2 {
			ids = append(ids, links[i])
		}
		targets, err := blobs.get(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("read symlinks of %s: %w", sha, err)
		}
		for i := 0; i < len(links); i += 2 {
			t.symlinks[links[i]] = string(targets[links[i+1]])
		}
	}
	return t.open(ctx, sha, blobs)
}

// FromWorkingTree loads the files under dir as they are on disk. In a git
// work tree it loads what git would track (tracked and untracked files,
// minus ignored ones), so build outputs and .git never enter a plan.
func FromWorkingTree(ctx context.Context, dir string) (*Snapshot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	names, err := gitListFiles(ctx, abs)
	if err != nil {
		names, err = walkFiles(abs)
		if err != nil {
			return nil, fmt.Errorf("list files in %s: %w", abs, err)
		}
	}
	t, blobs := newTree(), newMemBlobs()
	for _, name := range names {
		p := filepath.Join(abs, filepath.FromSlash(name))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked but deleted in the work tree
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, fmt.Errorf("read link %s: %w", p, err)
			}
			t.symlinks[name] = target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			t.files[name] = blobs.put(data)
		}
	}
	return t.openAll(ctx, WorkingTree, blobs)
}

// FromFS loads every regular file of fsys, for trees that are not on disk
// (embedded examples, tests).
func FromFS(fsys fs.FS, rev string) (*Snapshot, error) {
	t, blobs := newTree(), newMemBlobs()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		t.files[p] = blobs.put(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", rev, err)
	}
	return t.openAll(context.Background(), rev, blobs)
}

func (t *tree) openAll(ctx context.Context, rev string, blobs *Blobs) (*Snapshot, error) {
	s, err := t.open(ctx, rev, blobs)
	if err != nil {
		return nil, err
	}
	return s, s.LoadAll(ctx)
}

// open makes a snapshot holding the kustomization files; Load adds more.
func (t *tree) open(ctx context.Context, rev string, blobs *Blobs) (*Snapshot, error) {
	t.resolveLinks()
	fSys := filesys.MakeFsInMemory()
	if err := fSys.MkdirAll(Root); err != nil {
		return nil, err
	}
	s := &Snapshot{FS: fSys, Rev: rev, Files: len(t.files), Index: newIndex(t.files), blobs: blobs, loaded: map[string]bool{}}
	// Discovery reads every kustomization file, so load them all now.
	var kusts []string
	for name := range t.files {
		if IsKustomizationFile(name) {
			kusts = append(kusts, name)
		}
	}
	if err := s.Load(ctx, kusts); err != nil {
		return nil, err
	}
	return s, nil
}

// IsKustomizationFile reports whether a path names a kustomization file.
func IsKustomizationFile(p string) bool {
	base := path.Base(p)
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		if base == n {
			return true
		}
	}
	return false
}

// Load puts the named repository-relative paths into FS: files with their
// content, directories as (possibly empty) directories. Paths the tree
// does not have are skipped, so that they stay absent, as on disk.
func (s *Snapshot) Load(ctx context.Context, paths []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var need []string
	for _, p := range paths {
		if s.loaded[p] {
			continue
		}
		if id, ok := s.Index.ID(p); ok {
			need = append(need, id)
		}
	}
	data, err := s.blobs.get(ctx, need)
	if err != nil {
		return fmt.Errorf("read files of %s: %w", s.Rev, err)
	}
	for _, p := range paths {
		if s.loaded[p] {
			continue
		}
		if id, ok := s.Index.ID(p); ok {
			if err := s.FS.WriteFile(Abs(p), data[id]); err != nil {
				return fmt.Errorf("load %s at %s: %w", p, s.Rev, err)
			}
		} else if s.Index.IsDir(p) {
			if err := s.FS.MkdirAll(Abs(p)); err != nil {
				return fmt.Errorf("load directory %s at %s: %w", p, s.Rev, err)
			}
		}
		s.loaded[p] = true
	}
	return nil
}

// LoadAll puts every file of the tree into FS.
func (s *Snapshot) LoadAll(ctx context.Context) error {
	return s.Load(ctx, s.Index.Paths())
}

// ReadFile returns a file's content as committed, whether or not it was
// loaded into FS (where kplan may have rewritten it for krusty).
func (s *Snapshot) ReadFile(ctx context.Context, rel string) ([]byte, error) {
	id, ok := s.Index.ID(rel)
	if !ok {
		return nil, fmt.Errorf("%s at %s: %w", rel, s.Rev, fs.ErrNotExist)
	}
	data, err := s.blobs.get(ctx, []string{id})
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", rel, s.Rev, err)
	}
	return data[id], nil
}

// Blobs is where the snapshot's contents come from.
func (s *Snapshot) Blobs() *Blobs { return s.blobs }

// Size is the length of a file's content, 0 for files not read yet.
func (s *Snapshot) Size(rel string) int {
	id, ok := s.Index.ID(rel)
	if !ok {
		return 0
	}
	return s.blobs.size(id)
}

func gitListFiles(ctx context.Context, dir string) ([]string, error) {
	repo := gitcli.Repo{Dir: dir}
	top, err := repo.TopLevel(ctx)
	if err != nil {
		return nil, err
	}
	if filepath.Clean(top) != filepath.Clean(dir) {
		if real, err := filepath.EvalSymlinks(dir); err != nil || filepath.Clean(real) != filepath.Clean(top) {
			return nil, fmt.Errorf("%s is not the top of its git work tree (%s)", dir, top)
		}
	}
	out, err := repo.Run(ctx, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(string(out), "\x00") {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names, nil
}

func walkFiles(root string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil // WalkDir does not descend into symlinked dirs
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	return names, err
}

// resolveLinks turns symlinks that stay inside the tree into copies of
// their targets. Links that leave the tree, dangle or loop are dropped:
// a render must not read files outside the repository.
func (t *tree) resolveLinks() {
	// Each round resolves links whose target is already known; chains of
	// links resolve over several rounds, loops never do.
	for round := 0; round < 16 && len(t.symlinks) > 0; round++ {
		progress := false
		for link, target := range t.symlinks {
			if path.IsAbs(target) {
				slog.Debug("ignoring symlink to an absolute path", "link", link, "target", target)
				delete(t.symlinks, link)
				continue
			}
			dst := path.Join(path.Dir(link), target)
			if dst == ".." || strings.HasPrefix(dst, "../") {
				slog.Debug("ignoring symlink out of the repository", "link", link, "target", target)
				delete(t.symlinks, link)
				continue
			}
			if id, ok := t.files[dst]; ok {
				t.files[link] = id
				delete(t.symlinks, link)
				progress = true
				continue
			}
			if _, pending := t.symlinks[dst]; pending {
				continue
			}
			// A directory link: copy the files below the target.
			prefix := dst + "/"
			if dst == "." {
				prefix = ""
			}
			copies := map[string]string{}
			for name, id := range t.files {
				if strings.HasPrefix(name, prefix) && !strings.HasPrefix(name, link+"/") {
					copies[link+"/"+strings.TrimPrefix(name, prefix)] = id
				}
			}
			for name, id := range copies {
				t.files[name] = id
			}
			if len(copies) == 0 {
				slog.Debug("ignoring dangling symlink", "link", link, "target", target)
			}
			delete(t.symlinks, link)
			progress = true
		}
		if !progress {
			break
		}
	}
	for link := range t.symlinks {
		slog.Debug("ignoring unresolvable symlink", "link", link)
	}
}

// Abs is the path of a repository-relative path inside the snapshot.
func Abs(rel string) string { return path.Join(Root, filepath.ToSlash(rel)) }

// Rel is the repository-relative form of an absolute snapshot path.
func Rel(abs string) string {
	r := strings.TrimPrefix(path.Clean(abs), Root)
	if r == "" {
		return "."
	}
	return r
}

// blobID is git's name for content: the SHA-1 of "blob <size>\0<content>",
// so files read from disk compare equal to the same files in a commit.
func blobID(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
