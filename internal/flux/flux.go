// Package flux plans what Flux applies from a repository: each Flux
// Kustomization (kustomize.toolkit.fluxcd.io v1, v1beta2) whose source is
// the repository itself is a target, built as kustomize-controller builds
// it: its spec.path with kplan's renderer, after Flux's generator wrote
// its spec (components, patches, images, namePrefix/nameSuffix,
// targetNamespace) into the kustomization, then postBuild substitution,
// commonMetadata and Flux's owner labels, in the controller's order.
//
// Which Kustomizations are applied, and with which spec, is found the way
// Flux finds them: the roots (Kustomizations no other one reads) are
// built first, and the Flux Kustomization objects a build outputs are
// the next targets, with the spec as that build left it (its patches,
// namespace and substitutions applied).
package flux

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Group is the API group of Flux Kustomizations.
const Group = "kustomize.toolkit.fluxcd.io"

// DefaultSource is the GitRepository that is the repository itself unless
// Options say otherwise: `flux bootstrap` names the repository it syncs
// from flux-system in namespace flux-system, and so do most repositories
// built on it (home-ops, the flux2 examples).
const DefaultSource = "flux-system/flux-system"

// Kustomization is one Flux Kustomization object.
type Kustomization struct {
	Namespace string
	Name      string
	// File declares the object in the repository ("" if no file does,
	// as for one a generator made).
	File string
	// Parent is the ID of the Flux Kustomization whose build outputs
	// this one; "" for a root.
	Parent string
	// Object is the object as Flux sees it: for a child, as its
	// parent's build output it.
	Object map[string]any
	// Root is the repository directory its source's root is: "" for the
	// repository itself, the directory an ArtifactGenerator copies for an
	// ExternalArtifact. Within are the directories that artifact holds
	// (nil: all).
	Root   string
	Within []string
	// Artifact is the URL of the OCI artifact its OCIRepository pulls
	// when .kplan.yaml maps it to Root, a directory of this repository
	// (fluxArtifacts); "" otherwise.
	Artifact string
}

// ID is the identity of a Flux Kustomization in a plan: namespace/name.
func (k *Kustomization) ID() string { return k.Namespace + "/" + k.Name }

// IsKustomization reports whether an object is a Flux Kustomization.
func IsKustomization(apiVersion, kind string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return kind == "Kustomization" && g == Group
}

// Path is spec.path as a repository-relative directory ("." for the
// top). Flux joins it to the source's root securely, so a path climbing
// above the root stops there, as it does here.
func (k *Kustomization) Path() string {
	p, _, _ := unstructured.NestedString(k.Object, "spec", "path")
	return cleanPath(path.Join(k.Root, cleanPath(p)))
}

// Source is the sourceRef as kind/namespace/name (namespace defaulting
// to the Kustomization's).
func (k *Kustomization) Source() (kind, id string) {
	ref, _, _ := unstructured.NestedStringMap(k.Object, "spec", "sourceRef")
	ns := ref["namespace"]
	if ns == "" {
		ns = k.Namespace
	}
	return ref["kind"], ns + "/" + ref["name"]
}

// Suspended reports spec.suspend: Flux applies nothing of it.
func (k *Kustomization) Suspended() bool {
	s, _, _ := unstructured.NestedBool(k.Object, "spec", "suspend")
	return s
}

// fromNode reads a Flux Kustomization from an object, with the namespace
// it gets when none is set.
func fromNode(n *yaml.RNode, file, defaultNS string) (*Kustomization, error) {
	m, err := asMap(n)
	if err != nil {
		return nil, fmt.Errorf("%s: Kustomization %s: %w", file, n.GetName(), err)
	}
	ns := n.GetNamespace()
	if ns == "" {
		ns = defaultNS
	}
	return &Kustomization{Namespace: ns, Name: n.GetName(), File: file, Object: m}, nil
}

// foundIn are the Flux Kustomizations, FluxInstances and GitRepositories
// the YAML file holding data declares, in the order written; none when it does not
// parse. Any YAML is read: a document that is not a mapping (a kustomize
// replacements file is a top-level list) or whose metadata is not one
// declares nothing. Documents are read as maps, never with kyaml's
// getters, which panic on a node of another kind; each once, for both.
func foundIn(data []byte, file string) *Found {
	kust := bytes.Contains(data, []byte(Group))
	inst := bytes.Contains(data, []byte(OperatorGroup)) || bytes.Contains(data, []byte("flux-instance"))
	git := bytes.Contains(data, []byte("GitRepository"))
	oci := bytes.Contains(data, []byte("OCIRepository"))
	f := &Found{}
	if !kust && !inst && !git && !oci {
		return f
	}
	nodes, err := yamldocs.Mappings(data)
	if err != nil {
		return f
	}
	for _, n := range nodes {
		m, err := asMap(n)
		if err != nil {
			continue
		}
		if k := declared(m, file); k != nil && kust {
			f.Kustomizations = append(f.Kustomizations, *k)
		}
		if in := instance(m, file); in != nil && inst {
			f.Instances = append(f.Instances, *in)
		}
		if g := gitRepository(m, file); g != nil && git {
			f.GitRepositories = append(f.GitRepositories, *g)
		}
		if o := ociRepository(m, file); o != nil && oci {
			f.OCIRepositories = append(f.OCIRepositories, *o)
		}
	}
	return f
}

// declared is the Flux Kustomization a document of file (m) declares,
// nil if it declares none.
func declared(m map[string]any, file string) *Declared {
	apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
	kind, _, _ := unstructured.NestedString(m, "kind")
	name, _, _ := unstructured.NestedString(m, "metadata", "name")
	ns, _, _ := unstructured.NestedString(m, "metadata", "namespace")
	if !IsKustomization(apiVersion, kind) || name == "" {
		return nil
	}
	return &Declared{Kustomization: &Kustomization{Namespace: cmp.Or(ns, "default"), Name: name, File: file, Object: m}, NamespaceSet: ns != ""}
}

// Declared is a Flux Kustomization found in a repository file.
type Declared struct {
	*Kustomization
	// NamespaceSet says whether the file sets metadata.namespace; if not,
	// the namespace is that of the build that applies it.
	NamespaceSet bool

	entry bool // a cluster's implicit flux-system Kustomization
}

// Found is what Discover finds in a repository's YAML files.
type Found struct {
	Kustomizations []Declared
	Instances      []Instance
	// GitRepositories are the GitRepository objects written in the
	// repository: the rules of the artifacts the targets build from
	// (source.go).
	GitRepositories []GitRepository
	// OCIRepositories are the OCIRepository objects written in the
	// repository: those pulling an artifact built from it (.kplan.yaml
	// fluxArtifacts) are sources of its Kustomizations.
	OCIRepositories []OCIRepository
}

// Discover finds the Flux Kustomization and FluxInstance objects written
// in the YAML files of s. Files that do not parse are skipped: a build
// that reads them reports the error.
func Discover(ctx context.Context, s *snapshot.Snapshot) (*Found, error) {
	return DiscoverIn(ctx, s, s.Index.Paths())
}

// Needles are the strings a file must hold to declare a Kustomization, a
// FluxInstance or a GitRepository (foundIn): files without them are never
// parsed.
func Needles() []string {
	return []string{Group, OperatorGroup, "flux-instance", "GitRepository", "OCIRepository"}
}

// DiscoverIn is Discover over some of the files of s (paths, sorted):
// those that changed, on a side whose other side declares none.
func DiscoverIn(ctx context.Context, s *snapshot.Snapshot, paths []string) (*Found, error) {
	var yamls []string
	for _, p := range paths {
		if snapshot.IsYAML(p) {
			yamls = append(yamls, p)
		}
	}
	// Only files naming the group can declare one: the others are read
	// once, not kept.
	each, err := s.ContainingEach(ctx, yamls, Needles()...)
	if err != nil {
		return nil, fmt.Errorf("discover Flux Kustomizations: %w", err)
	}
	has := map[string]bool{}
	for _, ps := range each {
		for _, p := range ps {
			has[p] = true
		}
	}
	yamls = slices.DeleteFunc(yamls, func(p string) bool { return !has[p] })
	// One batch from git; the files stay visible to builds, as they are
	// in the tree.
	if err := s.Load(ctx, yamls); err != nil {
		return nil, fmt.Errorf("discover Flux Kustomizations: %w", err)
	}
	out := &Found{}
	for _, p := range yamls {
		// A file's declarations depend on its content and its path:
		// parsed once for every side and pass of a plan.
		v, err := s.Derived(ctx, p, "flux.foundIn\x00"+p, func(data []byte) any {
			return foundIn(data, p)
		})
		if err != nil {
			continue
		}
		f := v.(*Found)
		out.Kustomizations = append(out.Kustomizations, f.Kustomizations...)
		out.Instances = append(out.Instances, f.Instances...)
		out.GitRepositories = append(out.GitRepositories, f.GitRepositories...)
		out.OCIRepositories = append(out.OCIRepositories, f.OCIRepositories...)
	}
	slices.SortFunc(out.Kustomizations, func(a, b Declared) int {
		return strings.Compare(a.File+"\x00"+a.ID(), b.File+"\x00"+b.ID())
	})
	return out, nil
}

// asMap is a mapping node as Kubernetes' unstructured objects hold one:
// numbers as int64 or float64, never the int (or uint64) kyaml's Map
// gives, on which apimachinery's deep copies (NestedMap, DeepCopyJSON)
// panic.
func asMap(n *yaml.RNode) (map[string]any, error) {
	m, err := n.Map()
	if err != nil {
		return nil, err
	}
	return normalize(m).(map[string]any), nil
}

// normalize rewrites the numbers in v in place, as JSON decoding makes
// them; keys that are not strings (YAML allows them) become strings.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case int:
		return int64(x)
	case uint64:
		return float64(x)
	case int64, float64, string, bool, nil:
		return x
	default:
		return fmt.Sprint(x) // timestamps and the like, as text
	}
}
