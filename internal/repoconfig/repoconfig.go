// Package repoconfig reads .kplan.yaml, where a repository declares what
// deploys: its targets, each an overlay with an environment and the
// namespace its namespaced objects land in when they render without one.
//
//	# .kplan.yaml
//	apiVersion: kplan.dev/v1alpha1   # the format's version; another is refused
//	kind: Repository
//	targets:
//	  - name: prod-eu                # required, unique; commit status kplan/<name>
//	    overlay: clusters/prod-eu    # required, a directory relative to the repository root
//	    environment: production-eu   # default: the target name
//	    namespace: default           # default "default"
//	ignore:                          # noise filters for plans; the plan says what each hid
//	  fields: ["metadata.annotations.checksum/*"]
//	  kinds: [HorizontalPodAutoscaler]
//	dangerous:                       # the plan's danger rules (internal/danger)
//	  disable: [scale-to-zero]       # rule ids not reported; off only when base and head both say so
//	kubernetes:                      # what the clusters run, for the charts kplan templates (Helm's Capabilities)
//	  version: "1.31"                # default: the newest kplan's Kubernetes libraries speak (kubeversion.Default)
//	  apiVersions: [monitoring.coreos.com/v1]   # added to Helm's own
//	  clusters:                      # clusters that run another, by name (target name or environment, Flux
//	    - name: legacy               # cluster, Argo CD cluster) or server (Argo CD destination)
//	      version: "1.29"
//	fluxArtifacts:                   # OCI artifacts CI builds from this repository (flux push artifact --path)
//	  - url: oci://ghcr.io/org/fleet # an OCIRepository's spec.url, without tag or digest
//	    path: ./                     # the repository directory the artifact is made of
//
// A file may hold only ignore rules and danger settings: overlays are
// then discovered. A file without apiVersion and kind (as every file was
// before they existed) is read as v1alpha1, with a deprecation warning
// in Config.Warnings for the caller to log.
//
// The Action plans exactly these overlays, grouped by target; the webhook
// reads the file at the commit it deploys. Without the file, overlays are
// discovered (internal/render).
package repoconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kplan-dev/kplan/internal/danger"
)

// File is the repository-relative name of the file.
const File = ".kplan.yaml"

// The version of the file's format, and its kind.
const (
	APIVersion = "kplan.dev/v1alpha1"
	Kind       = "Repository"
)

// DefaultNamespace is where namespaced objects rendered without a
// namespace go, as kubectl and cli-utils send them.
const DefaultNamespace = "default"

// Config is a parsed .kplan.yaml.
type Config struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Targets    []Target `yaml:"targets"`
	// Ignore are noise filters the plan applies (and reports).
	Ignore Ignore `yaml:"ignore"`
	// Dangerous configures the plan's danger rules.
	Dangerous Dangerous `yaml:"dangerous"`
	// Flux turns Flux mode on or off (internal/flux): the plan's targets
	// are then the repository's Flux Kustomizations. Unset: on when the
	// repository holds one whose source is the flux-system GitRepository.
	Flux *bool `yaml:"flux"`
	// FluxClusters names the clusters' entry points discovery cannot
	// find (cluster name → the directory its flux-system Kustomization
	// applies), as when Flux is installed by a tool that keeps nothing in
	// the repository. Setting it turns Flux mode on.
	FluxClusters map[string]string `yaml:"fluxClusters"`
	// FluxArtifacts are the OCI artifacts built from a directory of this
	// repository (`flux push artifact --path`, as flux-operator's d2
	// layout does in CI): a Flux Kustomization (or FluxInstance) whose
	// OCIRepository pulls one is planned from that directory, as one
	// from a GitRepository of the repository is. Setting it turns Flux
	// mode on.
	FluxArtifacts []FluxArtifact `yaml:"fluxArtifacts"`
	// ArgoCD turns Argo CD mode on or off (internal/argocd): the plan's
	// targets are then the repository's Argo CD Applications. Unset: on
	// when the repository holds one with a source in this repository.
	ArgoCD *bool `yaml:"argocd"`
	// ArgoCDRepoURLs are the repoURLs that name this repository besides
	// its git remotes (a mirror, an alias); "*" takes every repoURL for
	// this repository.
	ArgoCDRepoURLs []string `yaml:"argocdRepoURLs"`
	// ArgoCDClusters are the clusters Argo CD deploys to (its cluster
	// Secrets), which ApplicationSets' clusters generators read; unset,
	// those generators are not rendered.
	ArgoCDClusters []ArgoCDCluster `yaml:"argocdClusters"`
	// ArgoCDNewGitFileGlobbing says Argo CD runs with
	// applicationset.enableNewGitFileGlobbing: git files generators'
	// patterns match within directories (`**` across).
	ArgoCDNewGitFileGlobbing bool `yaml:"argocdNewGitFileGlobbing"`
	// ArgoCDKustomizeBuildOptions are argocd-cm's kustomize.buildOptions,
	// with which Argo CD builds kustomize sources: "--enable-helm" and
	// "--load-restrictor LoadRestrictionsNone" are read (ParseBuildOptions).
	ArgoCDKustomizeBuildOptions string `yaml:"argocdKustomizeBuildOptions"`
	// Kubernetes declares what each cluster runs, for the charts kplan
	// templates for it (kubeversion): unset, kplan's default.
	Kubernetes Kubernetes `yaml:"kubernetes"`
	// Warnings are what the file should change but still works with (no
	// apiVersion and kind), for the caller to log.
	Warnings []string `yaml:"-"`
}

// Kubernetes is what the clusters run: the version and API versions
// Helm's Capabilities hold when kplan templates a chart for one of them.
type Kubernetes struct {
	// Version and APIVersions are every cluster's that Clusters does not
	// name.
	Version     string   `yaml:"version"`
	APIVersions []string `yaml:"apiVersions"`
	// Clusters are the clusters that run another.
	Clusters []KubernetesCluster `yaml:"clusters"`
}

// KubernetesCluster is what one cluster runs. It is found by name (a
// target's name or environment, a Flux cluster, an Argo CD cluster's
// name) or by server (an Argo CD destination's); a field it leaves unset
// is the top one's.
type KubernetesCluster struct {
	Name        string   `yaml:"name"`
	Server      string   `yaml:"server"`
	Version     string   `yaml:"version"`
	APIVersions []string `yaml:"apiVersions"`
}

// FluxArtifact is one OCI artifact built from this repository.
type FluxArtifact struct {
	// URL is the OCIRepository's spec.url (oci://host/repository): any
	// tag, semver or digest of it is taken to be built from the commit
	// planned.
	URL string `yaml:"url"`
	// Path is the repository directory pushed as the artifact's root.
	Path string `yaml:"path"`
}

// FluxArtifactPaths are fluxArtifacts as URL → repository directory
// ("." for the top), the URL without a trailing slash.
func (c *Config) FluxArtifactPaths() map[string]string {
	if c == nil || len(c.FluxArtifacts) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, a := range c.FluxArtifacts {
		out[strings.TrimSuffix(a.URL, "/")] = path.Clean(strings.TrimPrefix(a.Path, "/"))
	}
	return out
}

// ArgoCDCluster is one cluster Argo CD deploys to, as its cluster Secret
// says: the Secret's name and server data, and its labels and
// annotations.
type ArgoCDCluster struct {
	Name        string            `yaml:"name"`
	Server      string            `yaml:"server"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
	// Project is the cluster Secret's project, the clusters generator's
	// project parameter.
	Project string `yaml:"project"`
}

// Dangerous configures the danger rules (internal/danger).
type Dangerous struct {
	// Disable are the ids of rules whose findings the plan leaves out.
	Disable []string `yaml:"disable"`
}

// Ignore are field path patterns and kinds whose changes a plan leaves
// out, saying how many each hid (internal/inventorydiff.IgnoreRules).
type Ignore struct {
	Fields []string `yaml:"fields"`
	Kinds  []string `yaml:"kinds"`
	// Defaults turns the default noise set (chart and version labels,
	// checksum annotations, caBundle) on or off; unset is on.
	Defaults *bool `yaml:"defaults"`
}

// HasTargets says whether the file declares targets; one with only
// ignore rules leaves overlays to discovery.
func (c *Config) HasTargets() bool { return c != nil && len(c.Targets) > 0 }

// Target is one overlay that deploys.
type Target struct {
	Name        string `yaml:"name" json:"name"`
	Overlay     string `yaml:"overlay" json:"overlay"`
	Environment string `yaml:"environment,omitempty" json:"environment,omitempty"`
	Namespace   string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// Parse reads and validates the file's content. Every problem is reported
// as ".kplan.yaml: targets[i].field: what is wrong"; defaults are filled in.
func Parse(data []byte) (*Config, error) {
	versioned, err := version(data)
	if err != nil {
		return nil, err
	}
	c, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(c.check()...); err != nil {
		return nil, err
	}
	if !versioned {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s has no apiVersion and kind: reading it as %s %s; add \"apiVersion: %s\" and \"kind: %s\" at its top, as unversioned files will be refused in a later version", File, APIVersion, Kind, APIVersion, Kind))
	}
	return c, nil
}

// decode reads the file's fields, refusing one this version does not
// know; an empty file is an empty Config.
func decode(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt field must not fall back to a default
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return &c, nil
}

// check validates every setting, section by section in the order the
// problems are reported, and fills in the targets' defaults.
func (c *Config) check() []error {
	var errs []error
	if c.declaresNothing() {
		errs = append(errs, fmt.Errorf("%s: targets: list at least one target (or delete the file to plan every overlay)", File))
	}
	errs = append(errs, c.checkFluxClusters()...)
	errs = append(errs, c.checkFluxArtifacts()...)
	if _, err := ParseBuildOptions(c.ArgoCDKustomizeBuildOptions); err != nil {
		errs = append(errs, fmt.Errorf("%s: argocdKustomizeBuildOptions: %w", File, err))
	}
	errs = append(errs, c.checkArgoCDClusters()...)
	errs = append(errs, c.Kubernetes.check()...)
	errs = append(errs, c.Ignore.check()...)
	if err := danger.CheckIDs(c.Dangerous.Disable); err != nil {
		errs = append(errs, fmt.Errorf("%s: dangerous.disable: %w", File, err))
	}
	errs = append(errs, c.checkTargets()...)
	return append(errs, c.checkTargetsKubernetes()...)
}

// declaresNothing says whether the file sets nothing at all: no target,
// ignore rule, danger setting, Flux or Argo CD setting.
func (c *Config) declaresNothing() bool {
	ignoring := len(c.Ignore.Fields)+len(c.Ignore.Kinds) > 0 || c.Ignore.Defaults != nil
	k := c.Kubernetes
	kube := k.Version != "" || len(k.APIVersions) > 0 || len(k.Clusters) > 0
	return len(c.Targets) == 0 && !ignoring && len(c.Dangerous.Disable) == 0 && c.Flux == nil && len(c.FluxClusters) == 0 && len(c.FluxArtifacts) == 0 && c.ArgoCD == nil && len(c.ArgoCDRepoURLs) == 0 && c.ArgoCDClusters == nil && !c.ArgoCDNewGitFileGlobbing && c.ArgoCDKustomizeBuildOptions == "" && !kube
}

// checkFluxArtifacts refuses a fluxArtifacts entry whose url is no
// oci:// URL, or whose path leaves the repository, and a URL listed
// twice.
func (c *Config) checkFluxArtifacts() []error {
	var errs []error
	seen := map[string]bool{}
	for i, a := range c.FluxArtifacts {
		u := strings.TrimSuffix(a.URL, "/")
		rest, ok := strings.CutPrefix(u, "oci://")
		if !ok || rest == "" || strings.ContainsAny(rest, " @") || strings.Contains(path.Base(rest), ":") {
			errs = append(errs, fmt.Errorf("%s: fluxArtifacts[%d].url: %q: give the OCIRepository's spec.url, oci://host/repository, without tag or digest", File, i, a.URL))
		}
		if a.Path == "" || path.IsAbs(a.Path) || slices.Contains(strings.Split(path.Clean(a.Path), "/"), "..") {
			errs = append(errs, fmt.Errorf("%s: fluxArtifacts[%d].path: %q: give the repository directory the artifact is pushed from (e.g. ./ or ./deploy)", File, i, a.Path))
		}
		if seen[u] {
			errs = append(errs, fmt.Errorf("%s: fluxArtifacts[%d].url: %q is listed twice", File, i, a.URL))
		}
		seen[u] = true
	}
	return errs
}

// checkFluxClusters refuses a fluxClusters entry without a usable name
// or a directory inside the repository, in name order.
func (c *Config) checkFluxClusters() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.FluxClusters)) {
		dir := c.FluxClusters[name]
		if name == "" || strings.ContainsAny(name, ": ") || dir == "" || path.IsAbs(dir) || slices.Contains(strings.Split(path.Clean(dir), "/"), "..") {
			errs = append(errs, fmt.Errorf("%s: fluxClusters: %q: %q: name each cluster (no spaces or colons) and give the repository directory its flux-system Kustomization applies (e.g. production: clusters/production)", File, name, dir))
		}
	}
	return errs
}

// checkArgoCDClusters refuses an argocdClusters entry without a name or
// a server, and a name given twice.
func (c *Config) checkArgoCDClusters() []error {
	var errs []error
	clusters := map[string]int{}
	for i, cl := range c.ArgoCDClusters {
		if cl.Name == "" || cl.Server == "" {
			errs = append(errs, fmt.Errorf("%s: argocdClusters[%d]: give each cluster the name and server of its Argo CD cluster Secret", File, i))
			continue
		}
		if j, dup := clusters[cl.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: argocdClusters[%d]: %q is also argocdClusters[%d]", File, i, cl.Name, j))
		}
		clusters[cl.Name] = i
	}
	return errs
}

// check refuses a field pattern that names no field, an empty kind and
// the Secret kind.
func (ig Ignore) check() []error {
	var errs []error
	for i, f := range ig.Fields {
		if strings.Trim(f, "*. ") == "" {
			errs = append(errs, fmt.Errorf("%s: ignore.fields[%d]: %q: name a field path (e.g. metadata.annotations.checksum/*)", File, i, f))
		}
	}
	for i, k := range ig.Kinds {
		switch strings.TrimSpace(k) {
		case "":
			errs = append(errs, fmt.Errorf("%s: ignore.kinds[%d]: empty: name a kind", File, i))
		case "Secret":
			errs = append(errs, fmt.Errorf("%s: ignore.kinds[%d]: a Secret's changes are never ignored (their values never show anyway)", File, i))
		}
	}
	return errs
}

// checkTargets validates each target and fills in its defaults; a name
// is unique case-insensitively.
func (c *Config) checkTargets() []error {
	var errs []error
	names := map[string]int{}
	for i := range c.Targets {
		errs = append(errs, c.Targets[i].check(i, names)...)
	}
	return errs
}

// targetError is a problem with field of targets[i].
func targetError(i int, field, format string, args ...any) error {
	return fmt.Errorf("%s: targets[%d].%s: %s", File, i, field, fmt.Sprintf(format, args...))
}

// check validates targets[i]'s name (names maps the names before it,
// lower-cased, to their index), overlay and namespace, and fills in its
// cleaned overlay, its environment and its namespace.
func (t *Target) check(i int, names map[string]int) []error {
	var errs []error
	switch {
	case t.Name == "":
		errs = append(errs, targetError(i, "name", "required"))
	case len(validation.IsDNS1123Subdomain(strings.ToLower(t.Name))) > 0:
		errs = append(errs, targetError(i, "name", "%q: use letters, digits, '-' and '.'", t.Name))
	default:
		if j, dup := names[strings.ToLower(t.Name)]; dup {
			errs = append(errs, targetError(i, "name", "%q is also targets[%d]", t.Name, j))
		}
		names[strings.ToLower(t.Name)] = i
	}
	o := strings.TrimSuffix(strings.TrimPrefix(t.Overlay, "./"), "/")
	switch {
	case o == "":
		errs = append(errs, targetError(i, "overlay", "required: the overlay's directory, relative to the repository root"))
	case path.IsAbs(o) || path.Clean(o) == ".." || strings.HasPrefix(path.Clean(o), "../"):
		errs = append(errs, targetError(i, "overlay", "%q: must be a directory inside the repository, relative to its root", t.Overlay))
	default:
		t.Overlay = path.Clean(o)
	}
	if t.Environment == "" {
		t.Environment = t.Name
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	} else if msgs := validation.IsDNS1123Label(t.Namespace); len(msgs) > 0 {
		errs = append(errs, targetError(i, "namespace", "%q: %s", t.Namespace, strings.Join(msgs, "; ")))
	}
	return errs
}

// version checks the file's apiVersion and kind before anything else, so
// that a file of another version is refused whole, not as a list of
// fields this version does not know. It says whether the file is
// versioned; one with neither is read as the current version.
func version(data []byte) (bool, error) {
	var v struct {
		APIVersion *string `yaml:"apiVersion"`
		Kind       *string `yaml:"kind"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return false, nil // the full decode reports it, or the file is empty
	}
	switch {
	case v.APIVersion == nil && v.Kind == nil:
		return false, nil
	case v.APIVersion == nil:
		return false, fmt.Errorf("%s: apiVersion: required with kind (apiVersion: %s)", File, APIVersion)
	case v.Kind == nil:
		return false, fmt.Errorf("%s: kind: required with apiVersion (kind: %s)", File, Kind)
	case *v.APIVersion != APIVersion:
		return false, fmt.Errorf("%s: apiVersion: %q is not a version this kplan reads (%s)", File, *v.APIVersion, APIVersion)
	case *v.Kind != Kind:
		hint := ""
		if *v.Kind == "WebhookConfig" {
			hint = "; kind WebhookConfig is the webhook's configuration, not a repository's"
		}
		return false, fmt.Errorf("%s: kind: %q is not %s%s", File, *v.Kind, Kind, hint)
	}
	return true, nil
}

// Overlays are the targets' overlay directories, each once, in file order.
func (c *Config) Overlays() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if !seen[t.Overlay] {
			seen[t.Overlay] = true
			out = append(out, t.Overlay)
		}
	}
	return out
}

// Target returns the target named name (case-insensitively).
func (c *Config) Target(name string) (Target, bool) {
	for _, t := range c.Targets {
		if strings.EqualFold(t.Name, name) {
			return t, true
		}
	}
	return Target{}, false
}

// TargetsOf returns the targets that deploy overlay.
func (c *Config) TargetsOf(overlay string) []Target {
	var out []Target
	for _, t := range c.Targets {
		if t.Overlay == overlay {
			out = append(out, t)
		}
	}
	return out
}

// BuildOptions are the kustomize build flags kplan reads from Argo CD's
// kustomize.buildOptions.
type BuildOptions struct {
	EnableHelm, LoadRestrictorNone bool
}

// ParseBuildOptions reads `kustomize build` flags as Argo CD passes
// them: --enable-helm and --load-restrictor (or --load_restrictor)
// LoadRestrictionsNone|LoadRestrictionsRootOnly, "=" or a space before
// the value. Any other flag is an error naming it: kplan would build
// otherwise than Argo CD does.
func ParseBuildOptions(s string) (BuildOptions, error) {
	var o BuildOptions
	f := strings.Fields(s)
	for i := 0; i < len(f); i++ {
		name, value, hasValue := strings.Cut(f[i], "=")
		switch name {
		case "--enable-helm":
			o.EnableHelm = true
		case "--load-restrictor", "--load_restrictor":
			if !hasValue {
				if i+1 == len(f) {
					return o, fmt.Errorf("%s needs a value (LoadRestrictionsNone or LoadRestrictionsRootOnly)", name)
				}
				i++
				value = f[i]
			}
			switch value {
			case "LoadRestrictionsNone":
				o.LoadRestrictorNone = true
			case "LoadRestrictionsRootOnly":
				o.LoadRestrictorNone = false
			default:
				return o, fmt.Errorf("%s %q: want LoadRestrictionsNone or LoadRestrictionsRootOnly", name, value)
			}
		default:
			return o, fmt.Errorf("%q: kplan reads --enable-helm and --load-restrictor; with another flag it would build otherwise than Argo CD", f[i])
		}
	}
	return o, nil
}
