// Package helm is kplan's Helm engine, for Flux and Argo CD alike: charts
// (fetched by internal/charts, the one owner of fetching, their
// dependencies built here) rendered with the Helm SDK. It renders a Flux HelmRelease
// (helm.toolkit.fluxcd.io v2, v2beta1, v2beta2) as helm-controller renders
// it before applying:
// its chart from the source it names, its values composed from the
// chart's defaults, spec.valuesFrom and spec.values, templated in process
// with the Helm SDK (no helm binary, no cluster), then its kustomize
// post-renderers and helm-controller's origin labels.
//
// It reads nothing by itself: the source objects, the ConfigMaps and
// Secrets, the repository's chart directories and the network come from
// the caller (Env), so that it sees what Flux would see and fetches only
// what kplan's network policy allows.
package helm

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Group is the API group of HelmReleases.
const Group = "helm.toolkit.fluxcd.io"

// Is says whether an object is a HelmRelease.
func Is(apiVersion, kind string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return kind == "HelmRelease" && g == Group
}

// Release is one HelmRelease object, as a Flux Kustomization outputs it.
type Release struct {
	Namespace, Name string
	Spec            Spec
}

// ID is namespace/name.
func (r *Release) ID() string { return r.Namespace + "/" + r.Name }

// Spec is the part of a HelmRelease's spec a render reads.
type Spec struct {
	Chart           *ChartTemplate `json:"chart,omitempty"`
	ChartRef        *CrossRef      `json:"chartRef,omitempty"`
	ReleaseName     string         `json:"releaseName,omitempty"`
	TargetNamespace string         `json:"targetNamespace,omitempty"`
	Suspend         bool           `json:"suspend,omitempty"`
	Install         *Action        `json:"install,omitempty"`
	Upgrade         *Action        `json:"upgrade,omitempty"`
	ValuesFrom      []ValuesRef    `json:"valuesFrom,omitempty"`
	Values          map[string]any `json:"values,omitempty"`
	PostRenderers   []PostRenderer `json:"postRenderers,omitempty"`
	CommonMetadata  *struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"commonMetadata,omitempty"`
}

// ChartTemplate is spec.chart: the HelmChart helm-controller makes.
type ChartTemplate struct {
	Spec ChartSpec `json:"spec"`
}

// ChartSpec names a chart in a source.
type ChartSpec struct {
	Chart       string   `json:"chart"`
	Version     string   `json:"version,omitempty"`
	SourceRef   CrossRef `json:"sourceRef"`
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	ValuesFile  string   `json:"valuesFile,omitempty"` // v2beta1
	// IgnoreMissingValuesFiles skips a valuesFiles entry the source does
	// not hold; without it, source-controller fails the chart.
	IgnoreMissingValuesFiles bool `json:"ignoreMissingValuesFiles,omitempty"`
}

// valuesFiles are the files source-controller composes the chart's
// values from (BuildOptions.GetValuesFiles, internal/helm/chart/builder.go
// at v1.9.1): valuesFile (v2beta1) then valuesFiles; a lone values.yaml
// is the chart's own values, nothing to compose.
func (s ChartSpec) valuesFiles() []string {
	files := s.ValuesFiles
	if s.ValuesFile != "" {
		files = append([]string{s.ValuesFile}, files...)
	}
	if len(files) == 1 && path.Clean(files[0]) == chartutil.ValuesfileName {
		return nil
	}
	return files
}

// CrossRef names an object, in the referrer's namespace by default.
type CrossRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Action is spec.install or spec.upgrade, as far as rendering goes.
type Action struct {
	CRDs         string `json:"crds,omitempty"`
	DisableHooks bool   `json:"disableHooks,omitempty"`
	SkipCRDs     bool   `json:"skipCRDs,omitempty"` // v2beta1
}

// ValuesRef is one spec.valuesFrom entry.
type ValuesRef struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	ValuesKey  string `json:"valuesKey,omitempty"`
	TargetPath string `json:"targetPath,omitempty"`
	Optional   bool   `json:"optional,omitempty"`
}

// PostRenderer is one spec.postRenderers entry; kustomize is the only kind.
type PostRenderer struct {
	Kustomize *KustomizePostRenderer `json:"kustomize,omitempty"`
}

// KustomizePostRenderer is a kustomize post-renderer's patches and images.
type KustomizePostRenderer struct {
	Patches               []map[string]any `json:"patches,omitempty"`
	PatchesStrategicMerge []map[string]any `json:"patchesStrategicMerge,omitempty"`
	PatchesJSON6902       []map[string]any `json:"patchesJson6902,omitempty"`
	Images                []map[string]any `json:"images,omitempty"`
}

// Parse reads a HelmRelease object (a map, as unstructured holds it).
func Parse(obj map[string]any) (*Release, error) {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
	if ns == "" {
		ns = "default"
	}
	r := &Release{Namespace: ns, Name: name}
	// Through JSON, as helm-controller decodes it: numbers in values
	// become float64, as Helm's own values do.
	spec, err := json.Marshal(obj["spec"])
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: read its spec: %w", r.ID(), err)
	}
	if err := json.Unmarshal(spec, &r.Spec); err != nil {
		return nil, fmt.Errorf("HelmRelease %s: read its spec: %w", r.ID(), err)
	}
	if r.Spec.Chart == nil && r.Spec.ChartRef == nil {
		return nil, fmt.Errorf("HelmRelease %s: neither spec.chart nor spec.chartRef is set", r.ID())
	}
	return r, nil
}

// ReleaseName is the Helm release name helm-controller uses:
// spec.releaseName, else [targetNamespace-]name, shortened with a hash
// past Helm's 53 characters (helm-controller's release.ShortenName).
func (r *Release) ReleaseName() string {
	name := r.Spec.ReleaseName
	if name == "" {
		name = r.Name
		if r.Spec.TargetNamespace != "" {
			name = r.Spec.TargetNamespace + "-" + r.Name
		}
	}
	if len(name) <= 53 {
		return name
	}
	const hashLen = 12
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(name)))
	return name[:53-(hashLen+1)] + "-" + sum[:hashLen]
}

// ReleaseNamespace is where the release's objects go: spec.targetNamespace,
// else the HelmRelease's namespace.
func (r *Release) ReleaseNamespace() string {
	if r.Spec.TargetNamespace != "" {
		return r.Spec.TargetNamespace
	}
	return r.Namespace
}

// IncludeCRDs says whether the chart's crds/ directory is applied:
// helm-controller's CRD policy of the install (Create by default) or,
// for a release that exists already, the upgrade (Skip by default).
func (r *Release) IncludeCRDs(upgrade bool) bool {
	a, def := r.Spec.Install, "Create"
	if upgrade {
		a, def = r.Spec.Upgrade, "Skip"
	}
	policy := def
	if a != nil {
		if a.CRDs != "" {
			policy = a.CRDs
		} else if a.SkipCRDs {
			policy = "Skip"
		}
	}
	return policy != "Skip"
}

// DisableHooks says whether the install (or upgrade) runs no hooks.
func (r *Release) DisableHooks(upgrade bool) bool {
	a := r.Spec.Install
	if upgrade {
		a = r.Spec.Upgrade
	}
	return a != nil && a.DisableHooks
}
