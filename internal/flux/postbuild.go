package flux

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/envsubst"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Owner labels kustomize-controller (and `flux build kustomization`) puts
// on every object a Kustomization applies.
const (
	LabelName      = Group + "/name"
	LabelNamespace = Group + "/namespace"
)

// varSource is a ConfigMap or Secret postBuild.substituteFrom can name,
// as the repository defines it.
type varSource struct {
	values map[string]string
	secret bool
	// unknown says why the values cannot be known offline (a SOPS
	// encrypted Secret).
	unknown string
	from    string // ID of the Flux Kustomization that applies it
}

// varPool holds the ConfigMaps and Secrets the repository's Flux
// Kustomizations apply, by kind/namespace/name.
type varPool map[string]*varSource

func poolKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// add records the ConfigMaps and Secrets among objs, applied by target id.
func (p varPool) add(id string, objs []*yaml.RNode) {
	for _, o := range objs {
		kind := o.GetKind()
		if o.GetApiVersion() != "v1" || (kind != "ConfigMap" && kind != "Secret") {
			continue
		}
		vs := &varSource{values: map[string]string{}, secret: kind == "Secret", from: id}
		if kind == "Secret" {
			if sops, _ := o.Pipe(yaml.Lookup("sops")); sops != nil {
				vs.unknown = "it is SOPS-encrypted"
			}
			for k, v := range o.GetDataMap() {
				dec, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					vs.unknown = fmt.Sprintf("its data key %s is not base64", k)
					continue
				}
				vs.values[k] = string(dec)
			}
			if sd, _ := o.Pipe(yaml.Lookup("stringData")); sd != nil {
				_ = sd.VisitFields(func(n *yaml.MapNode) error {
					vs.values[n.Key.YNode().Value] = n.Value.YNode().Value
					return nil
				})
			}
		} else {
			maps.Copy(vs.values, o.GetDataMap())
		}
		p[poolKey(kind, o.GetNamespace(), o.GetName())] = vs
	}
}

// configMap is the data of the ConfigMap ns/name the pool holds.
func (p varPool) configMap(ns, name string) (map[string]string, bool) {
	vs, ok := p[poolKey("ConfigMap", ns, name)]
	if !ok || vs.secret || vs.unknown != "" {
		return nil, false
	}
	return maps.Clone(vs.values), true
}

// configMapsKey names every ConfigMap the pool holds, with its data: what
// a ResourceSet's copyFrom may read.
func (p varPool) configMapsKey() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if vs := p[k]; !vs.secret && strings.HasPrefix(k, "ConfigMap/") {
			fmt.Fprintf(&b, "%s=%q;", k, slices.Sorted(maps.Keys(vs.values)))
			for _, vk := range slices.Sorted(maps.Keys(vs.values)) {
				fmt.Fprintf(&b, "%q=%q;", vk, vs.values[vk])
			}
		}
	}
	return b.String()
}

// key names the variables k's substituteFrom resolves to, for comparing
// two sides without substituting.
func (p varPool) key(k *Kustomization) string {
	raw, _, _ := unstructured.NestedSlice(k.Object, "spec", "postBuild", "substituteFrom")
	var b strings.Builder
	for _, r := range raw {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		vs := p[poolKey(kind, k.Namespace, name)]
		fmt.Fprintf(&b, "%s/%s=", kind, name)
		if vs != nil {
			// Which target applies it is in the closure; whether it is a
			// Secret, in the masking.
			fmt.Fprintf(&b, "%q,%v,", vs.from, vs.secret)
			for _, n := range slices.Sorted(maps.Keys(vs.values)) {
				fmt.Fprintf(&b, "%q:%q,", n, vs.values[n])
			}
			b.WriteString(vs.unknown)
		}
		b.WriteString(";")
	}
	return b.String()
}

// substituteNames are the names of the ConfigMaps and Secrets any of
// the declared Kustomizations substitutes from.
func substituteNames(declared []Declared) []string {
	set := map[string]bool{}
	for _, d := range declared {
		raw, _, _ := unstructured.NestedSlice(d.Object, "spec", "postBuild", "substituteFrom")
		for _, r := range raw {
			if m, ok := r.(map[string]any); ok {
				if name, _ := m["name"].(string); name != "" {
					set[name] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// mayName says whether one of the files at paths may define one of the
// named objects: it holds the name (a generator's file, an env file,
// YAML). The files are read in one go: a target builds from many.
func mayName(ctx context.Context, s *snapshot.Snapshot, paths []string, names []string) bool {
	if len(names) == 0 {
		return false
	}
	contents, err := s.ReadFiles(ctx, paths)
	if err != nil {
		return true
	}
	for _, data := range contents {
		if data == nil { // too large to read: it may
			return true
		}
		for _, n := range names {
			if bytes.Contains(data, []byte(n)) {
				return true
			}
		}
	}
	return false
}

// postBuilt is a build after Flux's post-build steps.
type postBuilt struct {
	objects []*yaml.RNode
	notes   []string
	// reads are the IDs of the Flux Kustomizations whose objects the
	// substitution read (for the closure).
	reads []string
	// twin is the substitution made with a token in place of each Secret
	// variable's value (nil without Secret variables), for masking.
	twin   []*yaml.RNode
	tokens *secretTokens
}

// postBuild applies what kustomize-controller does to a build's objects
// before applying them, in its order: postBuild substitution (each
// object, unless labelled or annotated kustomize.toolkit.fluxcd.io/
// substitute: disabled), commonMetadata, then its owner labels.
//
// substituteFrom is read from the repository's own ConfigMaps and
// Secrets (pool). A missing optional one is skipped as Flux skips it; a
// missing required one, or a Secret whose values are encrypted, cannot
// be known offline: its variables are then left as written, and a note
// says so (Flux would fail, or use the cluster's copy). What the values
// of Secrets make is masked in the output (maskSecretFields): a plan
// never prints them, nor anything Flux's YAML re-parse makes of them.
func postBuild(ctx context.Context, k *Kustomization, objs []*yaml.RNode, pool varPool) (*postBuilt, error) {
	out := &postBuilt{objects: objs}
	if pb, ok, _ := unstructured.NestedMap(k.Object, "spec", "postBuild"); ok && pb != nil {
		if err := out.substitute(ctx, k, pool); err != nil {
			return nil, err
		}
	}
	objs, err := decodeAsFlux(out.objects)
	if out.twin != nil {
		// The real objects' errors may quote what the Secrets' values
		// made; the twin's are the same steps without them.
		twin, terr := decodeAsFlux(out.twin)
		switch {
		case err != nil && terr != nil:
			return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), out.tokens.hideErr(k.ID(), terr))
		case err != nil:
			return nil, out.tokens.hideErr(k.ID(), nil)
		case terr != nil:
			return nil, out.tokens.cannotTell(k.ID(), terr)
		}
		objs = out.tokens.maskSecretFields(objs, twin)
		out.twin = nil
	}
	if err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
	}
	out.objects = objs
	labels, _, _ := unstructured.NestedStringMap(k.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(k.Object, "spec", "commonMetadata", "annotations")
	for _, o := range out.objects {
		l := o.GetLabels()
		maps.Copy(l, labels)
		l[LabelName] = k.Name
		l[LabelNamespace] = k.Namespace
		if err := o.SetLabels(l); err != nil {
			return nil, fmt.Errorf("Flux Kustomization %s: label %s %s: %w", k.ID(), o.GetKind(), o.GetName(), err)
		}
		if len(annotations) > 0 {
			a := o.GetAnnotations()
			maps.Copy(a, annotations)
			if err := o.SetAnnotations(a); err != nil {
				return nil, fmt.Errorf("Flux Kustomization %s: annotate %s %s: %w", k.ID(), o.GetKind(), o.GetName(), err)
			}
		}
	}
	return out, nil
}

// decodeAsFlux reads objects back as kustomize-controller reads its
// build before applying it (ssautil.ReadObjects): printed as YAML and
// decoded by Kubernetes' YAML decoder. The decoders differ on some
// scalars (a folded block with more-indented lines gains a blank line),
// and the cluster gets what Flux's decoder made.
func decodeAsFlux(objs []*yaml.RNode) ([]*yaml.RNode, error) {
	out := make([]*yaml.RNode, 0, len(objs))
	for _, o := range objs {
		s, err := o.String()
		if err != nil {
			return nil, fmt.Errorf("print %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		var u unstructured.Unstructured
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 2048).Decode(&u); err != nil {
			return nil, fmt.Errorf("decode %s %s as Flux does: %w", o.GetKind(), o.GetName(), err)
		}
		n, err := yaml.FromMap(u.Object)
		if err != nil {
			return nil, fmt.Errorf("decode %s %s as Flux does: %w", o.GetKind(), o.GetName(), err)
		}
		out = append(out, n)
	}
	return out, nil
}

type substituteRef struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

func (out *postBuilt) substitute(ctx context.Context, k *Kustomization, pool varPool) error {
	var refs []substituteRef
	if raw, ok, _ := unstructured.NestedSlice(k.Object, "spec", "postBuild", "substituteFrom"); ok {
		for i, r := range raw {
			m, ok := r.(map[string]any)
			var ref substituteRef
			if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ref) != nil {
				return fmt.Errorf("Flux Kustomization %s: spec.postBuild.substituteFrom[%d] is not a reference", k.ID(), i)
			}
			refs = append(refs, ref)
		}
	}
	vars := map[string]string{}
	secrets := map[string]string{} // var name -> value, to mask
	from := map[string]string{}    // var name -> its Secret's key (secretSource)
	var unknown []string
	for _, ref := range refs {
		vs, ok := pool[poolKey(ref.Kind, k.Namespace, ref.Name)]
		switch {
		case !ok && ref.Optional:
			continue
		case !ok:
			unknown = append(unknown, fmt.Sprintf("%s %s/%s is not in the repository", ref.Kind, k.Namespace, ref.Name))
			continue
		case vs.unknown != "":
			unknown = append(unknown, fmt.Sprintf("%s %s/%s: %s", ref.Kind, k.Namespace, ref.Name, vs.unknown))
		}
		out.reads = append(out.reads, vs.from)
		for name, v := range vs.values {
			vars[name] = strings.ReplaceAll(v, "\n", "")
			if vs.secret {
				secrets[name] = vars[name]
				from[name] = secretSource(k.Namespace, ref.Name, name)
			} else {
				delete(secrets, name)
			}
		}
	}
	inline, _, _ := unstructured.NestedStringMap(k.Object, "spec", "postBuild", "substitute")
	for name, v := range inline {
		vars[name] = strings.ReplaceAll(v, "\n", "")
		delete(secrets, name)
	}
	if len(unknown) > 0 {
		out.notes = append(out.notes, fmt.Sprintf("substituteFrom %s: its variables are left as written", strings.Join(unknown, "; ")))
	}
	strategy, _, _ := unstructured.NestedString(k.Object, "spec", "postBuild", "substituteStrategy")
	objs := out.objects
	real, err := substituteAll(ctx, k, objs, vars, len(unknown) > 0, strategy == "Always")
	if len(secrets) == 0 {
		if err != nil {
			return err
		}
		out.objects = real
		return nil
	}
	// The same substitution with a token for each Secret variable's
	// value: what it makes holds no Secret's text, and says where the
	// values went (maskSecretFields).
	out.tokens = newSecretTokens(objs, vars, secrets, func(name string) string { return from[name] })
	twinVars := maps.Clone(vars)
	for name := range secrets {
		twinVars[name] = out.tokens.token[name]
	}
	twin, terr := substituteAll(ctx, k, objs, twinVars, len(unknown) > 0, strategy == "Always")
	switch {
	case err != nil:
		return out.tokens.hideErr(k.ID(), terr)
	case terr != nil:
		return out.tokens.cannotTell(k.ID(), terr)
	}
	out.objects, out.twin = real, twin
	return nil
}

// substituteAll is Flux's substitution of vars in copies of objs: its
// own (SubstituteVariables), or substituteKnown when some variables
// cannot be known.
func substituteAll(ctx context.Context, k *Kustomization, objs []*yaml.RNode, vars map[string]string, someUnknown, always bool) ([]*yaml.RNode, error) {
	// Flux's own substitution, given the variables as inline ones: dry
	// run skips its cluster lookups, and inline ones are all it reads.
	obj := runtime.DeepCopyJSON(k.Object)
	pbMap, _, _ := unstructured.NestedMap(obj, "spec", "postBuild")
	delete(pbMap, "substituteFrom")
	sub := map[string]any{}
	for name, v := range vars {
		sub[name] = v
	}
	pbMap["substitute"] = sub
	if err := unstructured.SetNestedMap(obj, pbMap, "spec", "postBuild"); err != nil {
		return nil, fmt.Errorf("Flux Kustomization %s: %w", k.ID(), err)
	}
	ks := unstructured.Unstructured{Object: obj}
	out := make([]*yaml.RNode, len(objs))
	for i, o := range objs {
		out[i] = o
		res := &resource.Resource{RNode: *o.Copy()}
		var err error
		if !someUnknown {
			var got *resource.Resource
			// Always substitutes even without variables (defaults like ${X:=y}).
			got, err = fluxkustomize.SubstituteVariables(ctx, nil, ks, res, fluxkustomize.SubstituteWithDryRun(true),
				fluxkustomize.SubstituteWithAlways(always))
			if got == nil && err == nil {
				continue // substitution disabled on this object
			}
		} else {
			err = substituteKnown(res, vars)
		}
		if err != nil {
			return nil, fmt.Errorf("Flux Kustomization %s: postBuild substitution in %s %s: %w", k.ID(), o.GetKind(), o.GetName(), err)
		}
		out[i] = &res.RNode
	}
	return out, nil
}

var varName = regexp.MustCompile(`^[_[:alpha:]][_[:alpha:][:digit:]]*$`)

// protectUnknown replaces each expression of a variable not in vars
// (${X}, and ${X:=default}, ${X^^}, a default holding expressions: the
// unknown source may set X) with a placeholder envsubst leaves alone, and
// returns the replacer putting the expressions back as written. A run of
// dollars before "{" is escaped dollars but for an odd last one.
func protectUnknown(text string, vars map[string]string) (string, *strings.Replacer) {
	var out strings.Builder
	var back []string
	i := 0
	for i < len(text) {
		j := strings.IndexByte(text[i:], '$')
		if j < 0 {
			break
		}
		j += i
		k := j
		for k < len(text) && text[k] == '$' {
			k++
		}
		name := ""
		if (k-j)%2 == 1 && k < len(text) && text[k] == '{' {
			name = leadingName(text[k+1:])
		}
		end := -1
		if _, known := vars[name]; name != "" && !known {
			end = closing(text, k)
		}
		if end < 0 {
			out.WriteString(text[i:k])
			i = k
			continue
		}
		ph := fmt.Sprintf("kplanunknownvariable%dx", len(back)/2+1)
		for strings.Contains(text, ph) {
			ph += "x"
		}
		out.WriteString(text[i : k-1])
		out.WriteString(ph)
		back = append(back, ph, text[k-1:end+1])
		i = end + 1
	}
	out.WriteString(text[i:])
	return out.String(), strings.NewReplacer(back...)
}

// leadingName is the variable name s starts with, "" if none.
func leadingName(s string) string {
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || n > 0 && s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n]
}

// closing is the index of the "}" closing the "{" at open, -1 if none.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// substituteKnown is Flux's substitution when some variables cannot be
// known: the known ones are replaced with the same envsubst, the others
// left as written.
func substituteKnown(res *resource.Resource, vars map[string]string) error {
	if res.GetLabels()["kustomize.toolkit.fluxcd.io/substitute"] == "disabled" || res.GetAnnotations()["kustomize.toolkit.fluxcd.io/substitute"] == "disabled" {
		return nil
	}
	for v := range vars {
		if !varName.MatchString(v) {
			return fmt.Errorf("'%s' var name is invalid, must match '%s'", v, varName)
		}
	}
	data, err := res.AsYAML()
	if err != nil {
		return err
	}
	text, unknown := protectUnknown(string(data), vars)
	s, err := envsubst.Eval(text, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	if err != nil {
		return fmt.Errorf("variable substitution failed: %w", err)
	}
	s = unknown.Replace(s)
	j, err := sigsyaml.YAMLToJSON([]byte(s))
	if err != nil {
		return fmt.Errorf("YAMLToJSON: %w", err)
	}
	return res.UnmarshalJSON(j)
}
