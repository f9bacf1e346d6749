// Package snapshot loads one side of a plan — a git commit or a working
// tree — into an in-memory, read-only file system that krusty renders from.
//
// Reading a commit this way lets kplan compare any two commits without
// checking either out, and it bounds what a render can read to the
// repository: a symlink or a "../../.." path cannot reach the rest of the
// machine.
package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Root is where the repository's top level sits inside a snapshot's FS.
const Root = "/"

// Snapshot is a repository tree at one revision.
type Snapshot struct {
	// FS holds every file of the tree under Root.
	FS filesys.FileSystem
	// Rev names the revision: a commit SHA, or "working tree".
	Rev string
	// Files counts regular files loaded.
	Files int
}

// WorkingTree is the Rev of a snapshot of files on disk.
const WorkingTree = "working tree"

// tree collects files before they go into the FS, so that symlinks can be
// resolved against the whole tree first.
type tree struct {
	files    map[string][]byte // repo-relative slash path -> content
	symlinks map[string]string // repo-relative slash path -> link target
}

func newTree() *tree {
	return &tree{files: map[string][]byte{}, symlinks: map[string]string{}}
}

// FromCommit loads the tree of rev from the repository at repoDir.
func FromCommit(ctx context.Context, repoDir, rev string) (*Snapshot, error) {
	repo := gitcli.Repo{Dir: repoDir}
	sha, err := repo.ResolveCommit(ctx, rev)
	if err != nil {
		return nil, err
	}
	// One git archive stream reads the whole tree in a single process;
	// it is much faster than a cat-file per blob.
	out, err := repo.Run(ctx, "archive", "--format=tar", sha)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", sha, err)
	}
	t := newTree()
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", sha, err)
		}
		name := strings.TrimPrefix(path.Clean(hdr.Name), "/")
		switch hdr.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("read %s at %s: %w", name, sha, err)
			}
			t.files[name] = data
		case tar.TypeSymlink:
			t.symlinks[name] = hdr.Linkname
		}
	}
	return t.build(sha)
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
	t := newTree()
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
			t.files[name] = data
		}
	}
	return t.build(WorkingTree)
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
			if data, ok := t.files[dst]; ok {
				t.files[link] = data
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
			copies := map[string][]byte{}
			for name, data := range t.files {
				if strings.HasPrefix(name, prefix) && !strings.HasPrefix(name, link+"/") {
					copies[link+"/"+strings.TrimPrefix(name, prefix)] = data
				}
			}
			for name, data := range copies {
				t.files[name] = data
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

func (t *tree) build(rev string) (*Snapshot, error) {
	t.resolveLinks()
	fSys := filesys.MakeFsInMemory()
	if err := fSys.MkdirAll(Root); err != nil {
		return nil, err
	}
	for name, data := range t.files {
		if err := fSys.WriteFile(path.Join(Root, name), data); err != nil {
			return nil, fmt.Errorf("load %s at %s: %w", name, rev, err)
		}
	}
	return &Snapshot{FS: fSys, Rev: rev, Files: len(t.files)}, nil
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

// FromFS loads every regular file of fsys, for trees that are not on disk
// (embedded examples, tests).
func FromFS(fsys fs.FS, rev string) (*Snapshot, error) {
	t := newTree()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		t.files[p] = data
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", rev, err)
	}
	return t.build(rev)
}
