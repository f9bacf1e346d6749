// Package closure computes an overlay's input closure: the repository
// paths its kustomize build can read, found from the kustomization files
// alone, without rendering.
//
// The closure follows every field that names a file or directory
// (resources, components, patches, generator sources, replacements, crds,
// configurations, openapi, generator/transformer/validator configs)
// through bases and components, the way krusty's loader resolves them. It
// also holds the names a loader looks for and may not find (all three
// kustomization file names of every directory visited, a patch file that
// is absent) and every parent directory of those paths: a render's result
// depends on whether such paths exist, not only on files it reads.
//
// What the static reading cannot bound — a reference outside the
// repository, an unknown field, a plugin, helm — is reported, and the
// caller must then render the overlay every time.
package closure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Kind is what a path is in a tree.
type Kind int

const (
	Absent Kind = iota
	File
	Dir
)

// Source is one side's repository tree, as the closure reads it. Paths are
// repository-relative, slash-separated, "." for the top.
type Source interface {
	Stat(rel string) Kind
	// ReadFile returns a file's content; the closure reads kustomization
	// files and the generator/transformer configs they name.
	ReadFile(rel string) ([]byte, error)
}

// Lister is a Source that can list the files under a directory, which a
// build with helm charts needs (helm reads whole chart directories).
type Lister interface {
	// Files lists the files under dir (repository-relative), at any depth.
	Files(dir string) []string
}

// Options are the render options that change what a build reads.
type Options struct {
	// EnableHelm: helm runs outside the snapshot, so helmCharts cannot be
	// bounded. Without it, krusty rejects helmCharts before reading files.
	EnableHelm bool
	// Memo, when set, shares kustomization parses between Builders: the
	// two sides of a plan hold mostly the same files.
	Memo *Memo
	// Shared, when set, shares between the Builders of a plan's two
	// sides the kustomizations the change does not touch.
	Shared *Shared
}

// Shared holds the kustomization nodes that read the same on both sides
// of a change: a node's content is a function of the state of its own
// paths (what it stats and reads), so one whose paths did not change is
// the same node on the other side. A node that lists a directory (helm
// chart directories) depends on more than its paths and is not shared.
//
// So is an overlay whose closure meets no changed path (and lists no
// directory): its walk visits only shared nodes, so the other side's
// Probe answers for it without a walk.
type Shared struct {
	changed map[string]bool
	mu      sync.Mutex
	nodes   map[string]*node
	unmet   map[string]*Closure // by overlay, without Paths
}

// NewShared returns a Shared for the paths changed between two sides.
func NewShared(changed map[string]bool) *Shared {
	return &Shared{changed: changed, nodes: map[string]*node{}, unmet: map[string]*Closure{}}
}

// unmetOverlay is the closure of an overlay another side found meets
// nothing changed; nil if none did.
func (sh *Shared) unmetOverlay(dir string) *Closure {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.unmet[clean(dir)]
	if c == nil {
		return nil
	}
	cp := *c
	cp.Overlay = dir
	return &cp
}

func (sh *Shared) putUnmet(dir string, c *Closure) {
	cp := *c
	sh.mu.Lock()
	sh.unmet[clean(dir)] = &cp
	sh.mu.Unlock()
}

func (sh *Shared) get(dir string) *node {
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.nodes[dir]
}

func (sh *Shared) put(dir string, n *node) {
	if sh == nil || n.listed {
		return
	}
	for _, p := range n.paths {
		if sh.changed[p] {
			return
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.nodes[dir]; !ok {
		sh.nodes[dir] = n
	}
}

// Memo remembers parsed kustomization files by content.
type Memo struct {
	mu   sync.Mutex
	m    map[string]parsed
	json map[string]converted
}

type parsed struct {
	k   kustomization
	err error
}

type converted struct {
	j   []byte
	err error
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{m: map[string]parsed{}, json: map[string]converted{}} }

// JSON converts a kustomization file from YAML to JSON as krusty does,
// once per content: discovery and the closures decode the same files.
// The result is shared: callers must not change it.
func (m *Memo) JSON(data []byte) ([]byte, error) {
	if m == nil {
		return sigsyaml.YAMLToJSON(data)
	}
	m.mu.Lock()
	c, ok := m.json[string(data)]
	m.mu.Unlock()
	if ok {
		return c.j, c.err
	}
	j, err := sigsyaml.YAMLToJSON(data)
	m.mu.Lock()
	m.json[string(data)] = converted{j, err}
	m.mu.Unlock()
	return j, err
}

// parse decodes a kustomization as krusty does, then applies krusty's
// fixes (bases into resources, env into envs, helm args into charts).
func (m *Memo) parse(data []byte) (kustomization, error) {
	if m != nil {
		m.mu.Lock()
		p, ok := m.m[string(data)]
		m.mu.Unlock()
		if ok {
			return p.k, p.err
		}
	}
	var k kustomization
	j, err := m.JSON(data)
	if err == nil {
		err = strictJSON(j, &k)
	}
	if err == nil {
		k.FixKustomization()
	}
	if m != nil {
		m.mu.Lock()
		m.m[string(data)] = parsed{k, err}
		m.mu.Unlock()
	}
	return k, err
}

// Remote is a reference to something outside the repository.
type Remote struct {
	Ref   string // as written
	Field string // the kustomization field naming it
	File  string // the kustomization file
}

// Closure is what one overlay's build can read.
type Closure struct {
	Overlay string
	// Paths can be read, or checked for existence, by the build; sorted.
	Paths []string
	// Remote references make the build read outside the repository.
	Remote []Remote
	// Unbounded says why the static reading cannot bound the build, if so.
	Unbounded string
	// OpenAPI is set when a kustomization of the build sets a custom
	// schema, which krusty keeps in a process-wide variable.
	OpenAPI bool
	// Helm is set when the build inflates Helm charts (helmCharts, a
	// HelmChartInflationGenerator), with Options.EnableHelm: what they
	// render depends on the cluster's Kubernetes.
	Helm bool
	// Err is a bug met reading a kustomization of the build (a
	// *crash.Error): the overlay fails with it. Unbounded says so too,
	// so that nothing takes the closure for all the build reads.
	Err error
}

// Bounded reports whether the repository paths are all the build reads:
// no remote reference and nothing unbounded.
func (c *Closure) Bounded() bool { return c.Unbounded == "" && len(c.Remote) == 0 }

// Meets reports whether any path of the closure is in changed.
func (c *Closure) Meets(changed map[string]bool) bool {
	if len(changed) < len(c.Paths) {
		for p := range changed {
			if _, ok := slices.BinarySearch(c.Paths, p); ok {
				return true
			}
		}
		return false
	}
	for _, p := range c.Paths {
		if changed[p] {
			return true
		}
	}
	return false
}

// Builder computes closures on one tree, sharing the work for
// kustomizations that several overlays include.
type Builder struct {
	src   Source
	opts  Options
	nodes map[string]*node
}

// New returns a Builder reading src.
func New(src Source, opts Options) *Builder {
	return &Builder{src: src, opts: opts, nodes: map[string]*node{}}
}

// node is one kustomization directory's own contribution.
type node struct {
	paths     []string
	subs      []string // kustomization directories it builds (bases, components)
	remote    []Remote
	unbounded string
	openapi   bool
	helm      bool  // it inflates Helm charts
	listed    bool  // it lists directories, beyond its paths
	err       error // a panic reading it: kplan's bug
}

// Overlay returns the closure of the overlay in dir.
func (b *Builder) Overlay(dir string) *Closure {
	set := map[string]bool{}
	c := b.walk(dir, func(n *node) {
		for _, p := range n.paths {
			set[p] = true
		}
	})
	// A path's parents are looked up on the way to it, and whether they
	// exist decides what the build sees.
	for p := range set {
		for d := path.Dir(p); d != "." && !set[d]; d = path.Dir(d) {
			set[d] = true
		}
	}
	set["."] = true
	c.Paths = make([]string, 0, len(set))
	for p := range set {
		c.Paths = append(c.Paths, p)
	}
	slices.Sort(c.Paths)
	return c
}

// Probe tells, for one set of changed paths, whether overlays' closures
// meet it without building them: a change of a few files then costs a
// look at each kustomization, not the union of every overlay's paths.
type Probe struct {
	b       *Builder
	changed map[string]bool
	own     map[*node]bool // whether the node's own paths meet changed
	shared  *Shared        // b's, when changed is its set; else nil
	few     []string       // changed but ".", when they are few
}

// Probe returns a Probe of changed on b's tree.
func (b *Builder) Probe(changed map[string]bool) *Probe {
	p := &Probe{b: b, changed: changed, own: map[*node]bool{}}
	if len(changed) <= 8 {
		p.few = []string{}
		for c := range changed {
			if c != "." {
				p.few = append(p.few, c)
			}
		}
	}
	if sh := b.opts.Shared; sh != nil && maps.Equal(sh.changed, changed) {
		p.shared = sh
	}
	return p
}

// Overlay says whether Overlay(dir).Meets(changed), and returns the
// closure without its Paths: what it reads outside the repository, why
// it is unbounded, whether it sets a schema.
func (p *Probe) Overlay(dir string) (bool, *Closure) {
	if p.shared != nil {
		if c := p.shared.unmetOverlay(dir); c != nil {
			return false, c
		}
	}
	meets, listed := p.changed["."], false
	c := p.b.walk(dir, func(n *node) {
		meets = meets || p.meets(n)
		listed = listed || n.listed
	})
	if p.shared != nil && !meets && !listed {
		p.shared.putUnmet(dir, c)
	}
	return meets, c
}

// walk visits each kustomization the overlay in dir builds, once, and
// returns its closure without Paths: what it reads outside the
// repository, why it is unbounded, whether it sets a schema.
func (b *Builder) walk(dir string, visit func(*node)) *Closure {
	c := &Closure{Overlay: dir}
	seen := map[string]bool{}
	stack := []string{clean(dir)}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[d] {
			continue // krusty reports the cycle; the paths are already in
		}
		seen[d] = true
		n := b.node(d)
		visit(n)
		c.Remote = append(c.Remote, n.remote...)
		if n.unbounded != "" && c.Unbounded == "" {
			c.Unbounded = n.unbounded
		}
		c.OpenAPI = c.OpenAPI || n.openapi
		c.Helm = c.Helm || n.helm
		if n.err != nil && c.Err == nil {
			c.Err = n.err
		}
		stack = append(stack, n.subs...)
	}
	return c
}

// meets says whether a node's paths, or the directories above them
// (which Overlay adds), are changed.
func (p *Probe) meets(n *node) bool {
	if m, ok := p.own[n]; ok {
		return m
	}
	m := false
	if p.few != nil {
		// A few changed paths: is one of them a path, or above one?
		for _, q := range n.paths {
			for _, c := range p.few {
				if strings.HasPrefix(q, c) && (len(q) == len(c) || q[len(c)] == '/') {
					m = true
				}
			}
		}
	} else {
		for _, q := range n.paths {
			for ; q != "." && !m; q = path.Dir(q) {
				m = p.changed[q]
			}
		}
	}
	p.own[n] = m
	return m
}

func (b *Builder) node(dir string) *node {
	if n, ok := b.nodes[dir]; ok {
		return n
	}
	if n := b.opts.Shared.get(dir); n != nil {
		b.nodes[dir] = n
		return n
	}
	n := &node{}
	b.nodes[dir] = n
	if err := crash.Catch(func() error { b.read(n, dir); return nil }); err != nil {
		// What was read before the panic is not all the build reads.
		*n = node{paths: []string{dir}, unbounded: fmt.Sprintf("%s: %v", dir, err), err: fmt.Errorf("read the kustomization in %s: %w", dir, err)}
	}
	b.opts.Shared.put(dir, n)
	return n
}

// kustomization is a kustomization file as krusty decodes it, plus the
// inventory field kplan removes before krusty sees the file.
type kustomization struct {
	types.Kustomization
	Inventory any `json:"inventory,omitempty"`
}

// read fills n from the kustomization in dir, mirroring the order and
// path resolution of krusty's KustTarget and file loader.
func (b *Builder) read(n *node, dir string) {
	n.paths = append(n.paths, dir)
	var found []string
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := join(dir, name)
		n.paths = append(n.paths, p)
		if b.src.Stat(p) == File {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return // krusty fails: no kustomization, or more than one
	}
	file := found[0]
	data, err := b.src.ReadFile(file)
	if err != nil {
		n.unbounded = fmt.Sprintf("read %s: %v", file, err)
		return
	}
	k, err := b.opts.Memo.parse(data)
	if err != nil {
		// An unknown field may be one a newer kustomize reads files for.
		n.unbounded = fmt.Sprintf("%s: %v", file, err)
		return
	}
	r := refs{b: b, n: n, dir: dir, file: file}

	if len(k.OpenAPI) > 0 {
		n.openapi = true
		if p, ok := k.OpenAPI["path"]; ok {
			r.load(p, "openapi")
		}
	}
	for _, p := range k.Resources {
		r.base(p, "resources", true)
	}
	for _, p := range k.Components {
		r.base(p, "components", false)
	}
	for _, p := range k.Crds {
		r.load(p, "crds")
	}
	for _, p := range k.Configurations {
		r.load(p, "configurations")
	}
	for _, g := range k.ConfigMapGenerator {
		r.kvSources(g.KvPairSources, "configMapGenerator")
	}
	for _, g := range k.SecretGenerator {
		r.kvSources(g.KvPairSources, "secretGenerator")
	}
	for _, p := range k.Patches {
		if p.Path != "" {
			r.load(p.Path, "patches")
		}
	}
	for _, p := range k.PatchesJson6902 {
		if p.Path != "" {
			r.load(p.Path, "patchesJson6902")
		}
	}
	for _, p := range k.PatchesStrategicMerge {
		// Each entry is a file, or if no file loads, an inline patch.
		r.load(string(p), "patchesStrategicMerge")
	}
	for _, p := range k.Replacements {
		if p.Path != "" {
			r.load(p.Path, "replacements")
		}
	}
	if len(k.HelmCharts) > 0 && b.opts.EnableHelm {
		n.helm = true
		r.helm(k.HelmGlobals, k.HelmCharts)
	}
	for _, f := range []struct {
		name    string
		entries []string
	}{{"generators", k.Generators}, {"transformers", k.Transformers}, {"validators", k.Validators}} {
		for _, e := range f.entries {
			r.plugin(e, f.name)
		}
	}
}

// refs resolves one kustomization's references into its node.
type refs struct {
	b    *Builder
	n    *node
	dir  string
	file string
}

// helm reads what helm will: every file under each chart's directory in
// the chart home (the render writes them to disk for helm), the values
// files, and, for a chart from a chart repository that the chart home
// lacks, the repository.
func (r refs) helm(globals *types.HelmGlobals, charts []types.HelmChart) {
	home := types.HelmDefaultHome
	if globals != nil && globals.ChartHome != "" {
		home = globals.ChartHome
	}
	if path.IsAbs(home) {
		r.unbound(fmt.Sprintf("%s: helmGlobals.chartHome %s is outside the repository", r.file, home))
		return
	}
	lister, ok := r.b.src.(Lister)
	if !ok {
		r.unbound(fmt.Sprintf("%s: helmCharts read whole chart directories, which this source cannot list", r.file))
		return
	}
	home = resolve(r.dir, home)
	for _, c := range charts {
		if c.ValuesFile != "" {
			r.load(c.ValuesFile, "helmCharts")
		}
		for _, f := range c.AdditionalValuesFiles {
			r.load(f, "helmCharts")
		}
		chartHome := home // as krusty's absChartHome
		if c.Version != "" && c.Repo != "" {
			chartHome = join(home, c.Name+"-"+c.Version)
		}
		chart := join(chartHome, c.Name)
		r.n.paths = append(r.n.paths, chart)
		r.n.paths = append(r.n.paths, lister.Files(chart)...)
		r.n.listed = true
		if c.Repo != "" && r.b.src.Stat(chart) != Dir {
			r.remote(c.Repo, "helmCharts")
		}
	}
}

func (r refs) remote(ref, field string) {
	r.n.remote = append(r.n.remote, Remote{Ref: ref, Field: field, File: r.file})
}

// load is a file read through the loader (ldr.Load): an http(s) URL is
// fetched, anything else is a path relative to the kustomization.
func (r refs) load(ref, field string) {
	if IsRemoteFile(ref) {
		r.remote(ref, field)
		return
	}
	r.n.paths = append(r.n.paths, resolve(r.dir, ref))
}

// base is a resources or components entry: krusty reads a file, or builds
// a directory (or a git repository) as a kustomization.
func (r refs) base(ref, field string, fileFirst bool) {
	p := resolve(r.dir, ref)
	// The loader looks at the local path before, or after failing, to
	// fetch; it is part of the closure either way.
	r.n.paths = append(r.n.paths, p)
	kind := r.b.src.Stat(p)
	// An entry that exists in the snapshot is local whatever its name
	// looks like (github.com-sa.yaml beside the kustomization): krusty
	// reads a resources file before fetching, and the render serves an
	// existing directory from the snapshot (internal/render's guardFS).
	// An http(s) URL is fetched first, whatever exists.
	local := (kind == Dir || (kind == File && fileFirst)) && !IsRemoteFile(ref)
	if !local && (IsRemote(ref) || (fileFirst && IsRemoteFile(ref))) {
		r.remote(ref, field)
		return
	}
	if kind == Dir {
		r.n.subs = append(r.n.subs, p)
	}
}

// kvSources are the files of a ConfigMap or Secret generator.
func (r refs) kvSources(s types.KvPairSources, field string) {
	for _, p := range s.EnvSources {
		r.load(p, field)
	}
	if s.EnvSource != "" {
		r.load(s.EnvSource, field)
	}
	for _, src := range s.FileSources {
		// As krusty's ParseFileSource: "path" or "key=path".
		switch strings.Count(src, "=") {
		case 0:
			r.load(src, field)
		case 1:
			if _, p, _ := strings.Cut(src, "="); p != "" {
				r.load(p, field)
			}
		}
	}
}

// plugin is a generators/transformers/validators entry: inline YAML
// configs, or a file of configs, or a kustomization directory whose
// output are configs.
func (r refs) plugin(entry, field string) {
	r.configs([]byte(entry), field)
	p := resolve(r.dir, entry)
	r.n.paths = append(r.n.paths, p)
	if IsRemote(entry) || IsRemoteFile(entry) {
		r.remote(entry, field)
		return
	}
	switch r.b.src.Stat(p) {
	case File:
		data, err := r.b.src.ReadFile(p)
		if err != nil {
			r.unbound(fmt.Sprintf("read %s: %v", p, err))
			return
		}
		r.configs(data, field)
	case Dir:
		// The configs come out of a build, where anything may rewrite
		// the paths they name.
		r.unbound(fmt.Sprintf("%s: %s entry %q builds a kustomization into plugin configs", r.file, field, entry))
	}
}

func (r refs) unbound(why string) {
	if r.n.unbounded == "" {
		r.n.unbounded = why
	}
}

// pluginConfig holds the fields of builtin plugin configs that name files.
type pluginConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Path       string `json:"path"`
	Paths      []string
	types.KvPairSources
	Replacements   []types.ReplacementField `json:"replacements"`
	TargetFilePath string                   `json:"targetFilePath"`
}

// configs reads plugin configs; inline text that is not YAML objects is a
// path, which plugin() handles.
func (r refs) configs(data []byte, field string) {
	docs, err := splitDocs(data)
	if err != nil {
		return // not configs: a path (inline), or a file krusty fails on
	}
	for _, doc := range docs {
		var c pluginConfig
		if err := sigsyaml.Unmarshal(doc, &c); err != nil {
			continue // krusty fails to decode it
		}
		if c.APIVersion != konfig.BuiltinPluginApiVersion {
			r.unbound(fmt.Sprintf("%s: %s entry is plugin %s %s, which runs outside krusty's builtins", r.file, field, c.APIVersion, c.Kind))
			continue
		}
		switch c.Kind {
		case "PatchTransformer", "PatchJson6902Transformer":
			if c.Path != "" {
				r.load(c.Path, field)
			}
		case "PatchStrategicMergeTransformer":
			for _, p := range c.Paths {
				r.load(p, field)
			}
		case "ConfigMapGenerator", "SecretGenerator":
			r.kvSources(c.KvPairSources, field)
		case "ReplacementTransformer":
			for _, rep := range c.Replacements {
				if rep.Path != "" {
					r.load(rep.Path, field)
				}
			}
		case "ValueAddTransformer":
			if c.TargetFilePath != "" {
				r.load(c.TargetFilePath, field)
			}
		case "HelmChartInflationGenerator":
			if r.b.opts.EnableHelm {
				r.n.helm = true
				r.unbound(fmt.Sprintf("%s: %s runs helm, which reads charts outside the repository snapshot", r.file, field))
			}
		case "AnnotationsTransformer", "HashTransformer", "IAMPolicyGenerator", "ImageTagTransformer",
			"LabelTransformer", "NamespaceTransformer", "PrefixTransformer", "SuffixTransformer",
			"PrefixSuffixTransformer", "ReplicaCountTransformer", "SortOrderTransformer":
			// No files.
		default:
			r.unbound(fmt.Sprintf("%s: %s entry is builtin %s, which kplan does not know", r.file, field, c.Kind))
		}
	}
}

// splitDocs returns the YAML mapping documents of data; an error when a
// document is not a mapping (a path string, for instance).
func splitDocs(data []byte) ([][]byte, error) {
	nodes, others, err := yamldocs.Split(data)
	if err != nil {
		return nil, err
	}
	if others > 0 {
		return nil, fmt.Errorf("not a mapping")
	}
	docs := make([][]byte, 0, len(nodes))
	for _, n := range nodes {
		out, err := kyaml.Marshal(n.YNode())
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
	}
	return docs, nil
}

// strictJSON decodes as krusty decodes a kustomization converted to
// JSON: with unknown fields rejected.
func strictJSON(j []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// IsRemoteFile reports whether krusty's loader fetches ref over HTTP, as
// its IsRemoteFile does.
func IsRemoteFile(ref string) bool {
	// Only a ref that starts with its scheme can have one: most are
	// paths, and need no parse.
	if len(ref) < 5 || !strings.EqualFold(ref[:4], "http") {
		return false
	}
	u, err := url.Parse(ref)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}

// IsRemote reports whether krusty might take ref for a git repository. It
// errs on the side of remote: a local path it wrongly calls remote only
// makes its overlay render every time.
func IsRemote(ref string) bool {
	l := strings.ToLower(ref)
	if strings.Contains(l, "://") || strings.HasPrefix(l, "git::") || strings.HasPrefix(l, "github.com") ||
		strings.Contains(l, "?ref=") || strings.Contains(l, "?version=") || strings.Contains(l, "_git/") {
		return true
	}
	// SCP-like: user@host:path.
	at, colon, slash := strings.Index(ref, "@"), strings.Index(ref, ":"), strings.Index(ref, "/")
	return at > 0 && colon > at && (slash < 0 || colon < slash)
}

// resolve is the repository-relative path krusty's loader reads for ref in
// the kustomization directory dir. The snapshot's root is "/", so ".."
// cannot climb above the repository.
func resolve(dir, ref string) string {
	if path.IsAbs(ref) {
		return clean(ref)
	}
	return clean(dir + "/" + ref)
}

func join(dir, name string) string { return clean(dir + "/" + name) }

func clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}
