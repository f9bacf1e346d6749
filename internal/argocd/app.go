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

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
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
	// File declares it in the repository.
	File string
	Spec AppSpec
	// object is the object as written, in JSON (keys sorted), to tell
	// whether a side changed it: the bytes, not the decoded maps, are
	// kept for the thousands of Applications of a repository (a fifth of
	// a plan's live memory).
	object []byte
	// Inputs are the repository files besides File an ApplicationSet's
	// generators read to make it (git files, .kplan.yaml's clusters).
	Inputs []string
	// Set is the ID of the ApplicationSet that makes it; "" for one
	// declared as an Application.
	Set string
}

// ID is namespace/name.
func (a *Application) ID() string { return a.Namespace + "/" + a.Name }

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
	sp := a.Spec.SyncPolicy
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

// Cluster names the destination cluster: its name, else its server.
func (d Destination) Cluster() string {
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
	NamePrefix              string            `json:"namePrefix,omitempty"`
	NameSuffix              string            `json:"nameSuffix,omitempty"`
	Namespace               string            `json:"namespace,omitempty"`
	Images                  []string          `json:"images,omitempty"`
	CommonLabels            map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations       map[string]string `json:"commonAnnotations,omitempty"`
	ForceCommonLabels       bool              `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations  bool              `json:"forceCommonAnnotations,omitempty"`
	LabelWithoutSelector    bool              `json:"labelWithoutSelector,omitempty"`
	Replicas                []Replica         `json:"replicas,omitempty"`
	Patches                 []map[string]any  `json:"patches,omitempty"`
	Components              []string          `json:"components,omitempty"`
	IgnoreMissingComponents bool              `json:"ignoreMissingComponents,omitempty"`
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
	if o.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: %w: an Application without metadata.name", file, ErrParse)
	}
	a := &Application{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, File: file, Spec: o.Spec, object: data}
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	if len(a.Spec.AllSources()) == 0 {
		return nil, fmt.Errorf("%s: %w: Application %s has no spec.source or spec.sources", file, ErrParse, a.ID())
	}
	for i, s := range a.Spec.AllSources() {
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
}

// ParseFile reads the Applications and ApplicationSets one YAML file
// holds. Documents that are not Argo CD objects, or not mappings, are
// skipped: the file is someone else's.
func ParseFile(data []byte, file string) Declared {
	var out Declared
	if !bytes.Contains(data, []byte(Group)) {
		return out
	}
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
	if err != nil {
		return out
	}
	for _, n := range nodes {
		if n.YNode().Kind != yaml.MappingNode {
			continue
		}
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
// engine's (Engine.parses), kept between plans.
type parses interface {
	// parsed is the parse of the file p of s, if known.
	parsed(s *snapshot.Snapshot, p string) (Declared, bool)
	// keep keeps the parse d of the file p of s.
	keep(s *snapshot.Snapshot, p string, d Declared)
}

// discoverIn is DiscoverIn taking the parses known (known nil: none).
func discoverIn(ctx context.Context, s *snapshot.Snapshot, paths []string, known parses) (Declared, error) {
	var yamls []string
	for _, p := range paths {
		if snapshot.IsYAML(p) {
			yamls = append(yamls, p)
		}
	}
	has, err := s.Containing(ctx, yamls, Group)
	if err != nil {
		return Declared{}, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	// A chart's templates are not Applications: what the chart renders
	// are.
	has = slices.DeleteFunc(has, func(p string) bool { return chartTemplate(s, p) })
	// The parses known (of files that passed the filter below before)
	// are taken as they are; the others are filtered, then parsed.
	parsed := map[string]Declared{}
	var unknown []string
	for _, p := range has {
		d, ok := Declared{}, false
		if known != nil {
			d, ok = known.parsed(s, p)
		}
		if ok {
			parsed[p] = d
		} else {
			unknown = append(unknown, p)
		}
	}
	// Files of other kinds of the group (Argo Workflows', Rollouts') are
	// not parsed: an Application's or ApplicationSet's kind names itself,
	// unless a YAML escape ("Appl\x69cation") or tag (!!binary) spells it.
	read, err := prefilter(ctx, s, unknown, "Application", `\`, "!!")
	if err != nil {
		return Declared{}, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	fresh := make(map[string]bool, len(read))
	for _, p := range read {
		fresh[p] = true
	}
	has = slices.DeleteFunc(has, func(p string) bool {
		_, ok := parsed[p]
		return !ok && !fresh[p]
	})
	if err := s.Load(ctx, read); err != nil {
		return Declared{}, fmt.Errorf("discover Argo CD Applications: %w", err)
	}
	var out Declared
	for _, p := range has {
		d := parsed[p]
		if fresh[p] {
			// Parsed once per content and path for both sides of a plan
			// (most files are alike on both): parsing is most of a
			// one-Application plan's work on a repository of many
			// Applications.
			v, err := s.Derived(ctx, p, "argocd.ParseFile\x00"+p, func(data []byte) any { return ParseFile(data, p) })
			if err != nil {
				continue
			}
			d = v.(Declared)
			if known != nil {
				known.keep(s, p, d)
			}
		}
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
	return out, nil
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

// declaredJSON is a file's parse as a ParseStore keeps it: the objects,
// from which Applications and ApplicationSets are read again as
// ParseFile reads them.
type declaredJSON struct {
	Applications []json.RawMessage `json:"applications,omitempty"`
	Sets         []map[string]any  `json:"sets,omitempty"`
	Invalid      []Named           `json:"invalid,omitempty"`
}

// encodeDeclared is d as a ParseStore keeps it (one line of JSON).
func encodeDeclared(d Declared) ([]byte, error) {
	var dj declaredJSON
	for _, a := range d.Applications {
		if a.object == nil {
			return nil, fmt.Errorf("Application %s has no object", a.ID())
		}
		dj.Applications = append(dj.Applications, a.object)
	}
	for _, set := range d.Sets {
		dj.Sets = append(dj.Sets, set.Object)
	}
	dj.Invalid = d.Invalid
	return json.Marshal(dj)
}

// decodeDeclared reads what encodeDeclared wrote of the file at p.
func decodeDeclared(data []byte, p string) (Declared, error) {
	var dj declaredJSON
	if err := json.Unmarshal(data, &dj); err != nil {
		return Declared{}, err
	}
	var d Declared
	for _, raw := range dj.Applications {
		a, err := parseJSON(raw, p, func() any { return nil })
		if err != nil {
			return Declared{}, err
		}
		d.Applications = append(d.Applications, a)
	}
	for _, m := range dj.Sets {
		d.Sets = append(d.Sets, appSetOf(m, p))
	}
	d.Invalid = dj.Invalid
	return d, nil
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
	if a.Cascades() {
		return nil
	}
	return []string{"the Application is deleted without the " + ResourcesFinalizer + " finalizer: Argo CD leaves the objects it synced in the cluster"}
}

// Cascades says whether deleting the Application deletes the objects it
// synced: it carries the resources finalizer (either propagation).
func (a *Application) Cascades() bool {
	md, _ := a.Object()["metadata"].(map[string]any)
	fs, _ := md["finalizers"].([]any)
	for _, f := range fs {
		if s, ok := f.(string); ok && (s == ResourcesFinalizer || strings.HasPrefix(s, ResourcesFinalizer+"/")) {
			return true
		}
	}
	return false
}
