package flux

import (
	"cmp"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// OCIRepository is an OCIRepository object written in the repository (or
// made by a FluxInstance's sync, or output by a build): which artifact
// it pulls.
type OCIRepository struct {
	Namespace, Name, File string
	// URL is spec.url, without a trailing slash.
	URL string
}

// ID is namespace/name.
func (o *OCIRepository) ID() string { return o.Namespace + "/" + o.Name }

// ociRepository is the OCIRepository a document of file (m) declares,
// nil if it declares none.
func ociRepository(m map[string]any, file string) *OCIRepository {
	apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
	kind, _, _ := unstructured.NestedString(m, "kind")
	name, _, _ := unstructured.NestedString(m, "metadata", "name")
	ns, _, _ := unstructured.NestedString(m, "metadata", "namespace")
	if g, _, _ := strings.Cut(apiVersion, "/"); g != sourceGroup || kind != "OCIRepository" || name == "" {
		return nil
	}
	u, _, _ := unstructured.NestedString(m, "spec", "url")
	return &OCIRepository{Namespace: cmp.Or(ns, "default"), Name: name, File: file, URL: strings.TrimSuffix(u, "/")}
}

// ociURLs are the OCIRepositories' URLs by ID that found declares, with
// those its FluxInstances' syncs make.
func ociURLs(found *Found) map[string]string {
	out := map[string]string{}
	for _, o := range found.OCIRepositories {
		if _, dup := out[o.ID()]; !dup {
			out[o.ID()] = o.URL
		}
	}
	for _, in := range found.Instances {
		if in.Kind == "OCIRepository" && in.URL != "" {
			out[in.Namespace+"/"+in.Name] = in.URL
		}
	}
	return out
}

// addOCIURLs adds to urls the OCIRepositories among objs.
func addOCIURLs(objs []*yaml.RNode, urls map[string]string) {
	for _, o := range objs {
		if o.GetKind() != "OCIRepository" {
			continue
		}
		m, err := asMap(o)
		if err != nil {
			continue
		}
		if r := ociRepository(m, ""); r != nil {
			urls[r.ID()] = r.URL
		}
	}
}

// artifactDir is the repository directory the OCI artifact at url is
// built from (.kplan.yaml fluxArtifacts), ok false if none.
func (e *Engine) artifactDir(url string) (string, bool) {
	dir, ok := e.opts.Artifacts[strings.TrimSuffix(url, "/")]
	return dir, ok
}

// withArtifact is k, or a copy of it whose source, an OCIRepository of
// urls, pulls an artifact built from this repository: rooted at the
// directory the artifact is pushed from.
func (e *Engine) withArtifact(k *Kustomization, urls map[string]string) *Kustomization {
	kind, id := k.Source()
	if kind != "OCIRepository" || k.Artifact != "" {
		return k
	}
	url, ok := urls[id]
	if !ok {
		return k
	}
	dir, ok := e.artifactDir(url)
	if !ok {
		return k
	}
	c := *k
	c.Root, c.Artifact = dir, url
	return &c
}

// artifactNote says what the plan assumes of a target built from a
// mapped OCI artifact.
func artifactNote(k *Kustomization) string {
	_, id := k.Source()
	return fmt.Sprintf("its source OCIRepository %s pulls %s, planned as built from this commit's %s (.kplan.yaml fluxArtifacts)", id, k.Artifact, cmp.Or(k.Root, "."))
}
