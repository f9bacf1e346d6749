package flux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

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

// generateIn runs Flux's own generator (fluxcd/pkg/kustomize) for k. That
// generator reads from disk only (the version that builds with this
// repository's Go has no file system option), so it runs on a scratch
// copy of what it reads: the path's kustomization file, or when there
// is none the path's YAML files (it lists those that parse as
// Kubernetes objects), and the components, for ignoreMissingComponents.
// genMemo remembers generated kustomizations by everything the generator
// reads: the two sides of a plan, and the root search and the build of
// one side, generate the same ones, and each costs a scratch copy.
type genMemo struct {
	mu sync.Mutex
	m  map[string]*generated
}

// generate is generateIn through the memo.
func (gm *genMemo) generate(ctx context.Context, s *snapshot.Snapshot, scratch string, k *Kustomization) (*generated, error) {
	key, err := genKey(s, k)
	if err != nil {
		return generateIn(ctx, s, scratch, k)
	}
	gm.mu.Lock()
	g, ok := gm.m[key]
	gm.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err = generateIn(ctx, s, scratch, k)
	if err != nil {
		return nil, err // errors are rare and cheap to find again
	}
	gm.mu.Lock()
	gm.m[key] = g
	gm.mu.Unlock()
	return g, nil
}

// genKey names the generator's inputs for k in s.
func genKey(s *snapshot.Snapshot, k *Kustomization) (string, error) {
	obj, err := json.Marshal(k.Object) // map keys sorted: stable
	if err != nil {
		return "", err
	}
	h := sha256.New()
	dir := k.Path()
	fmt.Fprintf(h, "%s\x00%s\x00", dir, obj)
	has := false
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		st := s.Index.State(join(dir, name))
		has = has || strings.HasPrefix(st, "f:")
		fmt.Fprintf(h, "%s\x00", st)
	}
	if !has {
		sc := scanOf(s, dir)
		for _, p := range sc.files {
			fmt.Fprintf(h, "%s=%s\x00", p, s.Index.State(p))
		}
		for _, d := range sc.kdirs {
			fmt.Fprintf(h, "%s/\x00", d)
		}
	}
	comps, _, _ := unstructured.NestedStringSlice(k.Object, "spec", "components")
	for _, c := range comps {
		fmt.Fprintf(h, "%s=%s\x00", c, s.Index.State(path.Clean(path.Join(dir, c))))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func generateIn(ctx context.Context, s *snapshot.Snapshot, scratch string, k *Kustomization) (*generated, error) {
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
		sc := scanOf(s, dir)
		for _, p := range sc.files {
			if snapshot.IsYAML(p) {
				if err := copyFile(p); err != nil {
					return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
				}
			}
		}
		// The generator lists these directories without reading them.
		for _, d := range sc.kdirs {
			dst := filepath.Join(root, filepath.FromSlash(d), konfig.DefaultKustomizationFileName())
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
			}
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
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

// scan is what Flux's generator walks in a path without a kustomization
// file: it lists the YAML files that parse as objects and the
// directories holding a kustomization file, which it does not enter.
type scan struct {
	files []string // every file below dir outside kdirs, sorted
	kdirs []string // directories below dir holding a kustomization file, outside others
	dirs  []string // directories it walks (dir, and those outside kdirs)
}

func scanOf(s *snapshot.Snapshot, dir string) *scan {
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	var under []string
	kust := map[string]bool{}
	for _, p := range s.Index.Paths() {
		if strings.HasPrefix(p, prefix) {
			under = append(under, p)
			if snapshot.IsKustomizationFile(p) && path.Dir(p) != dir {
				kust[path.Dir(p)] = true
			}
		}
	}
	// inside: the outermost directory below dir above p that
	// holds a kustomization file ("" for none).
	inside := func(p string) string {
		found := ""
		for d := path.Dir(p); d != dir && d != "."; d = path.Dir(d) {
			if kust[d] {
				found = d
			}
		}
		return found
	}
	sc := &scan{}
	dirs := map[string]bool{dir: true}
	kd := map[string]bool{}
	for _, p := range under {
		if d := inside(p); d != "" {
			kd[d] = true
			continue
		}
		sc.files = append(sc.files, p)
		for d := path.Dir(p); d != dir && d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range kd {
		if inside(d+"/x") == d { // not below another
			sc.kdirs = append(sc.kdirs, d)
		}
	}
	slices.Sort(sc.kdirs)
	sc.dirs = slices.Sorted(maps.Keys(dirs))
	return sc
}
