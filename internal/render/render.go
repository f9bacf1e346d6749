package render

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"runtime"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Options control how overlays render.
//
// A field tagged `target:"name"` is also a render option of a deploy
// target: the webhook's configuration reads it under that name
// (internal/config, for bool, string, int and duration fields) and
// every render of the target (deploy.Prepare) gets it, so a new one is
// this field plus its line in internal/config/example.yaml.
type Options struct {
	// LoadRestrictorNone lets kustomizations read files outside their own
	// directory (kustomize's --load-restrictor LoadRestrictionsNone).
	LoadRestrictorNone bool
	// EnableHelm allows helmCharts inflation with HelmCommand (default "helm").
	EnableHelm  bool `target:"enableHelm"`
	HelmCommand string
	// KubeVersion and APIVersions are what the cluster runs, as the
	// charts helm inflates see it (kubeversion.Capabilities: "" is
	// kubeversion.Default; the built-in API versions that version serves
	// are added): every chart gets them, over its own kubeVersion and
	// apiVersions, as `kustomize build --helm-kube-version
	// --helm-api-versions` passes them (Argo CD's repo server passes its
	// cluster's). A webhook target reads them as kubeVersion and
	// apiVersions (internal/config checks them).
	KubeVersion string
	APIVersions []string
	// Parallelism bounds concurrent renders; 0 means one per CPU.
	Parallelism int
	// Timeout bounds each overlay's render: 0 is DefaultTimeout, < 0 no
	// limit. A render past it fails its overlay and is abandoned.
	Timeout time.Duration
	// MaxAliasNodes bounds the YAML nodes aliases may add to one overlay's
	// render beyond doubling the files that hold them: 0 is
	// DefaultMaxAliasNodes, < 0 no limit. A file past it fails its overlay.
	MaxAliasNodes int
	// MaxReadBytes bounds the bytes one overlay's render reads (files,
	// each time read, and fetched URLs): 0 is DefaultMaxReadBytes, < 0
	// no limit. A read past it fails its overlay.
	MaxReadBytes int64
	// MaxPathDepth bounds how many directories deep a path one render
	// touches may be: 0 is DefaultMaxPathDepth, < 0 no limit.
	MaxPathDepth int
	// Remote fetches the http(s) URLs kustomizations name, as the
	// network policy it holds allows; nil fetches nothing.
	Remote Fetcher
	// Git fetches the git repositories kustomizations name as remote
	// bases (gitbase.Cache); nil refuses them.
	Git GitFetcher
	// ChartAuth is where chart fetches find credentials (charts.Standard:
	// Docker's and Helm's configuration); nil fetches charts anonymously.
	ChartAuth *charts.Auth
	// Charts fetches and keeps the charts that helmCharts, HelmReleases
	// and Argo CD Applications pull, one for a whole plan (its cache
	// shared); nil: each user makes its own through Remote (NewCharts).
	Charts *charts.Fetcher `fingerprint:"-"`
}

// NewCharts is a chart fetcher for o: through o.Remote when that is
// kplan's network policy (nothing is fetched otherwise), with
// o.ChartAuth's credentials, bodies bounded by o.MaxReadBytes (64 MiB
// when it sets none), archives kept under dir's charts/ ("" in memory
// only).
func (o Options) NewCharts(dir string) *charts.Fetcher {
	p, _ := o.Remote.(*netpolicy.Policy)
	return charts.New(charts.Options{Policy: p, Dir: dir, Max: o.MaxReadBytes, Auth: o.ChartAuth})
}

// ChartFetcher is o.Charts, else a fetcher of its own (NewCharts) that
// keeps nothing on disk.
func (o Options) ChartFetcher() *charts.Fetcher {
	if o.Charts != nil {
		return o.Charts
	}
	return o.NewCharts("")
}

// Kubernetes are the capabilities KubeVersion and APIVersions declare.
func (o Options) Kubernetes() kubeversion.Capabilities {
	return kubeversion.Capabilities{Version: o.KubeVersion, APIVersions: o.APIVersions}
}

// WithKubernetes are o for a cluster that runs c.
func (o Options) WithKubernetes(c kubeversion.Capabilities) Options {
	o.KubeVersion, o.APIVersions = c.Version, c.APIVersions
	return o
}

// Load restrictors, spelled as kustomize's --load-restrictor flag.
const (
	LoadRestrictionsRootOnly = "LoadRestrictionsRootOnly" // the default
	LoadRestrictionsNone     = "LoadRestrictionsNone"
)

// ParseLoadRestrictor reads a load restrictor as the front ends take it
// (a flag, an Action input): kustomize's spelling, "" for the default.
// It says whether it is LoadRestrictionsNone (Options.LoadRestrictorNone).
func ParseLoadRestrictor(s string) (none bool, err error) {
	switch s {
	case "", LoadRestrictionsRootOnly:
		return false, nil
	case LoadRestrictionsNone:
		return true, nil
	}
	return false, fmt.Errorf("%q: want %s or %s", s, LoadRestrictionsRootOnly, LoadRestrictionsNone)
}

// Result is one overlay's render.
type Result struct {
	Path      string // repository-relative overlay directory
	Objects   []*yaml.RNode
	Inventory *InventoryDirective // the overlay's own inventory directive
	Err       error
}

// Render renders the given overlays of tree concurrently. One overlay's
// failure is reported in its Result and does not stop the others.
func Render(ctx context.Context, fSys filesys.FileSystem, tree *Tree, dirs []string, opts Options) ([]Result, error) {
	if err := Prepare(fSys, tree); err != nil {
		return nil, err
	}
	k := NewKustomizer(opts)
	n := opts.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	// Whether a build sets a custom schema depends on its bases and
	// components too; without closures at hand, any in the tree makes
	// every build here run alone (kplan render and the webhook render a
	// few overlays; the planner decides per build from its closure).
	exclusive := false
	for _, kust := range tree.Kustomizations {
		exclusive = exclusive || kust.HasOpenAPI
	}
	results := make([]Result, len(dirs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, dir := range dirs {
		results[i].Path = dir
		kust := tree.Kustomizations[dir]
		if kust != nil {
			results[i].Inventory = kust.Inventory
		}
		if err := ctx.Err(); err != nil {
			results[i].Err = err
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(r *Result) {
			defer func() { <-sem; wg.Done() }()
			defer crash.Recover(&r.Err) // a bug fails this overlay alone
			r.Objects, r.Err = k.RenderContext(ctx, fSys, r.Path, exclusive)
		}(&results[i])
	}
	wg.Wait()
	return results, nil
}

// schemaMu guards krusty's OpenAPI schema, which kyaml keeps in package
// variables: a build that sets a custom schema runs alone, process-wide,
// and resets it afterwards; other builds share the default.
var (
	schemaMu    sync.RWMutex
	schemaReady bool // guarded by schemaMu: kyaml's default schema is parsed
)

// Kustomizer runs krusty with one set of options; it is safe for
// concurrent use.
type Kustomizer struct {
	kopts         *krusty.Options
	timeout       time.Duration // <= 0: none
	maxAliasNodes int           // < 0: none
	remote        Fetcher
	git           GitFetcher
	charts        *charts.Fetcher
	maxRead       int64 // < 0: none
	maxDepth      int   // < 0: none
}

// NewKustomizer returns a Kustomizer for opts.
func NewKustomizer(opts Options) *Kustomizer {
	kopts := krusty.MakeDefaultOptions()
	// Sort as `kustomize build` does by default (the legacy order) unless
	// the kustomization sets sortOptions.
	kopts.Reorder = krusty.ReorderOptionUnspecified
	if opts.LoadRestrictorNone {
		kopts.LoadRestrictions = types.LoadRestrictionsNone
	}
	if opts.EnableHelm {
		kopts.PluginConfig.HelmConfig.Enabled = true
		kopts.PluginConfig.HelmConfig.Command = opts.HelmCommand
		if kopts.PluginConfig.HelmConfig.Command == "" {
			kopts.PluginConfig.HelmConfig.Command = "helm"
		}
		caps := opts.Kubernetes()
		kopts.PluginConfig.HelmConfig.KubeVersion = cmp.Or(caps.Version, kubeversion.Default)
		kopts.PluginConfig.HelmConfig.ApiVersions = caps.APIVersionSet()
	}
	k := &Kustomizer{kopts: kopts, timeout: opts.Timeout, maxAliasNodes: opts.MaxAliasNodes, remote: opts.Remote, git: opts.Git,
		maxRead: opts.MaxReadBytes, maxDepth: opts.MaxPathDepth}
	if opts.EnableHelm {
		k.charts = opts.ChartFetcher()
	}
	if k.maxRead == 0 {
		k.maxRead = DefaultMaxReadBytes
	}
	if k.maxDepth == 0 {
		k.maxDepth = DefaultMaxPathDepth
	}
	if k.timeout == 0 {
		k.timeout = DefaultTimeout
	}
	if k.maxAliasNodes == 0 {
		k.maxAliasNodes = DefaultMaxAliasNodes
	}
	return k
}

// Warm parses krusty's builtin OpenAPI schema, which every build needs and
// the first one would otherwise parse while the others wait. Calling it
// while a plan reads its commits takes that time off the critical path,
// once the plan knows it builds something: nothing else needs it.
func (k *Kustomizer) Warm() {
	lockSchema(false)()
}

// Render builds the overlay in dir (repository-relative) from fSys, which
// Prepare must have seen, within the Kustomizer's time and alias bounds.
// exclusive says that the build sets a custom OpenAPI schema, in any of
// its kustomizations.
func (k *Kustomizer) Render(fSys filesys.FileSystem, dir string, exclusive bool) ([]*yaml.RNode, error) {
	return k.RenderContext(context.Background(), fSys, dir, exclusive)
}

// RenderContext is Render that also stops when ctx is done.
//
// krusty takes no context, so a build cannot be interrupted: past the
// deadline (or ctx's end) RenderContext returns a *TimeoutError (or
// ctx's error) at once and abandons the build, which goes on in its
// goroutine until its next file access fails or it finishes, and its
// result is dropped. Until then it keeps one core busy, holds the memory
// it built, and holds the schema lock (an exclusive build delays the
// builds after it). The time budget starts once the lock is held, so
// waiting for another build does not count.
func (k *Kustomizer) RenderContext(ctx context.Context, fSys filesys.FileSystem, dir string, exclusive bool) ([]*yaml.RNode, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	unlock := lockSchema(exclusive)
	errBudget := &TimeoutError{Dir: dir, Timeout: k.timeout}
	if k.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, k.timeout, errBudget)
		defer cancel()
	}
	guard := newGuardFS(ctx, fSys, k)
	var (
		view    filesys.FileSystem = guard
		root                       = snapshot.Abs(dir)
		helm    *helmFS
		cleanup = func() {}
	)
	if k.kopts.PluginConfig.HelmConfig.Enabled {
		var err error
		if helm, root, cleanup, err = newHelmFS(guard, dir); err != nil {
			unlock()
			return nil, err
		}
		view = helm
	}
	type built struct {
		objs []*yaml.RNode
		err  error
	}
	done := make(chan built, 1) // buffered: an abandoned build never blocks
	go func() {
		defer unlock()
		var b built
		b.err = crash.Catch(func() (err error) {
			b.objs, err = renderAt(view, dir, root, k.kopts)
			if helm != nil {
				err = helm.scrub(err)
			}
			return err
		})
		if crash.As(b.err) != nil {
			b.objs, b.err = nil, fmt.Errorf("render %s: %w", dir, b.err)
		}
		// Once the build is over (an abandoned one goes on), and before
		// its result is handed over: a process that exits as soon as it
		// has it (kplan render) would leave helm's directory behind.
		cleanup()
		done <- b
	}()
	var b built
	select {
	case b = <-done:
	case <-ctx.Done():
		select {
		case b = <-done: // finished just in time
		default:
			if context.Cause(ctx) == error(errBudget) {
				return nil, errBudget
			}
			return nil, fmt.Errorf("render %s: %w", dir, ctx.Err())
		}
	}
	// A refused file fails the overlay with its own reason, whatever
	// krusty made of the read error (it may try the path as something
	// else and fail differently, or not at all).
	if err := guard.refusal(); err != nil {
		return nil, guard.secrets.scrubErr(fmt.Errorf("render %s: %w", dir, err))
	}
	return b.objs, guard.secrets.scrubErr(b.err)
}

// lockSchema takes krusty's schema lock and returns its release. A
// shared build starts only once the default schema is parsed: kyaml
// parses it lazily under its own lock, but reads the parsed tables (as
// IsNamespaceScoped does) without it, so the first builds to run
// together, or the first after an exclusive build's reset, raced
// (TestSharedBuildsAfterAResetDoNotRace).
func lockSchema(exclusive bool) func() {
	if exclusive {
		schemaMu.Lock()
		return func() { openapi.ResetOpenAPI(); schemaReady = false; schemaMu.Unlock() }
	}
	for {
		schemaMu.RLock()
		if schemaReady {
			return schemaMu.RUnlock
		}
		schemaMu.RUnlock()
		schemaMu.Lock()
		if !schemaReady {
			openapi.Schema()
			schemaReady = true
		}
		schemaMu.Unlock()
	}
}

// SchemaParsed says whether kyaml's default OpenAPI schema is parsed in
// this process (a fifth of a small plan's CPU): a plan parses it only
// once a build runs, which its tests check.
func SchemaParsed() bool {
	schemaMu.RLock()
	defer schemaMu.RUnlock()
	return schemaReady
}

// readSchema takes krusty's schema lock as a shared build does, without
// parsing the schema first: for reads that do not need it parsed.
func readSchema() func() {
	schemaMu.RLock()
	return schemaMu.RUnlock
}

// Exclusive runs fn alone among builds, for code that runs krusty, or
// resets kyaml's schema, outside a Kustomizer (Flux's own build, which a
// test compares with: it resets the schema as it ends).
func Exclusive(fn func() error) error {
	defer lockSchema(true)()
	return fn()
}

// renderOne builds dir with kopts and no bounds, under the schema lock
// builds share (a test compares a bounded render with it).
func renderOne(fSys filesys.FileSystem, dir string, kopts *krusty.Options) ([]*yaml.RNode, error) {
	defer lockSchema(false)()
	return renderAt(fSys, dir, snapshot.Abs(dir), kopts)
}

// renderAt builds dir (repository-relative) from root, its absolute path
// in fSys.
func renderAt(fSys filesys.FileSystem, dir, root string, kopts *krusty.Options) (objs []*yaml.RNode, err error) {
	// krusty is a deep library; a panic on odd input must fail this overlay,
	// not the whole plan.
	defer func() {
		if p := recover(); p != nil {
			objs, err = nil, fmt.Errorf("render %s: kustomize panicked: %v", dir, p)
		}
	}()
	m, err := krusty.MakeKustomizer(kopts).Run(fSys, root)
	if err != nil {
		return nil, fmt.Errorf("render %s: %s", dir, err.Error())
	}
	objs = m.ToRNodeSlice()
	for _, o := range objs {
		if err := duplicateKeys(o); err != nil {
			return nil, fmt.Errorf("render %s: %s %s: %w", dir, o.GetKind(), o.GetName(), err)
		}
	}
	return objs, nil
}

// duplicateKeys fails an object in which a mapping repeats a key. krusty
// builds such an object, but `kustomize build` fails writing it out, with
// the YAML decoder's message that this returns.
func duplicateKeys(o *yaml.RNode) error {
	if !hasDuplicateKey(o.YNode()) {
		return nil // the common case, without decoding the object
	}
	var m map[string]any
	if err := o.YNode().Decode(&m); err != nil {
		return err
	}
	return nil
}

func hasDuplicateKey(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.MappingNode && len(n.Content) > 32 {
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode {
				if seen[k.Value] {
					return true
				}
				seen[k.Value] = true
			}
		}
	} else if n.Kind == yaml.MappingNode {
		// Most mappings are small: comparing pairs beats a map.
		for i := 0; i < len(n.Content); i += 2 {
			for j := i + 2; j < len(n.Content); j += 2 {
				if n.Content[i].Kind == yaml.ScalarNode && n.Content[j].Kind == yaml.ScalarNode && n.Content[i].Value == n.Content[j].Value {
					return true
				}
			}
		}
	}
	for _, c := range n.Content {
		if hasDuplicateKey(c) {
			return true
		}
	}
	return false
}

// overrider is a read-only FS that lets kplan's own rewrites sit above
// the files it serves (snapshot.FS).
type overrider interface {
	Override(path string, data []byte) error
}

// Prepare readies fSys for krusty: it removes the seed's inventory field
// from every kustomization that has one, since krusty rejects the field.
// The rewritten file overrides the original in fSys, which must allow it;
// the tree's index keeps what was committed. It runs once per tree,
// before any render.
func Prepare(fSys filesys.FileSystem, tree *Tree) error {
	if tree.stripped {
		return nil
	}
	tree.stripped = true
	over, ok := fSys.(overrider)
	for _, k := range tree.Kustomizations {
		if k.Inventory == nil {
			continue
		}
		p := path.Join(snapshot.Root, k.File)
		data, err := fSys.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", k.File, err)
		}
		node, err := yamldocs.One(data)
		if err != nil {
			return fmt.Errorf("parse %s: %w", k.File, err)
		}
		if _, err := node.Pipe(yaml.Clear("inventory")); err != nil {
			return fmt.Errorf("remove inventory field from %s: %w", k.File, err)
		}
		out, err := node.String()
		if err != nil {
			return fmt.Errorf("write %s: %w", k.File, err)
		}
		if !ok {
			return fmt.Errorf("remove inventory field from %s: the file system cannot hold kplan's rewrite (%T)", k.File, fSys)
		}
		if err := over.Override(p, []byte(out)); err != nil {
			return fmt.Errorf("remove inventory field from %s: %w", k.File, err)
		}
	}
	return nil
}

// YAML prints objects as `kustomize build` does: documents separated by
// "---", fields in sorted order.
func YAML(objs []*yaml.RNode) ([]byte, error) {
	var out []byte
	for i, o := range objs {
		m, err := o.Map()
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		doc, err := sigsyaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, doc...)
	}
	return out, nil
}
