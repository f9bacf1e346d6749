// Package snapshot serves one side of a plan — a git commit or a working
// tree — to krusty through kplan's own read-only file system (FS).
//
// Reading a commit this way lets kplan compare any two commits without
// checking either out, and it bounds what a render can read to the
// repository: a symlink or a "../../.." path cannot reach the rest of the
// machine. Any name git stores is a valid name, and symlinks resolve as
// the OS resolves them.
//
// Every snapshot has an Index naming each file's content by its git blob
// id, so that two sides can be compared, and a render's inputs named,
// without reading file contents. A commit can be opened lazily (Open):
// only the files a plan needs are read from git, in one batch.
package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Root is where the repository's top level sits inside a snapshot's FS.
// It is not "/" so that a path climbing above the top stays above it
// (krusty cleans paths lexically, and "/.." is "/"): such paths do not
// exist, as kustomize finds nothing there in a checkout.
const Root = "/repo"

// MaxPathDepth is how many directories deep a file of a snapshot may
// be. Deeper ones are left out, as if absent: no file system can check
// such a path out (Linux's paths end at 4096 bytes), git itself crashes
// on some, and every lookup walks a path name by name. kubeflow's
// deepest file is 9 deep.
const MaxPathDepth = 256

// tooDeep says whether a repository-relative path is deeper than
// MaxPathDepth.
func tooDeep(name string) bool {
	return strings.Count(name, "/") >= MaxPathDepth
}

// WorkingTree is the Rev of a snapshot of files on disk.
const WorkingTree = "working tree"

// Snapshot is a repository tree at one revision.
type Snapshot struct {
	// FS serves the tree under Root: for a snapshot from Open, the
	// kustomization files and what Load added; other files are absent.
	FS *FS
	// Rev names the revision: a commit SHA, or "working tree".
	Rev string
	// Files counts the files of the tree (loaded or not), those reached
	// through symlinks included.
	Files int
	// Index names every file of the tree and its content.
	Index *Index

	blobs *Blobs
	tree  *tree
	kusts []string // the kustomization files of the index, sorted
	// mu guards loaded and content: Load writes them, renders read them.
	mu      sync.RWMutex
	loaded  map[string]bool   // real paths of files read and directories shown
	content map[string][]byte // blob id -> content, for loaded files
	// holders are, by needle, the YAML files holding it, when known for
	// the whole tree (KnowYAMLHolders).
	holders sync.Map
}

// tree is a revision's entries as git stores them: symlinks are kept as
// links and resolved when a path is looked up.
type tree struct {
	files map[string]string   // repo-relative slash path -> blob id
	links map[string]string   // repo-relative slash path -> link target
	dirs  map[string][]string // directory -> the names in it, sorted
}

func newTree() *tree {
	return &tree{files: map[string]string{}, links: map[string]string{}}
}

func (t *tree) lstat(rel string) (kind, string) {
	if _, ok := t.files[rel]; ok {
		return regular, ""
	}
	if target, ok := t.links[rel]; ok {
		return symlink, target
	}
	if _, ok := t.dirs[rel]; ok {
		return directory, ""
	}
	return absent, ""
}

func (t *tree) children(rel string) []string { return t.dirs[rel] }

// index lists the directories of the entries, then names every file the
// tree shows, through symlinks too, the way FS.Walk finds them.
func (t *tree) index() *Index {
	// Each path is listed once in its directory, and a directory in its
	// parent when it is first met: the walk up stops at a known one.
	t.dirs = map[string][]string{".": nil}
	add := func(p string) {
		for {
			d, name := split(p)
			_, known := t.dirs[d]
			t.dirs[d] = append(t.dirs[d], name)
			if known {
				return
			}
			p = d
		}
	}
	if len(t.links) == 0 {
		// Listed in order, each directory's names come nearly in order
		// ("a/b.yaml" sorts before "a/b/c.yaml", its name "b.yaml" after
		// "b"): one sort of the paths (which Paths gives), and of the few
		// listings out of order.
		sorted := slices.Sorted(maps.Keys(t.files))
		for _, p := range sorted {
			add(p)
		}
		for _, ns := range t.dirs {
			if !slices.IsSorted(ns) {
				slices.Sort(ns)
			}
		}
		ix := &Index{files: t.files, dirs: t.dirs, tree: t}
		ix.sortOnce.Do(func() { ix.sorted = sorted })
		return ix
	}
	for p := range t.files {
		add(p)
	}
	for p := range t.links {
		add(p)
	}
	for _, ns := range t.dirs {
		slices.Sort(ns)
	}
	files := make(map[string]string, len(t.files))
	walkLinks(t, ".", ".", directory, nil, func(p, real string, k kind) error {
		if k == regular {
			files[p] = t.files[real]
		}
		return nil
	})
	for link, target := range t.links {
		if _, _, err := resolve(t.lstat, link); err != nil {
			slog.Debug("symlink leads nowhere in the repository", "link", link, "target", target, "err", err)
		}
	}
	return newIndex(t, files)
}

// split is path.Dir and path.Base of a clean relative path, without
// cleaning it again: the directory and the name are slices of p.
func split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

// FromCommit loads the whole tree of rev from the repository at repoDir.
func FromCommit(ctx context.Context, repoDir, rev string) (*Snapshot, error) {
	blobs := NewBlobs(repoDir)
	defer blobs.Close() // all is loaded
	s, err := Open(ctx, repoDir, rev, blobs)
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
	t.files = make(map[string]string, bytes.Count(out, []byte{0}))
	links := map[string]string{} // symlink path -> blob id of its target
	// Records are "<mode> <type> <id>\t<path>"; one string holds them
	// all, and names and ids are slices of it.
	all := string(out)
	for len(all) > 0 {
		rec, rest, _ := strings.Cut(all, "\x00")
		all = rest
		meta, name, ok := strings.Cut(rec, "\t")
		mode, meta, ok1 := strings.Cut(meta, " ")
		typ, id, ok2 := strings.Cut(meta, " ")
		if !ok || !ok1 || !ok2 {
			return nil, fmt.Errorf("read commit %s: unexpected ls-tree line %q", sha, rec)
		}
		switch {
		case tooDeep(name):
		case typ != "blob":
			// Submodules (commits) are not part of the tree's content.
		case mode == "120000":
			links[name] = id
		default:
			t.files[name] = id
		}
	}
	if err := t.readLinks(ctx, blobs, links); err != nil {
		return nil, fmt.Errorf("read symlinks of %s: %w", sha, err)
	}
	return t.open(ctx, sha, blobs)
}

// OpenFrom opens rev as Open does, from base, a snapshot of a commit
// opened with Open: it lists only what differs (git diff-tree) and takes
// the rest of base's listing, so that a commit a few files away from
// base costs those files, not the whole tree. Trees with symlinks are
// listed whole.
func OpenFrom(ctx context.Context, base *Snapshot, rev string) (*Snapshot, error) {
	repo := gitcli.Repo{Dir: base.blobs.repoDir}
	if base.Rev == WorkingTree || len(base.tree.links) > 0 || base.blobs.repoDir == "" {
		return Open(ctx, repo.Dir, rev, base.blobs)
	}
	sha, err := repo.ResolveCommit(ctx, rev)
	if err != nil {
		return nil, err
	}
	out, err := repo.Run(ctx, "diff-tree", "-r", "-z", "--no-renames", base.Rev, sha)
	if err != nil {
		return nil, fmt.Errorf("compare commit %s with %s: %w", sha, base.Rev, err)
	}
	// Records are ":<old mode> <new mode> <old id> <new id> <status>",
	// then the path.
	recs := strings.Split(string(out), "\x00")
	type entry struct{ name, mode, id string }
	var diff []entry
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(recs[i])
		if len(f) != 5 || !strings.HasPrefix(f[0], ":") {
			return nil, fmt.Errorf("compare commit %s with %s: unexpected diff-tree line %q", sha, base.Rev, recs[i])
		}
		if f[0] == ":120000" || f[1] == "120000" {
			return Open(ctx, repo.Dir, rev, base.blobs)
		}
		if !tooDeep(recs[i+1]) {
			diff = append(diff, entry{recs[i+1], f[1], f[3]})
		}
	}
	bt := base.tree
	t := &tree{files: maps.Clone(bt.files), links: map[string]string{}, dirs: maps.Clone(bt.dirs)}
	var added []string
	for _, e := range diff {
		_, had := t.files[e.name]
		// Only blobs are content: a submodule (160000) or a deletion
		// (000000) leaves no file.
		if strings.HasPrefix(e.mode, "100") {
			t.files[e.name] = e.id
			if !had {
				added = append(added, e.name)
			}
		} else if had {
			delete(t.files, e.name)
			t.unlist(e.name)
		}
	}
	// After the deletions: a file may replace a directory, or one a file.
	for _, p := range added {
		t.list(p)
	}
	ix := &Index{files: t.files, dirs: t.dirs, tree: t, from: base.Index, delta: map[string]bool{}}
	for _, e := range diff {
		if bt.files[e.name] != t.files[e.name] {
			markChanged(ix.delta, base.Index, ix, e.name)
		}
	}
	// base's kustomization files, but for those the diff touched.
	kusts := []string{}
	for _, p := range base.kusts {
		if _, ok := t.files[p]; ok {
			kusts = append(kusts, p)
		}
	}
	for _, p := range added {
		if IsKustomizationFile(p) {
			kusts = append(kusts, p)
		}
	}
	slices.Sort(kusts)
	return t.snapshot(ctx, sha, ix, base.blobs, kusts)
}

// list adds a new path to its directory's listing, and the directories
// that appear with it to theirs. Listings may be shared with another
// tree, so a changed one is a copy.
func (t *tree) list(p string) {
	for p != "." {
		d, name := split(p)
		ns, known := t.dirs[d]
		i, _ := slices.BinarySearch(ns, name)
		t.dirs[d] = slices.Insert(slices.Clip(ns), i, name)
		if known {
			return
		}
		p = d
	}
}

// unlist removes a path gone from its directory's listing, and the
// directories left empty from theirs.
func (t *tree) unlist(p string) {
	for p != "." {
		d, name := split(p)
		ns := t.dirs[d]
		if i, ok := slices.BinarySearch(ns, name); ok {
			ns = slices.Delete(slices.Clone(ns), i, i+1)
		}
		if len(ns) > 0 || d == "." {
			t.dirs[d] = ns
			return
		}
		delete(t.dirs, d)
		p = d
	}
}

// readLinks reads the targets of symlinks, stored by git as blobs.
func (t *tree) readLinks(ctx context.Context, blobs *Blobs, links map[string]string) error {
	if len(links) == 0 {
		return nil
	}
	targets, err := blobs.get(ctx, slices.Collect(maps.Values(links)))
	if err != nil {
		return err
	}
	for name, id := range links {
		t.links[name] = string(targets[id])
	}
	return nil
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
	return t.snapshot(ctx, rev, t.index(), blobs, nil)
}

// snapshot makes the snapshot of t with its kustomization files loaded:
// kusts, or when nil those of the index.
func (t *tree) snapshot(ctx context.Context, rev string, ix *Index, blobs *Blobs, kusts []string) (*Snapshot, error) {
	s := &Snapshot{Rev: rev, Files: len(ix.files), Index: ix, blobs: blobs, tree: t,
		loaded: map[string]bool{".": true}, content: map[string][]byte{}}
	s.FS = newFS(s)
	if kusts == nil {
		for name := range ix.files {
			if IsKustomizationFile(name) {
				kusts = append(kusts, name)
			}
		}
		slices.Sort(kusts)
	}
	// Discovery reads every kustomization file, so load them all now.
	if err := s.Load(ctx, kusts); err != nil {
		return nil, err
	}
	s.kusts = kusts
	return s, nil
}

// KustomizationFiles lists the kustomization files of the tree, sorted,
// and false when the tree has symlinks: a walk then finds files under
// more names than they have.
func (s *Snapshot) KustomizationFiles() ([]string, bool) {
	if len(s.tree.links) > 0 {
		return nil, false
	}
	return s.kusts, true
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

// Load makes the named repository-relative paths present in FS: files
// with their content, read from git in one batch, directories as
// directories (without what they hold), and the directories and links on
// the way. Paths the tree does not have stay absent, as on disk.
func (s *Snapshot) Load(ctx context.Context, paths []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	files := map[string]string{} // real path -> blob id, to read
	for _, p := range paths {
		if s.loadPlain(p, files) {
			continue
		}
		var seen []string
		real, k, err := resolve(func(r string) (kind, string) {
			seen = append(seen, r)
			return s.tree.lstat(r)
		}, p)
		for _, r := range seen {
			if k, _ := s.tree.lstat(r); k == directory {
				s.loaded[r] = true
			}
		}
		switch {
		case err != nil:
		case k == regular && !s.loaded[real]:
			files[real] = s.tree.files[real]
		case k == directory:
			s.loaded[real] = true
		}
	}
	return s.fetch(ctx, files)
}

// plain says the tree has no symlinks.
func (s *Snapshot) plain() bool { return len(s.tree.links) == 0 }

// loadPlain is Load's way for a clean path in a tree without symlinks,
// where a path is its real path and a directory's parents are
// directories: it marks p (a file to read, or a directory) and the
// directories above it, and says whether it could.
func (s *Snapshot) loadPlain(p string, files map[string]string) bool {
	if !s.plain() || p == "" || tooDeep(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return false
	}
	d := p
	if id, ok := s.tree.files[p]; ok {
		if !s.loaded[p] {
			files[p] = id
		}
		d, _ = split(p)
	}
	// The deepest directory on the way, and those above it.
	for ; d != "."; d, _ = split(d) {
		if _, ok := s.tree.dirs[d]; ok {
			break
		}
	}
	for ; d != "." && !s.loaded[d]; d, _ = split(d) {
		s.loaded[d] = true
	}
	return true
}

// LoadAll makes every file of the tree present in FS.
func (s *Snapshot) LoadAll(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := range s.tree.dirs {
		s.loaded[d] = true
	}
	files := map[string]string{}
	for p, id := range s.tree.files {
		if !s.loaded[p] {
			files[p] = id
		}
	}
	return s.fetch(ctx, files)
}

// fetch reads files (real path -> blob id) and marks them loaded; s.mu
// is held.
func (s *Snapshot) fetch(ctx context.Context, files map[string]string) error {
	var need []string
	for _, id := range files {
		if _, ok := s.content[id]; !ok {
			need = append(need, id)
		}
	}
	data, err := s.blobs.get(ctx, need)
	if err != nil {
		return fmt.Errorf("read files of %s: %w", s.Rev, err)
	}
	maps.Copy(s.content, data)
	for p := range files {
		s.loaded[p] = true
	}
	return nil
}

// lstat, children and read serve FS: what Load made present.
func (s *Snapshot) lstat(rel string) (kind, string) {
	k, target := s.tree.lstat(rel)
	if k == regular || k == directory {
		s.mu.RLock()
		ok := s.loaded[rel]
		s.mu.RUnlock()
		if !ok {
			return absent, ""
		}
	}
	return k, target
}

func (s *Snapshot) children(rel string) []string {
	var out []string
	for _, name := range s.tree.children(rel) {
		if k, _ := s.lstat(path.Join(rel, name)); k != absent {
			out = append(out, name)
		}
	}
	return out
}

func (s *Snapshot) read(rel string) ([]byte, error) {
	id := s.tree.files[rel]
	s.mu.RLock()
	data, ok := s.content[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s at %s is not loaded", rel, s.Rev)
	}
	if data == nil {
		if err := s.blobs.tooLarge(id); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// ReadFile returns a file's content as committed, whether or not it was
// loaded into FS (where kplan may have overridden it for krusty).
func (s *Snapshot) ReadFile(ctx context.Context, rel string) ([]byte, error) {
	id, ok := s.Index.ID(rel)
	if !ok {
		return nil, fmt.Errorf("%s at %s: %w", rel, s.Rev, fs.ErrNotExist)
	}
	if err := s.blobs.tooLarge(id); err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", rel, s.Rev, err)
	}
	s.mu.RLock()
	data, ok := s.content[id]
	s.mu.RUnlock()
	if ok {
		return data, nil
	}
	got, err := s.blobs.get(ctx, []string{id})
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", rel, s.Rev, err)
	}
	if err := s.blobs.tooLarge(id); err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", rel, s.Rev, err)
	}
	return got[id], nil
}

// Derived is what compute makes of the content of the file at rel,
// computed once per content for every snapshot sharing s's blobs (both
// sides of a plan share most files, and a plan reads its Flux files
// several times); name says which computation it is. The value is
// shared: callers must not change it.
func (s *Snapshot) Derived(ctx context.Context, rel, name string, compute func(data []byte) any) (any, error) {
	id, ok := s.Index.ID(rel)
	if !ok {
		return nil, fmt.Errorf("%s at %s: %w", rel, s.Rev, fs.ErrNotExist)
	}
	if v, ok := s.blobs.derivedOf(name, id); ok {
		return v, nil
	}
	data, err := s.ReadFile(ctx, rel)
	if err != nil {
		return nil, err
	}
	v := compute(data)
	s.blobs.keepDerived(name, id, v)
	return v, nil
}

// ReadFiles is ReadFile for many paths, in one batch: the content
// of each path present in the commit, nil for a file over the size limit.
func (s *Snapshot) ReadFiles(ctx context.Context, paths []string) (map[string][]byte, error) {
	ids := make(map[string]string, len(paths))
	need := make([]string, 0, len(paths))
	for _, p := range paths {
		if id, ok := s.Index.ID(p); ok {
			ids[p] = id
			need = append(need, id)
		}
	}
	got, err := s.blobs.get(ctx, need)
	if err != nil {
		return nil, fmt.Errorf("read the files of %s: %w", s.Rev, err)
	}
	out := make(map[string][]byte, len(ids))
	for p, id := range ids {
		out[p] = got[id]
	}
	return out, nil
}

// Containing returns the paths, among paths, of files whose content
// holds needle, in their order, without loading the others into FS or
// memory: a search over the whole tree (Flux Kustomizations anywhere)
// costs one pass over it. Both sides of a plan share the answers of the
// contents they share.
func (s *Snapshot) Containing(ctx context.Context, paths []string, needle string) ([]string, error) {
	out, err := s.ContainingEach(ctx, paths, needle)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ContainingEach is Containing for several needles in one pass: the
// paths holding each needle, in the order of needles. YAML files whose
// holders are known (KnowYAMLHolders) are answered without a look at
// their contents.
func (s *Snapshot) ContainingEach(ctx context.Context, paths []string, needles ...string) ([][]string, error) {
	out := make([][]string, len(needles))
	known := make([]map[string]bool, len(needles))
	all := true
	for i, n := range needles {
		if v, ok := s.holders.Load(n); ok {
			known[i] = v.(map[string]bool)
		} else {
			all = false
		}
	}
	search := paths
	if all {
		search = nil
		for _, p := range paths {
			if !IsYAML(p) {
				search = append(search, p)
			}
		}
	}
	ids := make([]string, 0, len(search))
	for _, p := range search {
		if id, ok := s.Index.ID(p); ok {
			ids = append(ids, id)
		}
	}
	var has []map[string]bool
	if len(ids) > 0 {
		var err error
		if has, err = s.blobs.contain(ctx, ids, needles...); err != nil {
			return nil, fmt.Errorf("search the files of %s: %w", s.Rev, err)
		}
	}
	for i := range needles {
		for _, p := range paths {
			if all && IsYAML(p) {
				if known[i][p] {
					out[i] = append(out[i], p)
				}
			} else if id, ok := s.Index.ID(p); ok && has[i][id] {
				out[i] = append(out[i], p)
			}
		}
	}
	return out, nil
}

// KnowYAMLHolders tells s which of its YAML files hold needle: paths,
// every one (what Containing would find), so that Containing answers
// for its YAML files from it. A plan knows them from a plan before it of
// this commit, or of one a diff away.
func (s *Snapshot) KnowYAMLHolders(needle string, paths []string) {
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	s.holders.Store(needle, set)
}

// YAMLHolders are the YAML files of s holding needle, sorted, if known.
func (s *Snapshot) YAMLHolders(needle string) ([]string, bool) {
	v, ok := s.holders.Load(needle)
	if !ok {
		return nil, false
	}
	return slices.Sorted(maps.Keys(v.(map[string]bool))), true
}

// Blobs is where the snapshot's contents come from.
func (s *Snapshot) Blobs() *Blobs { return s.blobs }

// Size is the length of a file's content, 0 for files not read yet.
func (s *Snapshot) Size(rel string) int {
	id, ok := s.Index.ID(rel)
	if !ok {
		return 0
	}
	s.mu.RLock()
	data, ok := s.content[id]
	s.mu.RUnlock()
	if ok {
		return len(data)
	}
	return s.blobs.size(id)
}

// Abs is the path of a repository-relative path inside the snapshot.
func Abs(rel string) string { return path.Join(Root, filepath.ToSlash(rel)) }

// Rel is the repository-relative form of an absolute snapshot path; a
// path above the top starts with "..".
func Rel(abs string) string {
	r, err := filepath.Rel(Root, path.Clean(filepath.ToSlash(abs)))
	if err != nil {
		return abs
	}
	return filepath.ToSlash(r)
}

// blobID is git's name for content: the SHA-1 of "blob <size>\0<content>",
// so files read from disk compare equal to the same files in a commit.
func blobID(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
