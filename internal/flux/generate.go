package flux

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// generated is the kustomization Flux's generator writes into a
// Kustomization's path before building it.
type generated struct {
	// File is the repository-relative kustomization file it replaces, or
	// adds when Created.
	File string
	Data []byte
	// Created: the path had no kustomization file, and Flux made one
	// listing the path's manifests (the path's whole tree is then read).
	Created bool
}

// generate runs Flux's own generator (fluxcd/pkg/kustomize) for k. That
// generator reads from disk only (the version that builds with this
// repository's Go has no file system option), so it runs on a scratch
// copy of what it reads: the path's kustomization file, or when there
// is none the path's YAML files (it lists those that parse as
// Kubernetes objects), and the components, for ignoreMissingComponents.
func generate(ctx context.Context, s *snapshot.Snapshot, scratch string, k *Kustomization) (*generated, error) {
	dir := k.Path()
	tmp, err := os.MkdirTemp(scratch, "gen-")
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: scratch directory: %w", k.ID(), err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "repo")
	target := filepath.Join(root, filepath.FromSlash(dir))
	if err := os.MkdirAll(target, 0o755); err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: scratch directory: %w", k.ID(), err)
	}
	copyFile := func(rel string) error {
		data, err := s.ReadFile(ctx, rel)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	}
	if !s.Index.IsDir(dir) {
		return nil, fmt.Errorf("Flux Kustomization %s: spec.path %s is not a directory of the repository (Flux fails with \"kustomization path not found\")", k.ID(), dir)
	}
	has := false
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, ok := s.Index.ID(join(dir, name)); ok {
			has = true
			if err := copyFile(join(dir, name)); err != nil {
				return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
			}
		}
	}
	if !has {
		prefix := dir + "/"
		if dir == "." {
			prefix = ""
		}
		for _, p := range s.Index.Paths() {
			if !strings.HasPrefix(p, prefix) {
				continue
			}
			ext := path.Ext(p)
			if ext == ".yaml" || ext == ".yml" || snapshot.IsKustomizationFile(p) {
				if err := copyFile(p); err != nil {
					return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
				}
			}
		}
	}
	comps, _, _ := unstructured.NestedStringSlice(k.Object, "spec", "components")
	for _, c := range comps {
		if !fluxkustomize.IsLocalRelativePath(c) {
			continue // the generator refuses it
		}
		p := path.Clean(path.Join(dir, c))
		if p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		dst := filepath.Join(root, filepath.FromSlash(p))
		if s.Index.IsDir(p) {
			err = os.MkdirAll(dst, 0o755)
		} else if _, ok := s.Index.ID(p); ok {
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.WriteFile(dst, nil, 0o644)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("Flux Kustomization %s: scratch copy of component %s: %w", k.ID(), c, err)
		}
	}
	gen := fluxkustomize.NewGenerator(root, unstructured.Unstructured{Object: k.Object})
	data, kfile, action, err := gen.GenerateManifest(target)
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: generate the kustomization of %s: %s", k.ID(), dir, strings.ReplaceAll(err.Error(), root, ""))
	}
	return &generated{File: join(dir, filepath.Base(kfile)), Data: data, Created: action == fluxkustomize.CreatedAction}, nil
}

// join is path.Join for repository-relative paths, "." for the top.
func join(dir, name string) string { return path.Join(dir, name) }
