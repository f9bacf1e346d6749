// Package argocd plans what Argo CD syncs from a repository: each Argo CD
// Application (argoproj.io/v1alpha1) with a source in this repository is
// a target, rendered as Argo CD's repo server renders it: a kustomize
// source with the Application's kustomize: settings written into its
// kustomization (as the repo server's `kustomize edit` calls do), a Helm
// chart (of the repository, its dependencies built, or pulled from a Helm
// repository or OCI registry through the render network policy)
// templated in process with the Application's values, or a directory of
// manifests; Applications rendered by others (app-of-apps) and made by
// ApplicationSets' list, git, clusters, matrix and merge generators are
// targets too. What kplan cannot render offline (plugins, jsonnet, other
// repositories, generators reading forges or the cluster) is listed with
// the reason, never guessed.
package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Group is the API group of Argo CD's Applications and ApplicationSets.
const Group = "argoproj.io"

// DefaultNamespace is where Argo CD keeps its Applications when an
// Application's metadata sets none (the install's namespace).
const DefaultNamespace = "argocd"

// ErrParse is the category of an Application or ApplicationSet that
// cannot be read.
var ErrParse = errors.New("invalid Argo CD object")

// Application is one Argo CD Application of the repository.
type Application struct {
	Namespace, Name string
	id              string // ID, once named
	// File declares it in the repository.
	File string
	// Destination is spec.destination, which names the Application's
	// target in a plan.
	Destination Destination
	// spec is the rest of its spec (Spec): decoded from object when
	// first asked for an Application read from the index, whose plan
	// may never need it; set at once for one parsed.
	spec atomic.Pointer[specOf]
	// object is the object as written, in JSON (keys sorted), to tell
	// whether a side changed it: the bytes, not the decoded maps, are
	// kept for the thousands of Applications of a repository (a fifth of
	// a plan's live memory).
	object []byte
	// facts are what the index recorded of it (nil: none): what its
	// spec decides, kept so that a plan of Applications no change reached
	// decodes none of their specs.
	facts *appFacts
	// Inputs are the repository files besides File an ApplicationSet's
	// generators read to make it (git files, .kplan.yaml's clusters).
	Inputs []string
	// Set is the ID of the ApplicationSet that makes it; "" for one
	// declared as an Application.
	Set string
	// setPolicy is that ApplicationSet's applicationsSync policy ("":
	// sync).
	setPolicy string
}

// ID is namespace/name.
func (a *Application) ID() string {
	if a.id != "" {
		return a.id
	}
	return a.Namespace + "/" + a.Name
}

// named sets the ID from the Application's namespace and name, once
// they are what they stay (an ID is asked thousands of times a plan).
func (a *Application) named() *Application {
	a.id = a.Namespace + "/" + a.Name
	return a
}

// specOf is a decoded spec, or why the object did not decode.
type specOf struct {
	spec AppSpec
	err  error
}

// Spec is the Application's spec. One read from the index is decoded
// now, from the object it was read from; one that does not decode (a
// damaged index) has an empty spec, and SpecErr says why.
func (a *Application) Spec() *AppSpec {
	return &a.decoded().spec
}

// SpecErr says why the Application's spec is unknown: its object, read
// from the render cache's index, no longer decodes as the Application
// it was. Nil for every Application kplan parsed itself.
func (a *Application) SpecErr() error { return a.decoded().err }

func (a *Application) decoded() *specOf {
	if s := a.spec.Load(); s != nil {
		return s
	}
	s := &specOf{}
	b, err := parseJSON(a.object, a.File, func() any { return a.Name })
	switch {
	case err != nil:
		s.err = fmt.Errorf("the render cache's index of Argo CD Applications is damaged (plan without the cache): %w", err)
	case b.ID() != a.ID() || b.Destination != a.Destination:
		s.err = fmt.Errorf("the render cache's index of Argo CD Applications is damaged (plan without the cache): %s read as %s", a.ID(), b.ID())
	default:
		s.spec = *b.Spec()
	}
	a.spec.CompareAndSwap(nil, s)
	return a.spec.Load()
}

// Object is the object as written, as JSON decodes it; nil when it has
// none (an Application made in a test).
func (a *Application) Object() map[string]any {
	var m map[string]any
	if json.Unmarshal(a.object, &m) != nil {
		return nil
	}
	return m
}

// SameObject reports whether b is the object a is: one parse, or the same
// JSON. JSON keeps every difference the plan reads (it is what the spec
// is decoded from).
func (a *Application) SameObject(b *Application) bool {
	return a == b || (a.object != nil && bytes.Equal(a.object, b.object))
}

// AppSpec is the part of an Application's spec kplan reads.
type AppSpec struct {
	Source      *Source     `json:"source,omitempty"`
	Sources     []Source    `json:"sources,omitempty"`
	Destination Destination `json:"destination"`
	Project     string      `json:"project,omitempty"`
	SyncPolicy  *SyncPolicy `json:"syncPolicy,omitempty"`
	// IgnoreDifferences are the fields Argo CD's diff leaves out.
	IgnoreDifferences []IgnoreDifference `json:"ignoreDifferences,omitempty"`
}

// SyncPolicy says when Argo CD syncs, and whether a sync prunes.
type SyncPolicy struct {
	Automated   *Automated `json:"automated,omitempty"`
	SyncOptions []string   `json:"syncOptions,omitempty"`
}

// Automated is spec.syncPolicy.automated.
type Automated struct {
	Prune    bool  `json:"prune,omitempty"`
	SelfHeal bool  `json:"selfHeal,omitempty"`
	Enabled  *bool `json:"enabled,omitempty"`
}

// SyncNotes say what of a plan Argo CD does not do on its own at the
// merge: nothing without automated sync; no prune without
// automated.prune (pruning says the plan prunes objects).
func (a *Application) SyncNotes(pruning bool) []string {
	sp := a.Spec().SyncPolicy
	if sp == nil || sp.Automated == nil || (sp.Automated.Enabled != nil && !*sp.Automated.Enabled) {
		return []string{"no automated sync (spec.syncPolicy.automated): Argo CD applies this plan when someone syncs the Application"}
	}
	if pruning && !sp.Automated.Prune {
		return []string{"spec.syncPolicy.automated.prune is off: the objects this plan prunes stay in the cluster, OutOfSync, until a sync with prune"}
	}
	return nil
}

// Destination is where Argo CD syncs the Application.
type Destination struct {
	Server    string `json:"server,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// The cluster Argo CD runs in, which it knows by this name and by this
// server alike (KubernetesInClusterName, KubernetesInternalAPIServerAddr:
// pkg/apis/application/v1alpha1/application_defaults.go:31-34 at argo-cd
// 37ee0097cf).
const (
	InClusterName   = "in-cluster"
	InClusterServer = "https://kubernetes.default.svc"
)

// Cluster names the destination cluster: its name, else its server; the
// in-cluster destination is in-cluster, however it is written.
func (d Destination) Cluster() string {
	if d.Name == InClusterName || (d.Name == "" && d.Server == InClusterServer) {
		return InClusterName
	}
	if d.Name != "" {
		return d.Name
	}
	return d.Server
}

// Source is one source of an Application.
type Source struct {
	RepoURL        string     `json:"repoURL"`
	Path           string     `json:"path,omitempty"`
	TargetRevision string     `json:"targetRevision,omitempty"`
	Chart          string     `json:"chart,omitempty"`
	Ref            string     `json:"ref,omitempty"`
	Kustomize      *Kustomize `json:"kustomize,omitempty"`
	Helm           *Helm      `json:"helm,omitempty"`
	Directory      *Directory `json:"directory,omitempty"`
	Plugin         any        `json:"plugin,omitempty"`
}

// Kustomize are a source's kustomize: settings.
type Kustomize struct {
	NamePrefix             string            `json:"namePrefix,omitempty"`
	NameSuffix             string            `json:"nameSuffix,omitempty"`
	Namespace              string            `json:"namespace,omitempty"`
	Images                 []string          `json:"images,omitempty"`
	CommonLabels           map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations      map[string]string `json:"commonAnnotations,omitempty"`
	ForceCommonLabels      bool              `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations bool              `json:"forceCommonAnnotations,omitempty"`
	LabelWithoutSelector   bool              `json:"labelWithoutSelector,omitempty"`
	LabelIncludeTemplates  bool              `json:"labelIncludeTemplates,omitempty"`
	// Version picks the kustomize binary of argocd-cm's
	// kustomize.version.<v>; kplan builds with its own kustomize.
	Version string `json:"version,omitempty"`
	// CommonAnnotationsEnvsubst expands the build environment's
	// variables in commonAnnotations' values (only then).
	CommonAnnotationsEnvsubst bool             `json:"commonAnnotationsEnvsubst,omitempty"`
	Replicas                  []Replica        `json:"replicas,omitempty"`
	Patches                   []map[string]any `json:"patches,omitempty"`
	Components                []string         `json:"components,omitempty"`
	IgnoreMissingComponents   bool             `json:"ignoreMissingComponents,omitempty"`
	// KubeVersion and APIVersions are what the source's helmCharts see
	// (with argocd-cm's --enable-helm), over the destination cluster's.
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// Replica is a kustomize replicas override; Count is an integer or a
// string of one, as Argo CD accepts both.
type Replica struct {
	Name  string          `json:"name"`
	Count json.RawMessage `json:"count"`
}

// Helm are a source's helm: settings.
type Helm struct {
	ValueFiles              []string        `json:"valueFiles,omitempty"`
	Values                  string          `json:"values,omitempty"`
	ValuesObject            map[string]any  `json:"valuesObject,omitempty"`
	Parameters              []HelmParameter `json:"parameters,omitempty"`
	FileParameters          []FileParameter `json:"fileParameters,omitempty"`
	ReleaseName             string          `json:"releaseName,omitempty"`
	SkipCrds                bool            `json:"skipCrds,omitempty"`
	SkipTests               bool            `json:"skipTests,omitempty"`
	IgnoreMissingValueFiles bool            `json:"ignoreMissingValueFiles,omitempty"`
	SkipSchemaValidation    bool            `json:"skipSchemaValidation,omitempty"`
	Namespace               string          `json:"namespace,omitempty"`
	// KubeVersion and APIVersions are the Capabilities the chart sees
	// (--kube-version, --api-versions); Argo CD and kplan take the
	// destination cluster's when they are not set (Options.Kubernetes).
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// PassCredentials sends a Helm repository's credentials to the
	// hosts its charts are on; kplan fetches anonymously, so it changes
	// nothing. Version (v2, v3) is a choice Argo CD no longer makes.
	PassCredentials bool   `json:"passCredentials,omitempty"`
	Version         string `json:"version,omitempty"`
}

// FileParameter is a --set-file parameter: the value is the content of
// the file at Path.
type FileParameter struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// HelmParameter is one --set (or --set-string) parameter.
type HelmParameter struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	ForceString bool   `json:"forceString,omitempty"`
}

// Directory are a directory source's settings.
type Directory struct {
	Recurse bool   `json:"recurse,omitempty"`
	Include string `json:"include,omitempty"`
	Exclude string `json:"exclude,omitempty"`
	Jsonnet any    `json:"jsonnet,omitempty"`
	// DisableExtensionFilter reads every file, not only .yaml, .yml,
	// .json and .jsonnet ones: include and exclude alone choose.
	DisableExtensionFilter bool `json:"disableExtensionFilter,omitempty"`
}

// normalize is the application controller's NormalizeApplicationSpec
// (util/argo/argo.go:1027-1065 at 37ee0097cf, run on every Application
// it reconciles, controller/appcontroller.go:2246): the project defaults
// to "default", and a source's kustomize, helm or directory settings
// that set nothing are dropped, so they do not force the source's type
// (a directory's include and exclude stay, and keep it a directory).
func (s *AppSpec) normalize() {
	if s.Project == "" {
		s.Project = "default"
	}
	if s.Source != nil {
		s.Source.normalize()
	}
	for i := range s.Sources {
		s.Sources[i].normalize()
	}
}

func (src *Source) normalize() {
	if k := src.Kustomize; k != nil && k.isZero() {
		src.Kustomize = nil
	}
	if h := src.Helm; h != nil && h.isZero() {
		src.Helm = nil
	}
	if d := src.Directory; d != nil && d.isZero() {
		if d.Include == "" && d.Exclude == "" {
			src.Directory = nil
		} else {
			src.Directory = &Directory{Include: d.Include, Exclude: d.Exclude}
		}
	}
}

// isZero is ApplicationSourceKustomize.IsZero (pkg/apis/application/
// v1alpha1/types.go:852-867 at 37ee0097cf): the force and label options
// alone count as nothing set.
func (k *Kustomize) isZero() bool {
	return k.NamePrefix == "" && k.NameSuffix == "" && k.Version == "" && k.Namespace == "" &&
		len(k.Images) == 0 && len(k.Replicas) == 0 && len(k.CommonLabels) == 0 && len(k.CommonAnnotations) == 0 &&
		len(k.Patches) == 0 && len(k.Components) == 0 && k.KubeVersion == "" && len(k.APIVersions) == 0 && !k.IgnoreMissingComponents
}

// isZero is ApplicationSourceHelm.IsZero (types.go:682-684).
func (h *Helm) isZero() bool {
	return h.Version == "" && h.ReleaseName == "" && len(h.ValueFiles) == 0 && len(h.Parameters) == 0 && len(h.FileParameters) == 0 &&
		h.Values == "" && len(h.ValuesObject) == 0 && !h.PassCredentials && !h.IgnoreMissingValueFiles && !h.SkipCrds && !h.SkipTests &&
		!h.SkipSchemaValidation && h.KubeVersion == "" && len(h.APIVersions) == 0 && h.Namespace == ""
}

// isZero is ApplicationSourceDirectory.IsZero (types.go:949-951), with
// ApplicationSourceJsonnet.IsZero (types.go:926-928) for its jsonnet.
func (d *Directory) isZero() bool {
	if d.Recurse || d.DisableExtensionFilter {
		return false
	}
	j, _ := d.Jsonnet.(map[string]any)
	for _, f := range []string{"extVars", "tlas", "libs"} {
		if l, _ := j[f].([]any); len(l) > 0 {
			return false
		}
	}
	return true
}

// AllSources are spec.sources, or spec.source when sources is empty (as
// Argo CD reads them).
func (s *AppSpec) AllSources() []Source {
	if len(s.Sources) > 0 {
		return s.Sources
	}
	if s.Source != nil {
		return []Source{*s.Source}
	}
	return nil
}

// IsApplication reports whether apiVersion and kind are an Argo CD
// Application.
func IsApplication(apiVersion, kind string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return g == Group && kind == "Application"
}

// IsApplicationSet reports whether apiVersion and kind are an Argo CD
// ApplicationSet.
func IsApplicationSet(apiVersion, kind string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return g == Group && kind == "ApplicationSet"
}

// Parse reads an Application from its object (as JSON decodes it);
// file names it in errors.
func Parse(obj map[string]any, file string) (*Application, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", file, ErrParse, err)
	}
	return parseJSON(data, file, func() any { return nameOf(obj) })
}

// parseJSON is Parse of the object's JSON (keys sorted, as Parse writes
// it); name names the object in errors.
func parseJSON(data []byte, file string, name func() any) (*Application, error) {
	var o struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec AppSpec `json:"spec"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("%s: %w: Application %v: %w", file, ErrParse, name(), err)
	}
	o.Spec.normalize()
	if o.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: %w: an Application without metadata.name", file, ErrParse)
	}
	a := &Application{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, File: file, Destination: o.Spec.Destination, object: data}
	a.spec.Store(&specOf{spec: o.Spec})
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	a.named()
	if len(o.Spec.AllSources()) == 0 {
		return nil, fmt.Errorf("%s: %w: Application %s has no spec.source or spec.sources", file, ErrParse, a.ID())
	}
	for i, s := range o.Spec.AllSources() {
		n := 0
		for _, set := range []bool{s.Kustomize != nil, s.Helm != nil, s.Directory != nil, s.Plugin != nil} {
			if set {
				n++
			}
		}
		if n > 1 {
			// Argo CD refuses it too ("multiple application sources defined").
			return nil, fmt.Errorf("%s: %w: Application %s source %d sets more than one of kustomize, helm, directory and plugin", file, ErrParse, a.ID(), i)
		}
	}
	return a, nil
}

func nameOf(obj map[string]any) any {
	if m, ok := obj["metadata"].(map[string]any); ok {
		return m["name"]
	}
	return nil
}

// Declared is what one repository file declares.
type Declared struct {
	Applications []*Application
	// Sets are the ApplicationSets.
	Sets []*AppSet
	// Invalid are the Argo CD objects that do not parse, each with why.
	Invalid []Named
}

// Named is an object of a file, with why it is not planned.
type Named struct {
	ID, File, Reason string
	// Paths are the directories of this repository an Application not
	// planned syncs from (at another revision): no loose overlay of the
	// plan, as Argo CD syncs them, not the merge.
	Paths []string
}

// ParseFile reads the Applications and ApplicationSets one YAML file
// holds. Documents that are not Argo CD objects, or not mappings, are
// skipped: the file is someone else's.
func ParseFile(data []byte, file string) Declared {
	var out Declared
	if !bytes.Contains(data, []byte(Group)) {
		return out
	}
	nodes, err := yamldocs.Objects(data)
	if err != nil {
		return out
	}
	for _, n := range nodes {
		m, err := objectOf(n)
		if err != nil {
			continue
		}
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		switch {
		case IsApplication(apiVersion, kind):
			a, err := Parse(m, file)
			if err != nil {
				out.Invalid = append(out.Invalid, Named{ID: fmt.Sprint(nameOf(m)), File: file, Reason: err.Error()})
				continue
			}
			out.Applications = append(out.Applications, a)
		case IsApplicationSet(apiVersion, kind):
			out.Sets = append(out.Sets, appSetOf(m, file))
		}
	}
	return out
}

// Discover reads the Applications and ApplicationSets in the YAML files
// of s, sorted by file then name. A file alike in snapshots sharing
// blobs (the sides of a plan) is parsed once: its Applications and
// ApplicationSets are shared, and must not be changed.
func Discover(ctx context.Context, s *snapshot.Snapshot) (Declared, error) {
	return DiscoverIn(ctx, s, s.Index.Paths())
}

// DiscoverIn is Discover over some paths of s.
func DiscoverIn(ctx context.Context, s *snapshot.Snapshot, paths []string) (Declared, error) {
	return discoverIn(ctx, s, paths, nil)
}

// parses are the parses a discovery takes instead of parsing: an
// engine's (Engine.parsed), kept between plans in its index.
type parses interface {
	// parsed is the parse of the file p of s, if known.
	parsed(s *snapshot.Snapshot, p string) (*fileRec, bool)
	// keep keeps the parse d of the file p of s.
	keep(s *snapshot.Snapshot, p string, d Declared) *fileRec
}

// discoverIn is DiscoverIn taking the parses known (known nil: none).
func discoverIn(ctx context.Context, s *snapshot.Snapshot, paths []string, known parses) (Declared, error) {
	files, err := discoverFiles(ctx, s, paths, known)
	if err != nil {
		return Declared{}, err
	}
	return merged(files), nil
}

// fileRec is one repository file holding Argo CD objects, and what it
// declares.
type fileRec struct {
	path, id string // its path and content (git blob id)
	decl     Declared
}

// discoverFiles reads the files among paths (sorted) that declare Argo
// CD objects, in their order.
func discoverFiles(ctx context.Context, s *snapshot.Snapshot, paths []string, known parses) ([]*fileRec, error) {
	var yamls []string
	for _, p := range paths {
		if snapshot.IsYAML(p) {
			yamls = append(yamls, p)
		}
	}
	has, err := s.Containing(ctx, yamls, Group)
	if err != nil {
		return nil, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	// A chart's templates are not Applications: what the chart renders
	// are.
	has = slices.DeleteFunc(has, func(p string) bool { return chartTemplate(s, p) })
	// The parses known (of files that passed the filter below before)
	// are taken as they are; the others are filtered, then parsed.
	parsed := map[string]*fileRec{}
	var unknown []string
	for _, p := range has {
		var f *fileRec
		ok := false
		if known != nil {
			f, ok = known.parsed(s, p)
		}
		if ok {
			parsed[p] = f
		} else {
			unknown = append(unknown, p)
		}
	}
	// Files of other kinds of the group (Argo Workflows', Rollouts') are
	// not parsed: an Application's or ApplicationSet's kind names itself,
	// unless a YAML escape ("Appl\x69cation") or tag (!!binary) spells it.
	read, err := prefilter(ctx, s, unknown, "Application", `\`, "!!")
	if err != nil {
		return nil, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	if err := s.Load(ctx, read); err != nil {
		return nil, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	fresh := make(map[string]bool, len(read))
	for _, p := range read {
		fresh[p] = true
	}
	var out []*fileRec
	for _, p := range has {
		f := parsed[p]
		if fresh[p] {
			// Parsed once per content and path for both sides of a plan
			// (most files are alike on both): parsing is most of a
			// one-Application plan's work on a repository of many
			// Applications.
			v, err := s.Derived(ctx, p, "argocd.ParseFile\x00"+p, func(data []byte) any { return ParseFile(data, p) })
			if err != nil {
				continue
			}
			d := v.(Declared)
			if known != nil {
				f = known.keep(s, p, d)
			} else {
				id, _ := s.Index.ID(p)
				f = &fileRec{path: p, id: id, decl: d}
			}
		}
		if f != nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// merged is what files declare, sorted by file then name (their
// Applications), as discovery gives it.
func merged(files []*fileRec) Declared {
	var out Declared
	for _, f := range files {
		d := f.decl
		out.Applications = append(out.Applications, d.Applications...)
		out.Sets = append(out.Sets, d.Sets...)
		out.Invalid = append(out.Invalid, d.Invalid...)
	}
	slices.SortStableFunc(out.Applications, func(a, b *Application) int {
		// By file, then ID: their IDs are made only within a file.
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return strings.Compare(a.ID(), b.ID())
	})
	return out
}

// prefilter keeps the paths holding any of needles, in order.
func prefilter(ctx context.Context, s *snapshot.Snapshot, paths []string, needles ...string) ([]string, error) {
	each, err := s.ContainingEach(ctx, paths, needles...)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, ps := range each {
		for _, p := range ps {
			keep[p] = true
		}
	}
	return slices.DeleteFunc(paths, func(p string) bool { return !keep[p] }), nil
}

// appSetOf is the ApplicationSet m declared in file.
func appSetOf(m map[string]any, file string) *AppSet {
	ns := DefaultNamespace
	if md, ok := m["metadata"].(map[string]any); ok {
		if s, ok := md["namespace"].(string); ok && s != "" {
			ns = s
		}
	}
	return &AppSet{Namespace: ns, Name: fmt.Sprint(nameOf(m)), File: file, Object: m}
}

// chartTemplate reports whether p is under a Helm chart's templates/.
func chartTemplate(s *snapshot.Snapshot, p string) bool {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if path.Base(d) == "templates" {
			if _, ok := s.Index.ID(path.Join(path.Dir(d), "Chart.yaml")); ok {
				return true
			}
		}
	}
	return false
}

// ResourcesFinalizer makes Argo CD delete an Application's objects when
// the Application is deleted; without it they stay.
const ResourcesFinalizer = "resources-finalizer.argocd.argoproj.io"

// DeleteNotes say what Argo CD does with an Application's objects when
// the merge deletes the Application: without its resources finalizer,
// nothing.
func (a *Application) DeleteNotes() []string {
	if why := a.keptBySet(); why != "" {
		return []string{why}
	}
	if a.Cascades() {
		return nil
	}
	return []string{"the Application is deleted without the " + ResourcesFinalizer + " finalizer: Argo CD leaves the objects it synced in the cluster"}
}

// keptBySet says why the ApplicationSet that made a keeps it when it no
// longer makes it, or "": ApplicationsSyncPolicy.AllowDelete is sync and
// create-delete only (pkg/apis/application/v1alpha1/
// applicationset_types.go:132-134 at 37ee0097cf), and the controller
// deletes nothing otherwise (applicationset_controller.go:376).
func (a *Application) keptBySet() string {
	switch a.setPolicy {
	case "create-only", "create-update":
		return "its ApplicationSet " + a.Set + " (syncPolicy.applicationsSync: " + a.setPolicy + ") no longer makes it, and does not delete it: the Application and its objects stay, as they are (deleting the ApplicationSet itself deletes it)"
	}
	return ""
}

// UpdateNote says, for an Application an ApplicationSet makes whose
// policy does not update existing Applications (create-only,
// create-delete: AllowUpdate, applicationset_types.go:128-130), that a
// change of its spec reaches only an Application created anew; "" for
// others.
func (a *Application) UpdateNote() string {
	switch a.setPolicy {
	case "create-only", "create-delete":
		return "its ApplicationSet " + a.Set + " (syncPolicy.applicationsSync: " + a.setPolicy + ") does not update an Application that exists: the plan shows the spec it makes now, which Argo CD uses only if it creates the Application"
	}
	return ""
}

// Cascades says whether deleting the Application deletes the objects it
// synced: it carries the resources finalizer (either propagation).
func (a *Application) Cascades() bool {
	if a.keptBySet() != "" {
		return false // not deleted at all
	}
	md, _ := a.Object()["metadata"].(map[string]any)
	fs, _ := md["finalizers"].([]any)
	for _, f := range fs {
		if s, ok := f.(string); ok && (s == ResourcesFinalizer || strings.HasPrefix(s, ResourcesFinalizer+"/")) {
			return true
		}
	}
	return false
}

// appFacts are what an Application's spec decides under the engine's
// settings, as the index recorded them.
type appFacts struct {
	skip    string // why it is no target, "" when it is
	renders bool   // a source kplan renders (Found)
}
