// Package render finds the overlays of a repository and renders them with
// kustomize's krusty, in process and in parallel.
package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/crash"
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
	// local are the directories of its resources and bases in the
	// repository (repository-relative), for the kustomizations it lists.
	local []string
}

// Filter selects overlays by their repository-relative directory.
// Patterns are doublestar globs ("apps/**/overlays/*"). An empty Include
// selects every overlay; a kustomization Include matches is planned even
// when another kustomization lists it (prod built on staging).
type Filter struct {
	Include []string
	Exclude []string
	// Targets, when not nil, are the overlays a repository declares
	// (.kplan.yaml): they replace discovery.
	Targets []string
}

// On says whether the filter selects overlays by Include or Exclude.
func (f Filter) On() bool { return len(f.Include)+len(f.Exclude) > 0 }

// Match says whether the filter selects the overlay directory dir.
func (f Filter) Match(dir string) (bool, error) {
	if len(f.Include) > 0 {
		ok, err := matchAny(f.Include, dir)
		if err != nil || !ok {
			return false, err
		}
	}
	excluded, err := matchAny(f.Exclude, dir)
	return !excluded, err
}

// Select says whether the filter selects something known by several
// names (a Flux Kustomization: its path and its namespace/name): one of
// them included, none excluded. Patterns that do not parse select
// nothing (discovery has refused them already).
func (f Filter) Select(names ...string) bool {
	in := len(f.Include) == 0
	for _, n := range names {
		if ok, err := matchAny(f.Exclude, n); ok || err != nil {
			return false
		}
		if ok, _ := matchAny(f.Include, n); ok {
			in = true
		}
	}
	return in
}

func matchAny(patterns []string, dir string) (bool, error) {
	for _, p := range patterns {
		ok, err := matchPattern(p, dir)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func matchPattern(p, dir string) (bool, error) {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
	ok, err := doublestar.Match(p, dir)
	if err != nil {
		return false, fmt.Errorf("overlay pattern %q: %w", p, err)
	}
	return ok, nil
}

// Unmatched are the Include and Exclude patterns that match none of
// dirs: a glob with a typo would otherwise plan nothing, or exclude
// nothing, without a word.
func (f Filter) Unmatched(dirs []string) (include, exclude []string) {
	none := func(patterns []string) []string {
		var out []string
		for _, p := range patterns {
			if !slices.ContainsFunc(dirs, func(d string) bool { ok, _ := matchPattern(p, d); return ok }) {
				out = append(out, p)
			}
		}
		return out
	}
	return none(f.Include), none(f.Exclude)
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
	// Errors are overlays that cannot render, by directory: a target
	// with no kustomization, kustomizations that list each other.
	Errors map[string]error

	stripped bool // inventory directives removed from the FS
}

// scan is what discovery reads from a tree, whatever the filter.
type scan struct {
	kusts  map[string]*Kustomization
	cycles map[string][]string // as cycles returns them
	// referenced are the directories some kustomization lists.
	referenced func() map[string]bool
}

// done completes a scan of kusts.
func (sc *scan) done() *scan {
	sc.cycles = cycles(sc.kusts)
	sc.referenced = sync.OnceValue(func() map[string]bool {
		out := map[string]bool{}
		for _, k := range sc.kusts {
			for _, r := range k.local {
				out[r] = true
			}
		}
		return out
	})
	return sc
}

// kustomizationLister is a file system that lists its kustomization
// files without a walk: repository-relative paths, sorted, and false
// when it cannot (a tree with symlinks shows files under more names).
type kustomizationLister interface {
	KustomizationFiles() ([]string, bool)
}

// Discover finds every overlay in fSys: each directory with a kustomization
// file whose kind is not Component and that no other kustomization lists
// under resources (or the deprecated bases).
func Discover(fSys filesys.FileSystem, filter Filter) (*Tree, error) {
	trees, err := DiscoverAll([]filesys.FileSystem{fSys}, []Filter{filter})
	if err != nil {
		return nil, err
	}
	return trees[0], nil
}

// parser decodes kustomization files, once per distinct content.
type parser struct {
	mu   sync.Mutex
	memo map[string]parsed
	// json, when set, converts YAML to JSON for the closures too.
	json *closure.Memo
}

type parsed struct {
	kf  kustomizationFile
	err error
	// local are its resources and bases in the repository, relative.
	local []string
}

func newParser() *parser { return &parser{memo: map[string]parsed{}} }

// warm parses files on every core, for the scan that follows to find
// each in the memo: YAML decoding is most of discovery, and the files are
// independent. What fails here is met again, and reported, by the scan.
func (ps *parser) warm(fSys filesys.FileSystem, files []string) {
	workers := min(runtime.GOMAXPROCS(0), len(files)/64+1)
	if workers < 2 {
		return
	}
	next := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for f := range next {
				if data, err := fSys.ReadFile(snapshot.Abs(f)); err == nil {
					ps.parse(data)
				}
			}
		})
	}
	for _, f := range files {
		next <- f
	}
	close(next)
	wg.Wait()
}

func (ps *parser) parse(data []byte) parsed {
	ps.mu.Lock()
	p, ok := ps.memo[string(data)]
	ps.mu.Unlock()
	if ok {
		return p
	}
	// A bug decoding one file fails the overlays that read it.
	p.err = crash.Catch(func() error { return ps.decode(data, &p.kf) })
	// An entry that looks remote is still local when it exists in the
	// repository (a github.com-x directory beside the kustomization), as
	// the render reads it: only the kustomizations found there count.
	for _, r := range slices.Concat(p.kf.Resources, p.kf.Bases) {
		if !closure.IsRemoteFile(r) {
			p.local = append(p.local, r)
		}
	}
	ps.mu.Lock()
	ps.memo[string(data)] = p
	ps.mu.Unlock()
	return p
}

// decode is yaml.Unmarshal. A file whose JSON the closures share
// decodes from it; when that fails (a value yaml.Unmarshal would convert
// for its field, invalid YAML), yaml.Unmarshal decides, as it words it.
func (ps *parser) decode(data []byte, kf *kustomizationFile) error {
	if ps.json != nil {
		if j, err := ps.json.JSON(data); err == nil && json.Unmarshal(j, kf) == nil {
			return nil
		}
		*kf = kustomizationFile{}
	}
	return yaml.Unmarshal(data, kf)
}

// DiscoverAll discovers each of several trees (the sides of a plan) at
// once, parsing a kustomization file they share once.
func DiscoverAll(fSyss []filesys.FileSystem, filters []Filter) ([]*Tree, error) {
	ps := newParser()
	trees := make([]*Tree, len(fSyss))
	errs := make([]error, len(fSyss))
	var wg sync.WaitGroup
	for i, fSys := range fSyss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer crash.Recover(&errs[i])
			sc, err := scanTree(fSys, ps)
			if err == nil {
				trees[i], err = sc.tree(filters[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return trees, nil
}

// DiscoverChange discovers the two sides of a change, as DiscoverAll
// does; changed are the paths that differ between them (snapshot.Changed).
// When both sides list their kustomization files, head's are base's
// but for those in changed: a change costs what it changed, not the
// repository.
//
// memo, when not nil, converts the kustomization files to JSON once for
// discovery and the closures.
func DiscoverChange(base, head filesys.FileSystem, changed map[string]bool, filters [2]Filter, memo *closure.Memo) ([2]*Tree, error) {
	_, bok := listKustomizations(base)
	_, hok := listKustomizations(head)
	if !bok || !hok {
		trees, err := DiscoverAll([]filesys.FileSystem{base, head}, filters[:])
		if err != nil {
			return [2]*Tree{}, err
		}
		return [2]*Tree{trees[0], trees[1]}, nil
	}
	ps := newParser()
	ps.json = memo
	var out [2]*Tree
	bs, err := scanTree(base, ps)
	if err != nil {
		return out, err
	}
	hs, err := bs.rescan(head, changed, ps)
	if err != nil {
		return out, err
	}
	for i, sc := range []*scan{bs, hs} {
		if out[i], err = sc.tree(filters[i]); err != nil {
			return out, err
		}
	}
	return out, nil
}

func listKustomizations(fSys filesys.FileSystem) ([]string, bool) {
	if l, ok := fSys.(kustomizationLister); ok {
		return l.KustomizationFiles()
	}
	return nil, false
}

// scanTree reads every kustomization file of fSys: from its listing, or
// walking it.
func scanTree(fSys filesys.FileSystem, ps *parser) (*scan, error) {
	sc := &scan{kusts: map[string]*Kustomization{}}
	if files, ok := listKustomizations(fSys); ok {
		ps.warm(fSys, files)
		// Sorted, so a directory's first file is the one a walk meets
		// first.
		for _, f := range files {
			if err := sc.read(fSys, f, ps); err != nil {
				return nil, fmt.Errorf("discover overlays: %w", err)
			}
		}
	} else {
		names := konfig.RecognizedKustomizationFileNames()
		err := fSys.Walk(snapshot.Root, func(p string, info fs.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if info.IsDir() || !slices.Contains(names, info.Name()) {
				return nil
			}
			return sc.read(fSys, snapshot.Rel(p), ps)
		})
		if err != nil {
			return nil, fmt.Errorf("discover overlays: %w", err)
		}
	}
	return sc.done(), nil
}

// read adds the kustomization file at rel, unless its directory has one.
func (sc *scan) read(fSys filesys.FileSystem, rel string, ps *parser) error {
	dir := path.Dir(rel)
	if _, dup := sc.kusts[dir]; dup {
		return nil // krusty reports the ambiguity when it renders dir
	}
	k := &Kustomization{Dir: dir, File: rel}
	data, err := fSys.ReadFile(snapshot.Abs(rel))
	var tooLarge *snapshot.TooLargeError
	if errors.As(err, &tooLarge) {
		// Its overlay fails; the others are planned.
		k.ParseErr = fmt.Errorf("%s: %w", k.File, tooLarge)
		sc.kusts[dir] = k
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", k.File, err)
	}
	p := ps.parse(data)
	if p.err != nil {
		k.ParseErr = fmt.Errorf("%s: %w", k.File, p.err)
	}
	k.Kind, k.Inventory, k.HasOpenAPI = p.kf.Kind, p.kf.Inventory, len(p.kf.OpenAPI) > 0
	for _, r := range p.local {
		k.local = append(k.local, path.Join(dir, r))
	}
	sc.kusts[dir] = k
	return nil
}

// rescan is the scan of head, a tree that differs from sc's in the paths
// changed, both listing their kustomization files: a kustomization is
// read again only in a directory where one of those files changed.
func (sc *scan) rescan(head filesys.FileSystem, changed map[string]bool, ps *parser) (*scan, error) {
	dirs := map[string]bool{}
	for p := range changed {
		if snapshot.IsKustomizationFile(p) {
			dirs[path.Dir(p)] = true
		}
	}
	if len(dirs) == 0 {
		return sc, nil
	}
	files, _ := listKustomizations(head)
	out := &scan{kusts: maps.Clone(sc.kusts)}
	for d := range dirs {
		delete(out.kusts, d)
	}
	names := slices.Sorted(slices.Values(konfig.RecognizedKustomizationFileNames()))
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		for _, n := range names {
			f := path.Join(d, n)
			if _, ok := slices.BinarySearch(files, f); ok {
				if err := out.read(head, f, ps); err != nil {
					return nil, fmt.Errorf("discover overlays: %w", err)
				}
				break
			}
		}
	}
	return out.done(), nil
}

// tree selects the overlays of a scan through a filter.
func (sc *scan) tree(filter Filter) (*Tree, error) {
	t := &Tree{Kustomizations: maps.Clone(sc.kusts), Errors: map[string]error{}}
	referenced := sc.referenced()
	for dir, cycle := range sc.cycles {
		t.Errors[dir] = fmt.Errorf("kustomizations list each other in a cycle (%s): kustomize cannot build them; remove one of the references", strings.Join(cycle, " → "))
	}
	if filter.Targets != nil {
		for _, dir := range filter.Targets {
			if ok, err := filter.Match(dir); err != nil || !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			t.Overlays = append(t.Overlays, dir)
			if k := t.Kustomizations[dir]; k == nil {
				t.Errors[dir] = fmt.Errorf("target overlay %s has no kustomization.yaml: fix its overlay in .kplan.yaml", dir)
			} else if k.Kind == "Component" {
				t.Errors[dir] = fmt.Errorf("target overlay %s is a kustomize Component, which cannot be built on its own: fix its overlay in .kplan.yaml", dir)
			}
		}
	} else {
		for dir, k := range t.Kustomizations {
			if k.Kind == "Component" {
				continue
			}
			// A listed kustomization is planned when Include names it; a
			// cycle is reported once, on its first directory.
			if referenced[dir] && len(filter.Include) == 0 && t.Errors[dir] == nil {
				continue
			}
			ok, err := filter.Match(dir)
			if err != nil {
				return nil, err
			}
			if ok {
				t.Overlays = append(t.Overlays, dir)
			}
		}
	}
	slices.Sort(t.Overlays)
	t.Overlays = slices.Compact(t.Overlays)
	return t, nil
}

// Renderable says whether dir holds a kustomization that builds on its
// own (not a Component), referenced by others or not.
func (t *Tree) Renderable(dir string) bool {
	k := t.Kustomizations[dir]
	return k != nil && k.Kind != "Component"
}

// cycles finds kustomizations that list each other in a cycle, keyed by
// the cycle's first directory in sorted order, with the cycle's path.
func cycles(kusts map[string]*Kustomization) map[string][]string {
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	out := map[string][]string{}
	var stack []string
	var visit func(dir string)
	visit = func(dir string) {
		state[dir] = active
		stack = append(stack, dir)
		for _, next := range kusts[dir].local {
			if kusts[next] == nil {
				continue
			}
			switch state[next] {
			case unseen:
				visit(next)
			case active:
				i := slices.Index(stack, next)
				cycle := slices.Clone(stack[i:])
				first := slices.Min(cycle)
				if _, seen := out[first]; !seen {
					// Start the path at the first directory, for one answer.
					j := slices.Index(cycle, first)
					cycle = append(cycle[j:], cycle[:j]...)
					out[first] = append(cycle, first)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[dir] = done
	}
	for _, dir := range slices.Sorted(maps.Keys(kusts)) {
		if state[dir] == unseen {
			visit(dir)
		}
	}
	return out
}
