// Package render finds the overlays of a repository and renders them with
// kustomize's krusty, in process and in parallel.
package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// InventoryDirective is the kustomization field described in
// seeds/000_0a72809845e5c0c8.md. kustomize v5 rejects it, so kplan reads it
// and removes it before krusty sees the file.
type InventoryDirective struct {
	Type      string `json:"type"`
	ConfigMap struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"configMap"`
}

// kustomizationFile is the part of a kustomization that discovery needs.
type kustomizationFile struct {
	Kind      string              `json:"kind"`
	Resources []string            `json:"resources"`
	Bases     []string            `json:"bases"` // deprecated alias of resources
	Inventory *InventoryDirective `json:"inventory"`
	OpenAPI   map[string]string   `json:"openapi"`
}

// Kustomization is a kustomization file found in the tree.
type Kustomization struct {
	Dir  string // repository-relative directory, "." for the root
	File string // repository-relative path of the file
	Kind string
	// Inventory is the seed's inventory directive, if present.
	Inventory *InventoryDirective
	// HasOpenAPI marks a custom schema, which krusty keeps in a global.
	HasOpenAPI bool
	// ParseErr is set when the file is not valid YAML; the overlay is kept
	// so that its render reports the error.
	ParseErr error
	refs     []string
}

// Filter selects overlays by their repository-relative directory.
// Patterns are doublestar globs ("apps/**/overlays/*"). An empty Include
// selects every overlay.
type Filter struct {
	Include []string
	Exclude []string
}

func (f Filter) match(dir string) (bool, error) {
	matchAny := func(patterns []string) (bool, error) {
		for _, p := range patterns {
			p = strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
			ok, err := doublestar.Match(p, dir)
			if err != nil {
				return false, fmt.Errorf("overlay pattern %q: %w", p, err)
			}
			if ok {
				return true, nil
			}
		}
		return false, nil
	}
	if len(f.Include) > 0 {
		ok, err := matchAny(f.Include)
		if err != nil || !ok {
			return false, err
		}
	}
	excluded, err := matchAny(f.Exclude)
	return !excluded, err
}

// Patterns splits a comma- or newline-separated list of globs, as the
// Action's inputs and the CLI's flags give them.
func Patterns(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Tree is what discovery found in one snapshot.
type Tree struct {
	// Kustomizations by repository-relative directory.
	Kustomizations map[string]*Kustomization
	// Overlays are the directories to render, sorted.
	Overlays []string

	stripped bool // inventory directives removed from the FS
}

// Discover finds every overlay in fSys: each directory with a kustomization
// file whose kind is not Component and that no other kustomization lists
// under resources (or the deprecated bases).
func Discover(fSys filesys.FileSystem, filter Filter) (*Tree, error) {
	trees, err := DiscoverAll([]filesys.FileSystem{fSys}, filter)
	if err != nil {
		return nil, err
	}
	return trees[0], nil
}

// DiscoverAll discovers each of several trees (the sides of a plan) at
// once, parsing a kustomization file they share once.
func DiscoverAll(fSyss []filesys.FileSystem, filter Filter) ([]*Tree, error) {
	type parsed struct {
		kf  kustomizationFile
		err error
	}
	var mu sync.Mutex
	memo := map[string]parsed{}
	parse := func(data []byte) (kustomizationFile, error) {
		mu.Lock()
		p, ok := memo[string(data)]
		mu.Unlock()
		if ok {
			return p.kf, p.err
		}
		var kf kustomizationFile
		err := yaml.Unmarshal(data, &kf)
		mu.Lock()
		memo[string(data)] = parsed{kf, err}
		mu.Unlock()
		return kf, err
	}
	trees := make([]*Tree, len(fSyss))
	errs := make([]error, len(fSyss))
	var wg sync.WaitGroup
	for i, fSys := range fSyss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trees[i], errs[i] = discover(fSys, filter, parse)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return trees, nil
}

func discover(fSys filesys.FileSystem, filter Filter, parse func([]byte) (kustomizationFile, error)) (*Tree, error) {
	t := &Tree{Kustomizations: map[string]*Kustomization{}}
	names := konfig.RecognizedKustomizationFileNames()
	err := fSys.Walk(snapshot.Root, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() || !slices.Contains(names, info.Name()) {
			return nil
		}
		dir := snapshot.Rel(path.Dir(p))
		if _, dup := t.Kustomizations[dir]; dup {
			return nil // krusty reports the ambiguity when it renders dir
		}
		k := &Kustomization{Dir: dir, File: snapshot.Rel(p)}
		data, err := fSys.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", k.File, err)
		}
		kf, err := parse(data)
		if err != nil {
			k.ParseErr = fmt.Errorf("%s: %w", k.File, err)
		}
		k.Kind, k.Inventory, k.HasOpenAPI = kf.Kind, kf.Inventory, len(kf.OpenAPI) > 0
		k.refs = append(slices.Clip(kf.Resources), kf.Bases...)
		t.Kustomizations[dir] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("discover overlays: %w", err)
	}
	referenced := map[string]bool{}
	for dir, k := range t.Kustomizations {
		for _, r := range k.refs {
			if closure.IsRemote(r) || closure.IsRemoteFile(r) {
				continue
			}
			referenced[path.Join(dir, r)] = true
		}
	}
	for dir, k := range t.Kustomizations {
		if k.Kind == "Component" || referenced[dir] {
			continue
		}
		ok, err := filter.match(dir)
		if err != nil {
			return nil, err
		}
		if ok {
			t.Overlays = append(t.Overlays, dir)
		}
	}
	slices.Sort(t.Overlays)
	return t, nil
}
