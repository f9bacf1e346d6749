package flux

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/render"
)

// reference builds k the way kustomize-controller does, on disk, with
// fluxcd/pkg/kustomize alone: its generator writes the kustomization,
// its SecureBuild builds (its own krusty options, a fresh OpenAPI
// schema), its SubstituteVariables substitutes (vars given inline, as
// the controller merges substituteFrom into them), then commonMetadata
// and the owner labels as `flux build kustomization` sets them.
func reference(t *testing.T, tree string, k *Kustomization, vars map[string]string) []string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(tree)); err != nil {
		t.Fatal(err)
	}
	out, err := referenceIn(root, k, vars)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// referenceIn is reference on a tree already on disk at root, which
// Flux's generator writes into.
func referenceIn(root string, k *Kustomization, vars map[string]string) ([]string, error) {
	obj := runtime.DeepCopyJSON(k.Object)
	dir := filepath.Join(root, filepath.FromSlash(k.Path()))
	action, err := fluxkustomize.NewGenerator(root, unstructured.Unstructured{Object: obj}).WriteFile(dir, fluxkustomize.WithSaveOriginalKustomization())
	if err != nil {
		return nil, fmt.Errorf("%s: Flux's generator: %w", k.ID(), err)
	}
	defer fluxkustomize.CleanDirectory(dir, action)
	// Flux's build resets kyaml's schema as it ends: never while a
	// Kustomizer's builds read it.
	var m resmap.ResMap
	err = render.Exclusive(func() (err error) {
		m, err = fluxkustomize.SecureBuild(root, dir, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: Flux's build: %w", k.ID(), err)
	}
	if pb, ok, _ := unstructured.NestedMap(obj, "spec", "postBuild"); ok {
		sub := map[string]any{}
		for n, v := range vars {
			sub[n] = v
		}
		inline, _, _ := unstructured.NestedStringMap(obj, "spec", "postBuild", "substitute")
		for n, v := range inline {
			sub[n] = v
		}
		delete(pb, "substituteFrom")
		pb["substitute"] = sub
		_ = unstructured.SetNestedMap(obj, pb, "spec", "postBuild")
		for _, res := range m.Resources() {
			if _, err := fluxkustomize.SubstituteVariables(context.Background(), nil, unstructured.Unstructured{Object: obj}, res, fluxkustomize.SubstituteWithDryRun(true)); err != nil {
				return nil, fmt.Errorf("%s: Flux's substitution: %w", k.ID(), err)
			}
		}
	}
	labels, _, _ := unstructured.NestedStringMap(obj, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(obj, "spec", "commonMetadata", "annotations")
	var out []string
	// As kustomize-controller reads its build (ssautil.ReadObjects).
	var objs []*yaml.RNode
	for _, res := range m.Resources() {
		objs = append(objs, &res.RNode)
	}
	decoded, err := decodeAsFlux(objs)
	if err != nil {
		return nil, err
	}
	for _, n := range decoded {
		res := &resource.Resource{RNode: *n}
		if len(annotations) > 0 {
			a := res.GetAnnotations()
			for n, v := range annotations {
				a[n] = v
			}
			if err := res.SetAnnotations(a); err != nil {
				return nil, err
			}
		}
		l := res.GetLabels()
		l[LabelName], l[LabelNamespace] = k.Name, k.Namespace
		for n, v := range labels {
			l[n] = v
		}
		if err := res.SetLabels(l); err != nil {
			return nil, err
		}
		c, err := canonicalErr(&res.RNode)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// canonical prints an object with sorted keys.
func canonical(t *testing.T, o *yaml.RNode) string {
	t.Helper()
	s, err := canonicalErr(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func canonicalErr(o *yaml.RNode) (string, error) {
	m, err := o.Map()
	if err != nil {
		return "", err
	}
	b, err := sigsyaml.Marshal(m)
	return string(b), err
}

// TestMatchesFluxLibraryBuild: every target of the layout renders as
// Flux's own library builds it on disk.
func TestMatchesFluxLibraryBuild(t *testing.T) {
	const tree = "../../testdata/flux-layout"
	res := build(t, layout(t))
	settings, err := os.ReadFile(filepath.Join(tree, "clusters/dev/cluster-settings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := sigsyaml.Unmarshal(settings, &cm); err != nil {
		t.Fatal(err)
	}
	if len(res.Targets) == 0 {
		t.Fatal("no targets")
	}
	for _, tg := range res.Targets {
		if tg.Err != nil {
			t.Errorf("%s: %v", tg.ID(), tg.Err)
			continue
		}
		var vars map[string]string
		if from, _, _ := unstructured.NestedSlice(tg.Object, "spec", "postBuild", "substituteFrom"); len(from) > 0 && strings.Contains(tg.ID(), "podinfo") {
			vars = cm.Data
		}
		want := reference(t, tree, tg.Kustomization, vars)
		var got []string
		for _, o := range tg.Objects {
			got = append(got, canonical(t, o))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s differs from Flux's build:\nkplan:\n%s\nFlux:\n%s", tg.ID(), strings.Join(got, "---\n"), strings.Join(want, "---\n"))
		}
	}
}
