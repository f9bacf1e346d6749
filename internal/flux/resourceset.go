package flux

// flux-operator's ResourceSets, rendered as its controller renders them:
// templates × inputs. flux-operator's builder is an internal package of
// an AGPL module that needs a newer Go than kplan's, so it cannot be
// imported; each rule below cites the source it encodes, in
// github.com/controlplaneio-fluxcd/flux-operator at tag v0.59.0, and the
// conformance cases in resourceset_test.go hold to them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"unicode"

	sprig "github.com/go-task/slim-sprig/v3"
	"github.com/gosimple/slug"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	// rsetOwnerGroup labels what a ResourceSet applies (api/v1
	// resourceset_types.go:23 GroupOwnerLabelResourceSet, set by
	// internal/controller/resourceset_controller.go:512 SetOwnerLabels).
	rsetOwnerGroup = "resourceset." + OperatorGroup
	// reconcileAnnotation "disabled" leaves an object out of the set
	// (internal/builder/resourceset.go:66 and :96).
	reconcileAnnotation = OperatorGroup + "/reconcile"
	// copyFromAnnotation makes the operator copy a ConfigMap's or
	// Secret's data from the cluster at apply time
	// (resourceset_controller.go:518 copyResources).
	copyFromAnnotation = OperatorGroup + "/copyFrom"
	// maxPermutations bounds the Permute strategy
	// (internal/inputs/permuter.go:14).
	maxPermutations = 10000
	// maxRSetDepth bounds ResourceSets making ResourceSets.
	maxRSetDepth = 4
	// slugMaxLength is the slugify function's limit, a label value's
	// (internal/builder/resourceset.go:303 init).
	slugMaxLength = 63
	// maxTemplateOutput and maxTemplateList bound what one template
	// execution may make: a ResourceSet comes with the change under
	// review, and `until 1000000000` must fail it, not the plan.
	maxTemplateOutput = 16 << 20
	maxTemplateList   = 100_000
)

// rsetKind and providerKind are flux-operator's kinds that make inputs.
const (
	rsetKind     = "ResourceSet"
	providerKind = "ResourceSetInputProvider"
)

// rsetResult is what the ResourceSets among a target's objects make.
type rsetResult struct {
	objects []*yaml.RNode
	// notes say what the plan cannot know offline (dependsOn, copyFrom,
	// a Static provider's id).
	notes []string
	// notRendered name each ResourceSet (or part of one) kplan does not
	// render, and why.
	notRendered []string
	copies      copySource
}

// isOperator says whether o is a flux-operator object of kind.
func isOperator(o *yaml.RNode, kind string) bool {
	g, _, _ := strings.Cut(o.GetApiVersion(), "/")
	return g == OperatorGroup && o.GetKind() == kind
}

// copySource is the data of the ConfigMap ns/name the cluster holds, as
// the plan knows it; ok false when it does not.
type copySource func(ns, name string) (data map[string]string, ok bool)

// resourceSets renders the ResourceSets among objs, and those they make
// (maxRSetDepth levels), with the input providers among objs and what
// they make; copies gives the ConfigMaps their copyFrom names (nil:
// none known).
func resourceSets(objs []*yaml.RNode, copies copySource) *rsetResult {
	out := &rsetResult{copies: copies}
	all := slices.Clone(objs)
	level := objs
	for depth := 0; len(level) > 0; depth++ {
		var next []*yaml.RNode
		for _, o := range level {
			if !isOperator(o, rsetKind) {
				continue
			}
			id := o.GetNamespace() + "/" + o.GetName()
			if depth == maxRSetDepth {
				out.notRendered = append(out.notRendered, fmt.Sprintf("ResourceSet %s is not rendered: more than %d levels of ResourceSets making ResourceSets", id, maxRSetDepth))
				continue
			}
			made, err := renderResourceSet(o, all, out)
			if err != nil {
				// flux-operator stalls the ResourceSet with this error and
				// applies nothing of it.
				out.notRendered = append(out.notRendered, fmt.Sprintf("ResourceSet %s is not rendered: flux-operator fails it: %v", id, err))
				continue
			}
			next = append(next, made...)
		}
		out.objects = append(out.objects, next...)
		all = append(all, next...)
		level = next
	}
	return out
}

// renderResourceSet is the objects the ResourceSet o makes.
func renderResourceSet(o *yaml.RNode, all []*yaml.RNode, out *rsetResult) ([]*yaml.RNode, error) {
	m, err := asMap(o)
	if err != nil {
		return nil, err
	}
	id := o.GetNamespace() + "/" + o.GetName()
	spec, _, _ := unstructured.NestedMap(m, "spec")
	if err := validateRSet(spec); err != nil {
		return nil, err
	}
	if deps, _, _ := unstructured.NestedSlice(spec, "dependsOn"); len(deps) > 0 {
		out.notes = append(out.notes, fmt.Sprintf("ResourceSet %s waits for %s before flux-operator applies what it makes", id, describeDeps(deps)))
	}
	providers, unknown, err := inputProviders(o, spec, all, usesID(spec), out)
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 && rsetStrategy(spec) == "Permute" {
		out.notRendered = append(out.notRendered, fmt.Sprintf("ResourceSet %s is not rendered: it permutes the inputs of %s, which kplan cannot know offline", id, strings.Join(unknown, ", ")))
		return nil, nil
	}
	for _, u := range unknown {
		out.notRendered = append(out.notRendered, fmt.Sprintf("ResourceSet %s: what it makes from the inputs of %s is not rendered (kplan plans it with its other inputs only)", id, u))
	}
	combined, err := combineInputs(o, spec, providers)
	if err != nil {
		return nil, err
	}
	inputsFrom, _, _ := unstructured.NestedSlice(spec, "inputsFrom")
	if len(inputsFrom) > 0 && len(combined) == 0 {
		// No inputs: flux-operator reconciles an empty set
		// (resourceset_controller.go:175).
		return nil, nil
	}
	objs, err := buildRSet(spec, combined)
	if err != nil {
		return nil, err
	}
	return finishRSet(o, spec, objs, out)
}

// validateRSet holds the spec to flux-operator's rules
// (internal/builder/resourceset.go:148 ValidateResourceSetSpec).
func validateRSet(spec map[string]any) error {
	steps, _, _ := unstructured.NestedSlice(spec, "steps")
	resources, _, _ := unstructured.NestedSlice(spec, "resources")
	tmpl, _, _ := unstructured.NestedString(spec, "resourcesTemplate")
	if len(steps) > 0 && (len(resources) > 0 || tmpl != "") {
		return errors.New("spec.steps is mutually exclusive with spec.resources and spec.resourcesTemplate")
	}
	for _, s := range steps {
		step, _ := s.(map[string]any)
		r, _, _ := unstructured.NestedSlice(step, "resources")
		t, _, _ := unstructured.NestedString(step, "resourcesTemplate")
		if len(r) == 0 && t == "" {
			name, _ := step["name"].(string)
			return fmt.Errorf("step %q: at least one of resources or resourcesTemplate must be set", name)
		}
	}
	return nil
}

// describeDeps names a ResourceSet's dependsOn entries.
func describeDeps(deps []any) string {
	var names []string
	for _, d := range deps {
		dm, _ := d.(map[string]any)
		kind, _ := dm["kind"].(string)
		name, _ := dm["name"].(string)
		ns, _ := dm["namespace"].(string)
		s := kind + " " + name
		if ns != "" {
			s = kind + " " + ns + "/" + name
		}
		if ready, _ := dm["ready"].(bool); ready {
			s += " (ready)"
		}
		names = append(names, s)
	}
	return strings.Join(names, ", ")
}

// provider is one input provider of a ResourceSet: the ResourceSet
// itself (its inline inputs) or a ResourceSetInputProvider.
type provider struct {
	apiVersion, kind, name, namespace string
	inputs                            []map[string]any
}

// inputProviders are the ResourceSetInputProviders o's inputsFrom
// selects among all, by name or label selector in o's namespace
// (resourceset_controller.go:394 getInputs), sorted as
// internal/inputs/provider.go:31 compareProviderKeys sorts them; unknown
// names those whose inputs kplan cannot know.
func inputProviders(o *yaml.RNode, spec map[string]any, all []*yaml.RNode, noteID bool, out *rsetResult) (providers []provider, unknown []string, err error) {
	refs, _, _ := unstructured.NestedSlice(spec, "inputsFrom")
	ns := o.GetNamespace()
	rsID := ns + "/" + o.GetName()
	seen := map[string]bool{}
	var found []*yaml.RNode
	add := func(p *yaml.RNode) {
		if key := p.GetApiVersion() + "/" + p.GetName(); !seen[key] {
			seen[key] = true
			found = append(found, p)
		}
	}
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		name, _ := ref["name"].(string)
		sel, hasSel := ref["selector"].(map[string]any)
		switch {
		case name != "":
			p := findProvider(all, ns, name)
			if p == nil {
				unknown = append(unknown, fmt.Sprintf("ResourceSetInputProvider %s/%s (not among the objects this Flux Kustomization applies: kplan cannot read it from the cluster)", ns, name))
				continue
			}
			add(p)
		case hasSel:
			var ls metav1.LabelSelector
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err != nil {
				return nil, nil, fmt.Errorf("failed to parse selector: %w", err)
			}
			s, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				return nil, nil, fmt.Errorf("failed to parse selector %v: %w", sel, err)
			}
			for _, p := range all {
				if isOperator(p, providerKind) && p.GetNamespace() == ns && s.Matches(labels.Set(p.GetLabels())) {
					add(p)
				}
			}
			out.notes = append(out.notes, fmt.Sprintf("ResourceSet %s selects its input providers by labels (%s): kplan selects among the objects this Flux Kustomization applies, not the cluster's", rsID, s))
		default:
			return nil, nil, errors.New("input provider reference must have either name or selector set")
		}
	}
	slices.SortFunc(found, func(a, b *yaml.RNode) int {
		return cmp3(a.GetApiVersion()+", Kind="+a.GetKind(), b.GetApiVersion()+", Kind="+b.GetKind(), a.GetNamespace(), b.GetNamespace(), a.GetName(), b.GetName())
	})
	for _, p := range found {
		pv, why, err := staticProvider(p, noteID, out)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			unknown = append(unknown, why)
			continue
		}
		providers = append(providers, pv)
	}
	return providers, unknown, nil
}

// cmp3 compares by three keys in turn.
func cmp3(a1, b1, a2, b2, a3, b3 string) int {
	if a1 != b1 {
		return strings.Compare(a1, b1)
	}
	if a2 != b2 {
		return strings.Compare(a2, b2)
	}
	return strings.Compare(a3, b3)
}

// findProvider is the ResourceSetInputProvider ns/name among all.
func findProvider(all []*yaml.RNode, ns, name string) *yaml.RNode {
	for _, p := range all {
		if isOperator(p, providerKind) && p.GetNamespace() == ns && p.GetName() == name {
			return p
		}
	}
	return nil
}

// staticProvider is the input a Static ResourceSetInputProvider exports:
// its defaultValues and an id
// (resourcesetinputprovider_controller.go:253); why says, for any other
// type, why kplan cannot know its inputs.
func staticProvider(p *yaml.RNode, noteID bool, out *rsetResult) (provider, string, error) {
	m, err := asMap(p)
	if err != nil {
		return provider{}, "", err
	}
	id := p.GetNamespace() + "/" + p.GetName()
	typ, _, _ := unstructured.NestedString(m, "spec", "type")
	if typ != "Static" {
		what := "an external service"
		if url, _, _ := unstructured.NestedString(m, "spec", "url"); url != "" {
			what = url
		}
		return provider{}, fmt.Sprintf("ResourceSetInputProvider %s (type %s: flux-operator asks %s for its inputs at run time, which kplan does not query)", id, typ, what), nil
	}
	defaults, _, _ := unstructured.NestedMap(m, "spec", "defaultValues")
	input, err := jsonRoundTrip(defaults)
	if err != nil {
		return provider{}, "", fmt.Errorf("ResourceSetInputProvider %s: defaultValues: %w", id, err)
	}
	if input == nil {
		input = map[string]any{}
	}
	// The id is the checksum of the object's UID, which the cluster
	// assigns: kplan uses its namespace/name in its place.
	input["id"] = inputID(id)
	if noteID {
		out.notes = append(out.notes, fmt.Sprintf("ResourceSetInputProvider %s: inputs.id is a checksum of the UID the cluster gives it; kplan plans it as %s (a checksum of %s)", id, input["id"], id))
	}
	return provider{apiVersion: p.GetApiVersion(), kind: providerKind, name: p.GetName(), namespace: p.GetNamespace(), inputs: []map[string]any{input}}, "", nil
}

// idRef finds a template reading an input set's id.
var idRef = regexp.MustCompile(`\.id\b`)

// usesID says whether the ResourceSet's templates may read inputs.id.
func usesID(spec map[string]any) bool {
	data, _ := json.Marshal([]any{spec["resources"], spec["resourcesTemplate"], spec["steps"]})
	return idRef.Match(data)
}

// jsonRoundTrip gives v as JSON decoding gives it (numbers as float64),
// as flux-operator reads inputs stored as JSON (api/v1
// resourceset_types.go:353 GetInputs).
func jsonRoundTrip(v map[string]any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// inputID is flux-operator's short id of an input set
// (internal/inputs/id.go:12 ID).
func inputID(s string) string {
	return fmt.Sprintf("%v", adler32.Checksum([]byte(s)))
}

// rsetStrategy is spec.inputStrategy.name, Flatten by default (api/v1
// resourceset_types.go:128 GetInputStrategy).
func rsetStrategy(spec map[string]any) string {
	s, _, _ := unstructured.NestedString(spec, "inputStrategy", "name")
	if s == "" {
		return "Flatten"
	}
	return s
}

// combineInputs combines the ResourceSet's inline inputs (the first
// provider) and its providers' as its strategy says
// (internal/inputs/combine.go:35 Combine), each input annotated with
// its provider (provider.go:44 getFromProvider).
func combineInputs(o *yaml.RNode, spec map[string]any, providers []provider) ([]map[string]any, error) {
	inline, _, _ := unstructured.NestedSlice(spec, "inputs")
	self := provider{apiVersion: o.GetApiVersion(), kind: rsetKind, name: o.GetName(), namespace: o.GetNamespace()}
	for i, in := range inline {
		im, ok := in.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("failed to get inputs from ResourceSet/%s: failed to unmarshal inputs[%d]: not an object", o.GetName(), i)
		}
		v, err := jsonRoundTrip(im)
		if err != nil {
			return nil, fmt.Errorf("failed to get inputs from ResourceSet/%s: failed to unmarshal inputs[%d]: %w", o.GetName(), i, err)
		}
		if v == nil {
			v = map[string]any{}
		}
		self.inputs = append(self.inputs, v)
	}
	all := append([]provider{self}, providers...)
	for _, p := range all {
		for _, in := range p.inputs {
			in["provider"] = map[string]any{"apiVersion": p.apiVersion, "kind": p.kind, "name": p.name, "namespace": p.namespace}
		}
	}
	switch s := rsetStrategy(spec); s {
	case "Flatten":
		// internal/inputs/flattener.go:19: concatenated.
		var out []map[string]any
		for _, p := range all {
			out = append(out, p.inputs...)
		}
		return out, nil
	case "Permute":
		includeEmpty, _, _ := unstructured.NestedBool(spec, "inputStrategy", "includeEmptyProviders")
		return permute(all, includeEmpty)
	default:
		return nil, fmt.Errorf("unknown input strategy: '%s'", s)
	}
}

// permute is the Cartesian product of the providers' inputs, each
// scoped under its provider's normalized name, with an id naming the
// combination (internal/inputs/permuter.go:52 AddProvider, :195
// collectPermutation); providers with no inputs are left out unless
// includeEmpty.
func permute(all []provider, includeEmpty bool) ([]map[string]any, error) {
	type scoped struct {
		name   string
		inputs []map[string]any
	}
	var ps []scoped
	total := uint64(0)
	for _, p := range all {
		if !includeEmpty && len(p.inputs) == 0 {
			continue
		}
		if len(ps) == 0 {
			total = uint64(len(p.inputs))
		} else {
			total *= uint64(len(p.inputs))
		}
		if total > maxPermutations {
			return nil, fmt.Errorf("adding provider '%s' with %d inputs would exceed the maximum allowed permutations. max: %d, got: %d", p.name, len(p.inputs), maxPermutations, total)
		}
		n := normalizeKey(p.name)
		if n == "" {
			return nil, fmt.Errorf("normalized provider name is empty: '%s'", p.name)
		}
		ps = append(ps, scoped{name: n, inputs: p.inputs})
	}
	if len(ps) == 0 {
		return nil, nil
	}
	for _, p := range ps {
		if len(p.inputs) == 0 {
			return nil, nil
		}
	}
	var out []map[string]any
	idx := make([]int, len(ps))
	for {
		perm := map[string]any{}
		parts := make([]string, len(ps))
		for i, p := range ps {
			perm[p.name] = p.inputs[idx[i]]
			parts[i] = fmt.Sprintf("%s=%d", p.name, idx[i])
		}
		perm["id"] = inputID(strings.Join(parts, "/"))
		out = append(out, perm)
		// Next combination, the last provider fastest (as the
		// backtracking of permuter.go:112 enumerates them).
		i := len(ps) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(ps[i].inputs) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out, nil
		}
	}
}

// normalizeKey is a provider name as a template key
// (internal/inputs/keys.go:26 NormalizeKeyForTemplate).
func normalizeKey(key string) string {
	key = strings.Map(func(r rune) rune {
		r = unicode.ToLower(r)
		if unicode.IsSpace(r) || unicode.IsPunct(r) {
			return '_'
		}
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			return r
		}
		return -1
	}, key)
	var words []string
	for w := range strings.SplitSeq(key, "_") {
		if w != "" {
			words = append(words, w)
		}
	}
	return strings.Join(words, "_")
}

// buildRSet builds the spec's objects, step by step when it has steps
// (internal/builder/resourceset.go:165 BuildResourceSetFromSpec).
func buildRSet(spec map[string]any, combined []map[string]any) ([]*unstructured.Unstructured, error) {
	steps, _, _ := unstructured.NestedSlice(spec, "steps")
	if len(steps) == 0 {
		resources, _, _ := unstructured.NestedSlice(spec, "resources")
		tmpl, _, _ := unstructured.NestedString(spec, "resourcesTemplate")
		return buildSet(tmpl, resources, combined)
	}
	var all []*unstructured.Unstructured
	stepOf := map[string]string{}
	for _, s := range steps {
		step, _ := s.(map[string]any)
		name, _ := step["name"].(string)
		resources, _, _ := unstructured.NestedSlice(step, "resources")
		tmpl, _, _ := unstructured.NestedString(step, "resourcesTemplate")
		objs, err := buildSet(tmpl, resources, combined)
		if err != nil {
			return nil, fmt.Errorf("step %q: %w", name, err)
		}
		// A resource of two steps fails the set (resourceset.go:206).
		for _, obj := range objs {
			key := objectKey(obj)
			if prev, ok := stepOf[key]; ok && prev != name {
				return nil, fmt.Errorf("duplicate resource %s/%s/%s in step %q, already defined in step %q", obj.GetKind(), obj.GetNamespace(), obj.GetName(), name, prev)
			}
			stepOf[key] = name
		}
		all = append(all, objs...)
	}
	return all, nil
}

// buildSet builds resources (each a template of one object) and the
// multi-document template tmpl for each input set, the first object of
// a key kept and those annotated reconcile: disabled left out
// (internal/builder/resourceset.go:31 BuildResourceSet).
func buildSet(tmpl string, resources []any, combined []map[string]any) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	keys := map[string]bool{}
	add := func(o *unstructured.Unstructured, dedup bool) {
		key := objectKey(o)
		if dedup && keys[key] {
			return
		}
		keys[key] = true
		objs = append(objs, o)
	}
	disabled := func(o *unstructured.Unstructured) bool {
		return o.GetAnnotations()[reconcileAnnotation] == "disabled"
	}
	for i, r := range resources {
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("failed to build resources[%d]: %w", i, err)
		}
		if len(combined) == 0 {
			o, err := buildResource(raw, nil)
			if err != nil {
				return nil, fmt.Errorf("failed to build resource: %w", err)
			}
			add(o, false)
			continue
		}
		for _, in := range combined {
			o, err := buildResource(raw, in)
			if err != nil {
				return nil, fmt.Errorf("failed to build resources[%d]: %w", i, err)
			}
			if !disabled(o) {
				add(o, true)
			}
		}
	}
	if tmpl == "" {
		return objs, nil
	}
	var fromTmpl []*unstructured.Unstructured
	sets := combined
	if len(sets) == 0 {
		sets = []map[string]any{nil}
	}
	for _, in := range sets {
		os, err := buildFromYAML(tmpl, in)
		if err != nil {
			if len(combined) == 0 {
				return nil, fmt.Errorf("failed to build resource: %w", err)
			}
			return nil, fmt.Errorf("failed to build resources: %w", err)
		}
		fromTmpl = append(fromTmpl, os...)
	}
	for _, o := range fromTmpl {
		if !disabled(o) {
			add(o, true)
		}
	}
	return objs, nil
}

// objectKey is an object's identity on the cluster: group, kind,
// namespace, name (resourceset.go:293 objectKey).
func objectKey(o *unstructured.Unstructured) string {
	return strings.Join([]string{o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName()}, "/")
}

// buildResource renders one resource template (JSON, as the API server
// stores it, turned into YAML) with an input set
// (resourceset.go:226 BuildResource).
func buildResource(raw []byte, in map[string]any) (*unstructured.Unstructured, error) {
	text, err := sigsyaml.JSONToYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to convert template to YAML: %w", err)
	}
	t, err := newRSetTemplate(string(text), in)
	if err != nil {
		return nil, fmt.Errorf("failed to parse template: %w", err)
	}
	var b limitedWriter
	if err := t.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("failed to execute template: %w", err)
	}
	o := &unstructured.Unstructured{}
	if err := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(b.String()), 2048).Decode(o); err != nil {
		return nil, fmt.Errorf("failed to read object: %w", err)
	}
	return o, nil
}

// buildFromYAML renders a multi-document template with an input set and
// reads its objects as fluxcd/pkg/ssa's ReadObjects does (ssa v0.61.0
// utils/object.go:44): lists unwrapped, documents that are no
// Kubernetes object (no apiVersion, kind or name) and kustomize
// Kustomizations dropped.
func buildFromYAML(tmpl string, in map[string]any) ([]*unstructured.Unstructured, error) {
	t, err := newRSetTemplate(tmpl, in)
	if err != nil {
		return nil, fmt.Errorf("failed to parse multi-doc YAML template: %w", err)
	}
	var b limitedWriter
	if err := t.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("failed to execute multi-doc YAML template: %w", err)
	}
	dec := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(b.String()), 2048)
	var objs []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(o); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("failed to read objects from multi-doc YAML: %w", err)
		}
		if o.IsList() {
			err := o.EachListItem(func(item runtime.Object) error {
				if u, ok := item.(*unstructured.Unstructured); ok {
					objs = append(objs, u)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("failed to read objects from multi-doc YAML: %w", err)
			}
			continue
		}
		isKustomize := strings.ToLower(o.GetKind()) == "kustomization" && strings.HasPrefix(o.GetAPIVersion(), "kustomize.config.k8s.io/")
		if o.GetName() != "" && o.GetKind() != "" && o.GetAPIVersion() != "" && !isKustomize {
			objs = append(objs, o)
		}
	}
}

// newRSetTemplate is flux-operator's template: delimiters << >>,
// slim-sprig's hermetic functions, slugify, inputs, toYaml, mustToYaml,
// and an error on a missing key (resourceset.go:273 newTemplate).
func newRSetTemplate(text string, in map[string]any) (*template.Template, error) {
	return template.New("resourceset").
		Delims("<<", ">>").
		Funcs(sprig.HermeticTxtFuncMap()).
		Funcs(boundedFuncs()).
		Funcs(template.FuncMap{"slugify": slugify}).
		Funcs(template.FuncMap{"inputs": func() any { return in }}).
		Funcs(template.FuncMap{"toYaml": toYaml, "mustToYaml": mustToYaml}).
		Option("missingkey=error").
		Parse(text)
}

// boundedFuncs are slim-sprig's functions that make a list or a string
// of a size the template gives, refusing sizes past kplan's bounds
// (kplan's, not flux-operator's: the operator would exhaust its memory).
func boundedFuncs() template.FuncMap {
	fm := sprig.HermeticTxtFuncMap()
	until, _ := fm["until"].(func(int) []int)
	untilStep, _ := fm["untilStep"].(func(int, int, int) []int)
	seq, _ := fm["seq"].(func(...int) string)
	tooMany := func(n int) error {
		return fmt.Errorf("a list of %d items: kplan renders at most %d", n, maxTemplateList)
	}
	span := func(a, b int) int {
		if a > b {
			a, b = b, a
		}
		return b - a
	}
	return template.FuncMap{
		"until": func(n int) ([]int, error) {
			if span(0, n) > maxTemplateList {
				return nil, tooMany(n)
			}
			return until(n), nil
		},
		"untilStep": func(start, stop, step int) ([]int, error) {
			if step != 0 && span(start, stop)/span(0, step) > maxTemplateList {
				return nil, tooMany(span(start, stop) / span(0, step))
			}
			return untilStep(start, stop, step), nil
		},
		"seq": func(params ...int) (string, error) {
			for _, a := range params {
				for _, b := range params {
					if span(a, b) > maxTemplateList || span(0, a) > maxTemplateList {
						return "", tooMany(span(a, b))
					}
				}
			}
			return seq(params...), nil
		},
		"repeat": func(count int, str string) (string, error) {
			if count > 0 && len(str) > 0 && count > maxTemplateOutput/len(str) {
				return "", fmt.Errorf("a string of %d × %d bytes: kplan renders at most %d", count, len(str), maxTemplateOutput)
			}
			return strings.Repeat(str, max(count, 0)), nil
		},
	}
}

// limitedWriter fails a template whose output passes maxTemplateOutput.
type limitedWriter struct{ strings.Builder }

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > maxTemplateOutput {
		return 0, fmt.Errorf("the template makes more than %d bytes", maxTemplateOutput)
	}
	return w.Builder.Write(p)
}

// slugify is gosimple/slug's Make with flux-operator's settings: at most
// 63 characters, cut at a dash (resourceset.go:303 init sets
// slug.MaxLength and slug.EnableSmartTruncate; kplan cuts here instead
// of setting the library's globals: slug v1.15.0 slug.go:186
// smartTruncate, the last step of MakeLang).
func slugify(s string) string {
	text := slug.Make(s)
	if len(text) <= slugMaxLength {
		return text
	}
	for i := slugMaxLength; i >= 0; i-- {
		if text[i] == '-' {
			return text[:i]
		}
	}
	return text[:slugMaxLength]
}

// toYaml is an input value as YAML, "" when it cannot be
// (resourceset.go:313 toYaml).
func toYaml(v any) string {
	s, err := mustToYaml(v)
	if err != nil {
		return ""
	}
	return s
}

func mustToYaml(v any) (string, error) {
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// finishRSet is what flux-operator applies of objs: owner labels, then
// commonMetadata (resourceset_controller.go:512-515), as kyaml nodes.
func finishRSet(o *yaml.RNode, spec map[string]any, objs []*unstructured.Unstructured, out *rsetResult) ([]*yaml.RNode, error) {
	cl, _, _ := unstructured.NestedStringMap(spec, "commonMetadata", "labels")
	ca, _, _ := unstructured.NestedStringMap(spec, "commonMetadata", "annotations")
	id := o.GetNamespace() + "/" + o.GetName()
	var nodes []*yaml.RNode
	for _, obj := range objs {
		if obj.GetName() == "" || obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			// The operator's apply refuses it, and applies nothing.
			return nil, fmt.Errorf("a resource without apiVersion, kind or name")
		}
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[rsetOwnerGroup+"/name"] = o.GetName()
		l[rsetOwnerGroup+"/namespace"] = o.GetNamespace()
		maps.Copy(l, cl)
		obj.SetLabels(l)
		if len(ca) > 0 {
			a := obj.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			maps.Copy(a, ca)
			obj.SetAnnotations(a)
		}
		if from := obj.GetAnnotations()[copyFromAnnotation]; from != "" && obj.GetAPIVersion() == "v1" {
			out.copyFrom(id, obj, from)
		}
		n, err := yaml.FromMap(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// copyFrom gives a ConfigMap the data of the one its copyFrom names, as
// flux-operator does when it applies it (internal/copier/resources.go:48,
// v0.59.0: data replaced by the source's), from what the plan knows the
// cluster holds; a Secret's values, and a ConfigMap the plan does not
// know, are noted instead.
func (out *rsetResult) copyFrom(id string, obj *unstructured.Unstructured, from string) {
	ns, name, ok := strings.Cut(from, "/")
	what := fmt.Sprintf("ResourceSet %s: %s %s/%s copies its data from %s in the cluster when applied", id, obj.GetKind(), obj.GetNamespace(), obj.GetName(), from)
	if obj.GetKind() == "ConfigMap" && ok && out.copies != nil {
		if data, found := out.copies(ns, name); found {
			if err := unstructured.SetNestedStringMap(obj.Object, data, "data"); err == nil {
				out.notes = append(out.notes, what+"; kplan plans it with the data the repository gives that ConfigMap")
				return
			}
		}
	}
	out.notes = append(out.notes, what+"; kplan plans it as written")
}
