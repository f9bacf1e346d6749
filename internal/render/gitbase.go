package render

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// GitFetcher fetches a remote base's repository at its ref, as the
// render's network policy allows, and gives the directory holding its
// tree (gitbase.Cache).
type GitFetcher interface {
	Get(ctx context.Context, s *gitbase.Spec) (*gitbase.Tree, error)
}

// A git base (a resources or components entry kustomize would clone) is
// fetched through Options.Git into a cache on disk, and the entry is
// rewritten as the relative path from the kustomization's directory to
// the base's directory in the tree at the resolved commit: krusty loads
// it as a local base (its loader refuses absolute paths), and guardFS
// serves that tree from disk, with the same budgets as the repository.
// A kustomization in it is rewritten as it is read, like any other, so
// its own remote bases and resources are fetched the same way.

// IsGitBase says whether a render takes ref, in the kustomization field
// field, for a git remote base (and fetches it with Options.Git).
func IsGitBase(field, ref string) bool {
	if !baseKeys[field] {
		return false
	}
	if closure.IsRemoteFile(ref) && field != "components" && !gitURL(ref) {
		return false // an http(s) file
	}
	_, err := gitbase.Parse(ref)
	return err == nil
}

// gitBase rewrites n, the git base ref named in field key of file in
// dir, to the fetched tree.
func (g *guardFS) gitBase(file, dir, key string, n *yaml.Node, ref string) (bool, error) {
	spec, err := gitbase.Parse(ref)
	if err != nil {
		// Nor does kustomize take it for a repository: it reads it as a
		// local path, and reports what it finds.
		return false, nil
	}
	if g.git == nil {
		return false, &RemoteError{File: relName(file), Field: key, Ref: ref}
	}
	tree, err := g.git.Get(g.ctx, spec)
	if err != nil {
		return false, fmt.Errorf("%s entry %q of %s: %w", key, ref, relName(file), err)
	}
	target := filepath.ToSlash(filepath.Join(tree.Root, filepath.FromSlash(spec.Dir)))
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		return false, fmt.Errorf("%s entry %q of %s: %w", key, ref, relName(file), err)
	}
	g.mount(filepath.ToSlash(tree.Root))
	n.Value = filepath.ToSlash(rel)
	n.Style = 0
	return true, nil
}

func (g *guardFS) mount(root string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.mounts {
		if m == root {
			return
		}
	}
	g.mounts = append(g.mounts, root)
}

// fs is the file system that holds p: a fetched git base's tree on
// disk, or the render's own.
func (g *guardFS) fs(p string) filesys.FileSystem {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.mounts) == 0 {
		return g.FileSystem
	}
	p = path.Clean(filepath.ToSlash(p))
	for _, m := range g.mounts {
		if p == m || strings.HasPrefix(p, m+"/") {
			return treeFS{filesys.MakeFsOnDisk()}
		}
	}
	return g.FileSystem
}

// treeFS serves a fetched tree from disk with the snapshot's limit on
// file size: a larger file is not read at all (the read budget counts
// bytes once read).
type treeFS struct{ filesys.FileSystem }

func (t treeFS) ReadFile(p string) ([]byte, error) {
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() > snapshot.MaxFileSize {
		return nil, &snapshot.TooLargeError{Size: fi.Size()}
	}
	return t.FileSystem.ReadFile(p)
}
