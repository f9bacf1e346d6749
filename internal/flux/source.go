package flux

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// What a Flux Kustomization builds is not the commit but the artifact
// source-controller makes of its GitRepository, and this file is the one
// owner of that artifact. Encoded from fluxcd/source-controller v1.9.1
// (the newest release when written) and the modules it builds with,
// fluxcd/pkg artifact v0.18.1 and sourceignore v0.18.0 (v0.19.0, which
// kplan links, changes only its go.mod):
//
//   - internal/controller/gitrepository_controller.go:274-279: the
//     reconcilers run in the order storage, source (the checkout),
//     include (the artifacts of spec.include copied into the checkout),
//     artifact (the archive): so the ignore rules apply to included
//     files too.
//   - gitrepository_controller.go:912-926 (reconcileArtifact): the
//     patterns are every .sourceignore of the checkout
//     (sourceignore.LoadIgnorePatterns: each file's patterns scoped to
//     its directory, the top's first, then each subdirectory's in name
//     order, depth first), then spec.ignore's, scoped to the top; the
//     checkout is archived through storage.SourceIgnoreFilter.
//   - fluxcd/pkg artifact/storage/archive.go:68-77 (SourceIgnoreFilter):
//     without any pattern, the default exclusions apply
//     (sourceignore.NewDefaultMatcher: ExcludeVCS, ExcludeExt, ExcludeCI,
//     ExcludeExtra, sourceignore.go:29-35); with any pattern, only the VCS
//     ones and the patterns: a .sourceignore anywhere, or spec.ignore,
//     replaces the defaults (`**/.sops.yaml`, `.github/` …) for the whole
//     artifact.
//   - archive.go:112-119 (Archive): anything but a regular file or a
//     directory (a symlink) is left out; a directory that matches is not
//     skipped but each file below is matched on its own, the last
//     matching pattern winning (gitignore.Matcher).
//   - gitrepository_controller.go:970-1007 (reconcileInclude) and
//     artifact/storage/filesystem.go:184-219 (CopyToPath): an include
//     copies its artifact's fromPath (default the top) to toPath
//     (default the included GitRepository's name), renaming the
//     directory into place: onto a directory the checkout holds, it fails.
//
// kustomize-controller builds from that artifact as it is: its generator
// runs unfiltered (fluxcd/kustomize-controller v1.9.4
// internal/controller/kustomization_controller.go:749, NewGenerator).

// GitRepository is a GitRepository object written in the repository:
// the rules of the artifact source-controller makes of it.
type GitRepository struct {
	Namespace, Name, File string
	// URL and Ref (spec.ref as JSON) say what it checks out.
	URL, Ref string
	// Ignore is spec.ignore; nil when unset.
	Ignore *string
	// Include is spec.include.
	Include []Include
}

// ID is namespace/name.
func (g *GitRepository) ID() string { return g.Namespace + "/" + g.Name }

// Include is one entry of a GitRepository's spec.include.
type Include struct {
	Repository, FromPath, ToPath string
}

// to is where the include is copied in the artifact: toPath, else the
// included GitRepository's name (GitRepositoryInclude.GetToPath,
// api/v1/gitrepository_types.go:195).
func (in Include) to() string { return cleanPath(cmp.Or(in.ToPath, in.Repository)) }

// gitRepository is the GitRepository a document of file (m) declares,
// nil if it declares none.
func gitRepository(m map[string]any, file string) *GitRepository {
	apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
	kind, _, _ := unstructured.NestedString(m, "kind")
	name, _, _ := unstructured.NestedString(m, "metadata", "name")
	ns, _, _ := unstructured.NestedString(m, "metadata", "namespace")
	if g, _, _ := strings.Cut(apiVersion, "/"); g != sourceGroup || kind != "GitRepository" || name == "" {
		return nil
	}
	g := &GitRepository{Namespace: cmp.Or(ns, "default"), Name: name, File: file}
	g.URL, _, _ = unstructured.NestedString(m, "spec", "url")
	if ref, ok, _ := unstructured.NestedFieldNoCopy(m, "spec", "ref"); ok {
		data, _ := json.Marshal(ref)
		g.Ref = string(data)
	}
	if ig, ok, _ := unstructured.NestedFieldNoCopy(m, "spec", "ignore"); ok {
		if s, ok := ig.(string); ok {
			g.Ignore = &s
		}
	}
	incs, _, _ := unstructured.NestedSlice(m, "spec", "include")
	for _, r := range incs {
		in, _ := r.(map[string]any)
		repo, _, _ := unstructured.NestedString(in, "repository", "name")
		from, _ := in["fromPath"].(string)
		to, _ := in["toPath"].(string)
		if repo != "" {
			g.Include = append(g.Include, Include{Repository: repo, FromPath: from, ToPath: to})
		}
	}
	return g
}

// source is the artifact of one GitRepository of this repository, on
// one side of a plan: the tree a build of a Kustomization from it sees.
type source struct {
	// snap is the artifact's tree: a file it leaves out does not exist.
	snap *snapshot.Snapshot
	// key names its rules (spec.ignore, spec.include): two sides build
	// alike from the same files only under the same rules.
	key string
	// origin maps the artifact's paths that are not where the
	// repository has them (included copies) to the repository's.
	origin map[string]string
	// ignores are the repository's .sourceignore files: every target
	// reads them, as a change of one can add or remove any file (the
	// first one also turns the default exclusions off).
	ignores []string
	// notes say what of the artifact kplan did not evaluate.
	notes []string
	err   error
}

// sources makes the artifacts of one side's GitRepositories, once each.
type sources struct {
	e     *Engine
	s     *snapshot.Snapshot
	decls []GitRepository
	mu    sync.Mutex
	made  map[string]*source // by the rules' key
}

func (e *Engine) newSources(s *snapshot.Snapshot, decls []GitRepository) *sources {
	return &sources{e: e, s: s, decls: decls, made: map[string]*source{}}
}

// pick is the declaration of the GitRepository id that a cluster
// reading paths (its entry point's build) uses: the one declared in a
// file it reads, else the only one, else the first (with a note when
// they differ); nil when the repository declares none (a FluxInstance
// makes it from its sync spec, with no ignore rules).
func (ss *sources) pick(id string, paths []string) (*GitRepository, string) {
	var cands []*GitRepository
	for i := range ss.decls {
		if ss.decls[i].ID() == id {
			cands = append(cands, &ss.decls[i])
		}
	}
	if len(cands) == 0 {
		return nil, ""
	}
	for _, g := range cands {
		if _, ok := slices.BinarySearch(paths, g.File); ok {
			return g, ""
		}
	}
	for _, g := range cands[1:] {
		if rulesKey(g) != rulesKey(cands[0]) {
			return cands[0], fmt.Sprintf("GitRepository %s is declared with different ignore or include rules in %s and %s, and no file this cluster's entry point reads declares it: kplan builds its artifact by %s", id, cands[0].File, g.File, cands[0].File)
		}
	}
	return cands[0], ""
}

// rulesKey names g's artifact rules.
func rulesKey(g *GitRepository) string {
	if g == nil {
		return "none"
	}
	data, _ := json.Marshal(struct {
		ID, URL, Ref string
		Ignore       *string
		Include      []Include
	}{g.ID(), g.URL, g.Ref, g.Ignore, g.Include})
	return string(data)
}

// of is the artifact of g (nil: a GitRepository with no rules).
func (ss *sources) of(ctx context.Context, g *GitRepository) *source {
	key := rulesKey(g)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if src, ok := ss.made[key]; ok {
		return src
	}
	src := &source{key: key, origin: map[string]string{}}
	files, notes, err := ss.files(ctx, g, map[string]bool{})
	src.notes = notes
	if err == nil {
		for p, from := range files {
			if p != from {
				src.origin[p] = from
			}
		}
		src.snap, err = ss.s.Compose(ctx, files)
	}
	src.err = err
	for _, p := range ss.s.Index.Paths() {
		if path.Base(p) == sourceignore.IgnoreFile {
			src.ignores = append(src.ignores, p)
		}
	}
	ss.made[key] = src
	return src
}

// files are the artifact of g as artifact path → repository path, and
// what of it kplan could not evaluate; seen are the GitRepositories
// whose artifact is being made (an include of one of them is a cycle).
func (ss *sources) files(ctx context.Context, g *GitRepository, seen map[string]bool) (map[string]string, []string, error) {
	files := map[string]string{}
	for _, p := range ss.s.Regular() {
		files[p] = p
	}
	var notes []string
	if g != nil {
		seen[g.ID()] = true
		for _, in := range g.Include {
			n, err := ss.include(ctx, g, in, files, seen)
			if err != nil {
				return nil, nil, err
			}
			notes = append(notes, n...)
		}
		delete(seen, g.ID())
	}
	m, err := ss.matcher(ctx, g, files)
	if err != nil {
		return nil, nil, err
	}
	for p := range files {
		if m.Match(strings.Split(p, "/"), false) {
			delete(files, p)
		}
	}
	return files, notes, nil
}

// include copies in into files when the included GitRepository is this
// repository at the same revision, or says why not.
func (ss *sources) include(ctx context.Context, g *GitRepository, in Include, files map[string]string, seen map[string]bool) ([]string, error) {
	id := g.Namespace + "/" + in.Repository
	to, from := in.to(), cleanPath(in.FromPath)
	not := func(why string) []string {
		return []string{fmt.Sprintf("GitRepository %s includes GitRepository %s at %s, which kplan does not evaluate: %s; the builds see its artifact without it", g.ID(), id, to, why)}
	}
	var inc *GitRepository
	for i := range ss.decls {
		if ss.decls[i].ID() == id {
			inc = &ss.decls[i]
			break
		}
	}
	ours := slices.Contains(ss.e.opts.Sources, id) || (inc != nil && inc.URL != "" && inc.URL == g.URL && inc.Ref == g.Ref)
	switch {
	case !ours:
		return not("its artifact is not this repository at this commit (it is no GitRepository kplan plans as this repository, nor declared here with the same url and ref)"), nil
	case seen[id]:
		return not("its artifact includes the one including it"), nil
	}
	sub, notes, err := ss.files(ctx, inc, seen)
	if err != nil {
		return nil, err
	}
	for p := range files {
		if p == to || strings.HasPrefix(p, to+"/") || to == "." {
			return not(fmt.Sprintf("the repository holds %s, onto which source-controller cannot copy it (the GitRepository fails with CopyFailure)", to)), nil
		}
	}
	copied := 0
	for p, repo := range sub {
		rel, ok := strings.CutPrefix(p, from+"/")
		if from == "." {
			rel, ok = p, true
		}
		if ok {
			files[path.Join(to, rel)] = repo
			copied++
		}
	}
	if copied == 0 {
		return not(fmt.Sprintf("its artifact holds no %s (the GitRepository fails with CopyFailure)", from)), nil
	}
	return notes, nil
}

// matcher is source-controller's filter of the artifact of g whose
// files (artifact path → repository path) are those given: every
// .sourceignore among them, then spec.ignore (archive.go:68-77).
func (ss *sources) matcher(ctx context.Context, g *GitRepository, files map[string]string) (gitignore.Matcher, error) {
	var ignores []string
	for p := range files {
		if path.Base(p) == sourceignore.IgnoreFile {
			ignores = append(ignores, p)
		}
	}
	// LoadIgnorePatterns' order: a directory's own file, then its
	// subdirectories' in name order, depth first.
	slices.SortFunc(ignores, func(a, b string) int {
		return slices.Compare(dirParts(path.Dir(a)), dirParts(path.Dir(b)))
	})
	var ps []gitignore.Pattern
	for _, p := range ignores {
		data, err := ss.s.ReadFile(ctx, files[p])
		if err != nil {
			return nil, fmt.Errorf("read %s for the ignore rules of Flux's artifact: %w", files[p], err)
		}
		ps = append(ps, sourceignore.ReadPatterns(bytes.NewReader(data), dirParts(path.Dir(p)))...)
	}
	if g != nil && g.Ignore != nil {
		ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(*g.Ignore), nil)...)
	}
	if len(ps) == 0 {
		return sourceignore.NewDefaultMatcher(nil, nil), nil
	}
	return sourceignore.NewMatcher(append(sourceignore.VCSPatterns(nil), ps...)), nil
}

// dirParts is a repository directory as the matcher's domain: nil for
// the top.
func dirParts(dir string) []string {
	if dir == "." {
		return nil
	}
	return strings.Split(dir, "/")
}

// rules is the key of src's rules ("" for none).
func (src *source) rules() string {
	if src == nil {
		return ""
	}
	return src.key
}

// repoPaths adds to set the repository paths of the artifact paths in
// it that an include put elsewhere, and the .sourceignore files.
func (src *source) repoPaths(set map[string]bool) {
	if src == nil {
		return
	}
	for p := range set {
		if r, ok := src.origin[p]; ok {
			set[r] = true
		}
	}
	for _, p := range src.ignores {
		set[p] = true
	}
}
