package flux

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
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
	obj := runtime.DeepCopyJSON(k.Object)
	dir := filepath.Join(root, filepath.FromSlash(k.Path()))
	if _, err := fluxkustomize.NewGenerator(root, unstructured.Unstructured{Object: obj}).WriteFile(dir); err != nil {
		t.Fatalf("%s: Flux's generator: %v", k.ID(), err)
	}
	m, err := fluxkustomize.SecureBuild(root, dir, false)
	if err != nil {
		t.Fatalf("%s: Flux's build: %v", k.ID(), err)
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
				t.Fatalf("%s: Flux's substitution: %v", k.ID(), err)
			}
		}
	}
	labels, _, _ := unstructured.NestedStringMap(obj, "spec", "commonMetadata", "labels")
	var out []string
	for _, res := range m.Resources() {
		l := res.GetLabels()
		l[LabelName], l[LabelNamespace] = k.Name, k.Namespace
		for n, v := range labels {
			l[n] = v
		}
		if err := res.SetLabels(l); err != nil {
			t.Fatal(err)
		}
		out = append(out, canonical(t, &res.RNode))
	}
	slices.Sort(out)
	return out
}

// canonical prints an object with sorted keys.
func canonical(t *testing.T, o *yaml.RNode) string {
	t.Helper()
	m, err := o.Map()
	if err != nil {
		t.Fatal(err)
	}
	b, err := sigsyaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
