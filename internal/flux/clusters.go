package flux

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// OperatorGroup is the API group of flux-operator's FluxInstance and
// ResourceSet.
const OperatorGroup = "fluxcd.controlplane.io"

// Instance is a flux-operator FluxInstance syncing a path of the
// repository: the flux-system Kustomization it makes is no object in
// git, so the path is built as that Kustomization would be. It is found
// as a FluxInstance object, or as the values of a HelmRelease of the
// flux-instance chart (how home-ops repositories install it).
type Instance struct {
	File string
	// Namespace and Name of the sync objects the operator makes: the
	// FluxInstance's namespace, as `flux bootstrap` names them.
	Namespace, Name string
	Kind            string // spec.sync.kind: GitRepository, OCIRepository, Bucket
	Path            string // spec.sync.path, repository-relative
	URL             string // spec.sync.url
}

// instance is the FluxInstance a document of file (m) declares, nil if
// it declares none.
func instance(m map[string]any, file string) *Instance {
	apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
	kind, _, _ := unstructured.NestedString(m, "kind")
	ns, _, _ := unstructured.NestedString(m, "metadata", "namespace")
	g, _, _ := strings.Cut(apiVersion, "/")
	var sync map[string]any
	switch {
	case g == OperatorGroup && kind == "FluxInstance":
		sync, _, _ = unstructured.NestedMap(m, "spec", "sync")
	case g == "helm.toolkit.fluxcd.io" && kind == "HelmRelease" && chartName(m) == "flux-instance":
		sync, _, _ = unstructured.NestedMap(m, "spec", "values", "instance", "sync")
	}
	p, _ := sync["path"].(string)
	if p == "" {
		return nil
	}
	ns = cmp.Or(ns, "flux-system")
	name, _ := sync["name"].(string)
	k, _ := sync["kind"].(string)
	u, _ := sync["url"].(string)
	return &Instance{File: file, Namespace: ns, Name: cmp.Or(name, ns), Kind: cmp.Or(k, "GitRepository"), Path: cleanPath(p), URL: strings.TrimSuffix(u, "/")}
}

// chartName is the chart a HelmRelease installs: spec.chart.spec.chart,
// or the name of its chartRef.
func chartName(m map[string]any) string {
	if c, _, _ := unstructured.NestedString(m, "spec", "chart", "spec", "chart"); c != "" {
		return path.Base(c)
	}
	c, _, _ := unstructured.NestedString(m, "spec", "chartRef", "name")
	return c
}

// cleanPath is a spec path as a repository-relative directory ("." for
// the top). Flux joins it to the source's root securely, so a path
// climbing above the root stops there, as it does here.
func cleanPath(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// syncKustomization is the flux-system Kustomization `flux bootstrap` or
// flux-operator makes for a cluster whose sync objects are no object in
// git: applying dir from the repository itself.
func syncKustomization(ns, name, dir, file string) *Kustomization {
	return &Kustomization{Namespace: ns, Name: name, File: file, Object: map[string]any{
		"apiVersion": Group + "/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"path":      "./" + dir,
			"prune":     true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": name},
		},
	}}
}

// A cluster is what one Flux installation applies from the repository:
// its entry point (the flux-system Kustomization) and every declared
// Kustomization its builds can reach. The repository's Kustomizations no
// entry point reaches form the unnamed cluster "", as one installation
// not in git would apply them.
type cluster struct {
	name    string
	entry   int   // index in declared of its entry point, -1 for ""
	members []int // indices in declared, sorted
}

// entries finds the clusters' entry points among declared (appending the
// implicit ones: FluxInstances' sync paths, .kplan.yaml's clusters,
// bootstrap directories whose sync file is a placeholder), and says why
// any instance is not one.
func (e *Engine) entries(ctx context.Context, s *snapshot.Snapshot, declared []Declared, instances []Instance, self, root func(i int) bool) *entryPoints {
	f := &entryPoints{s: s, declared: declared, named: map[int]string{}, byPath: map[string]int{}, synced: map[int]string{}}
	for i, d := range declared {
		if e.skip(d.Kustomization) == "" && self(i) {
			if _, dup := f.byPath[d.Path()]; !dup {
				f.byPath[d.Path()] = i
			}
		}
	}
	for _, name := range sortedKeys(e.opts.Clusters) {
		f.add(syncKustomization("flux-system", "flux-system", cleanPath(e.opts.Clusters[name]), ""), name, "")
	}
	for _, in := range instances {
		if in.Kind == "OCIRepository" {
			if dir, ok := e.artifactDir(in.URL); ok {
				k := syncKustomization(in.Namespace, in.Name, in.Path, in.File)
				k.Object["spec"].(map[string]any)["sourceRef"] = map[string]any{"kind": "OCIRepository", "name": in.Name}
				k.Root, k.Artifact = dir, in.URL
				f.add(k, "", in.File)
				continue
			}
		}
		if in.Kind != "GitRepository" {
			why := fmt.Sprintf("its FluxInstance syncs from a %s, not this repository", in.Kind)
			if in.Kind == "OCIRepository" {
				why = fmt.Sprintf("its FluxInstance syncs from the OCI artifact %s, which .kplan.yaml's fluxArtifacts does not map to a directory of this repository (add it there if CI pushes it from this repository)", in.URL)
			}
			f.skipped = append(f.skipped, Skipped{ID: in.Namespace + "/" + in.Name, File: in.File, Reason: why})
			continue
		}
		f.add(syncKustomization(in.Namespace, in.Name, in.Path, in.File), "", in.File)
	}
	f.placeholders()
	f.unsynced(e, root)
	return f
}

// entryPoints are the clusters' entry points as entries finds them.
type entryPoints struct {
	s        *snapshot.Snapshot
	declared []Declared
	named    map[int]string // entry index → configured name
	byPath   map[string]int // entry path → its index
	skipped  []Skipped
	// synced are the entries a FluxInstance syncs: entry index → the
	// file declaring the instance.
	synced map[int]string
}

// entriesOf are the entry points among the declared Kustomizations: the
// implicit ones, and those whose build applies their own declaration
// (selfRoot: flux bootstrap's flux-system); but those unreferenced, which
// phantoms holds with why (by index).
func (f *entryPoints) entriesOf(selfRoot func(i int) bool) (entries []int, phantoms map[int]Skipped) {
	phantoms = map[int]Skipped{}
	for i, d := range f.declared {
		if !d.entry && !selfRoot(i) {
			continue
		}
		if why := f.unreferenced(i); why != "" {
			phantoms[i] = Skipped{ID: d.ID(), File: d.File, Reason: why}
			continue
		}
		entries = append(entries, i)
	}
	return entries, phantoms
}

// name adds to the entry target of cluster c, when a FluxInstance syncs
// it, a note naming each unreferenced entry point: on the plan, where the
// FluxInstance is.
func (f *entryPoints) name(c cluster, phantoms map[int]Skipped, targets []*Target) {
	if _, ok := f.synced[c.entry]; !ok || len(phantoms) == 0 {
		return
	}
	var notes []string
	for _, i := range slices.Sorted(maps.Keys(phantoms)) {
		notes = append(notes, phantoms[i].Reason)
	}
	for _, t := range targets {
		if t.Cluster == c.name && t.Parent == "" && t.ID() == f.declared[c.entry].ID() {
			t.Notes = append(t.Notes, notes...)
		}
	}
}

// unreferenced says why entry point i, found by its files alone (a
// self-applying Kustomization, a bootstrap placeholder, directories
// declaring the same Kustomizations), is not planned as a cluster: the
// repository installs Flux with FluxInstances, none of which syncs it,
// and .kplan.yaml does not name it (leftover `flux bootstrap` files
// would otherwise double every target under a second cluster); "" when
// it is planned.
func (f *entryPoints) unreferenced(i int) string {
	if len(f.synced) == 0 || f.named[i] != "" {
		return ""
	}
	if _, ok := f.synced[i]; ok {
		return ""
	}
	d := f.declared[i]
	var files []string
	for _, file := range f.synced {
		if !slices.Contains(files, file) {
			files = append(files, file)
		}
	}
	slices.Sort(files)
	what := d.Path()
	if d.File != "" {
		what = fmt.Sprintf("%s (Kustomization %s in %s)", d.Path(), d.ID(), d.File)
	}
	return fmt.Sprintf("the cluster entry point %s is unreferenced: beside the FluxInstance of %s, which syncs other paths, nothing applies it (leftover bootstrap files?); it is not planned as a cluster: name it in .kplan.yaml's fluxClusters to plan it", what, strings.Join(files, ", "))
}

// add makes the Kustomization syncing k's path an entry point, named
// name when not "": the declared one building that path, else k;
// instance is the file of the FluxInstance syncing it ("" for none).
func (f *entryPoints) add(k *Kustomization, name, instance string) {
	if i, ok := f.byPath[k.Path()]; ok {
		if name != "" {
			f.named[i] = name
		}
		if instance != "" {
			f.synced[i] = instance
		}
		return
	}
	if !f.s.Index.IsDir(k.Path()) && k.Path() != "." {
		f.skipped = append(f.skipped, Skipped{ID: k.ID(), File: k.File, Reason: fmt.Sprintf("its path %s is not a directory of the repository", k.Path())})
		return
	}
	f.declared = append(f.declared, Declared{Kustomization: k, NamespaceSet: true, entry: true})
	f.byPath[k.Path()] = len(f.declared) - 1
	if name != "" {
		f.named[len(f.declared)-1] = name
	}
	if instance != "" {
		f.synced[len(f.declared)-1] = instance
	}
}

// placeholders adds the bootstrap directories whose sync file declares
// nothing: `flux bootstrap` writes <dir>/flux-system/gotk-sync.yaml;
// flux operator leaves it a placeholder declaring nothing (as
// fluxcd/flux2-kustomize-helm-example does).
func (f *entryPoints) placeholders() {
	declares := map[string]bool{}
	for _, d := range f.declared {
		declares[d.File] = true
	}
	for _, p := range f.s.Index.Paths() {
		if path.Base(p) != "gotk-sync.yaml" || path.Base(path.Dir(p)) != "flux-system" || declares[p] {
			continue
		}
		f.add(syncKustomization("flux-system", "flux-system", path.Dir(path.Dir(p)), ""), "", "")
	}
}

// unsynced adds the directories of root Kustomizations (no other one
// reads them) of the same name declared in different directories no
// entry point applies: each directory is a cluster's, synced by a
// flux-system Kustomization that is not in git (Flux's two-cluster
// example before it committed its bootstrap files).
func (f *entryPoints) unsynced(e *Engine, root func(i int) bool) {
	dirs := map[string][]string{} // ID → directories declaring it
	for i, d := range f.declared {
		if d.entry || d.File == "" || !root(i) || e.skip(d.Kustomization) != "" {
			continue
		}
		if dir := path.Dir(d.File); !slices.Contains(dirs[d.ID()], dir) {
			dirs[d.ID()] = append(dirs[d.ID()], dir)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(dirs)) {
		if len(dirs[id]) < 2 {
			continue
		}
		for _, dir := range dirs[id] {
			if !f.underEntry(dir) {
				f.add(syncKustomization("flux-system", "flux-system", dir, ""), "", "")
			}
		}
	}
}

// underEntry says whether an entry point's build may read dir: it is at
// or under an entry point's path.
func (f *entryPoints) underEntry(dir string) bool {
	for p := range f.byPath {
		if p == "." || dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}

// clusters groups declared into clusters: each entry point with what it
// reaches through reads (reads[i]: the declared files i's build reads).
// Without entry points, every Kustomization is in the unnamed cluster;
// with some, those no entry point reaches are applied by none (a file a
// kustomization leaves commented out): unreached lists them.
func clusters(declared []Declared, entries []int, named map[int]string, reads [][]int) (out []cluster, unreached []int) {
	isEntry := map[int]bool{}
	for _, i := range entries {
		isEntry[i] = true
	}
	in := make([]bool, len(declared))
	for _, ei := range entries {
		c := cluster{entry: ei}
		seen := map[int]bool{ei: true}
		for queue := []int{ei}; len(queue) > 0; queue = queue[1:] {
			i := queue[0]
			c.members = append(c.members, i)
			in[i] = true
			for _, j := range reads[i] {
				if !seen[j] && !isEntry[j] {
					seen[j] = true
					queue = append(queue, j)
				}
			}
		}
		slices.Sort(c.members)
		out = append(out, c)
	}
	// Names: what .kplan.yaml says, else the entry directory's base name,
	// else (two alike) its path.
	base := map[string]int{}
	for _, c := range out {
		base[path.Base(declared[c.entry].Path())]++
	}
	for i := range out {
		p := declared[out[i].entry].Path()
		switch {
		case named[out[i].entry] != "":
			out[i].name = named[out[i].entry]
		case base[path.Base(p)] == 1 && p != ".":
			out[i].name = path.Base(p)
		default:
			out[i].name = p
		}
	}
	rest := cluster{entry: -1}
	for i := range declared {
		if !in[i] {
			rest.members = append(rest.members, i)
		}
	}
	if len(out) > 0 {
		unreached = rest.members
	} else {
		out = append(out, rest)
	}
	slices.SortFunc(out, func(a, b cluster) int { return strings.Compare(a.name, b.name) })
	return out, unreached
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
