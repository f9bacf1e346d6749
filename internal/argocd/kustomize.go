package argocd

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// edit writes an Application's kustomize: settings into the
// kustomization data (file names it in errors), as the repo server's
// `kustomize edit` calls (set nameprefix, namesuffix, namespace, image,
// replicas; add label, annotation, component) and its direct append of
// patches do. exists says whether a component path exists. env expands
// $ARGOCD_APP_* in images, labels and annotations, as Argo CD does.
func edit(data []byte, file string, k *Kustomize, exists func(string) bool, env map[string]string) ([]byte, error) {
	var m map[string]any
	if err := sigsyaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	if k.NamePrefix != "" {
		m["namePrefix"] = k.NamePrefix
	}
	if k.NameSuffix != "" {
		m["nameSuffix"] = k.NameSuffix
	}
	if k.Namespace != "" {
		m["namespace"] = k.Namespace
	}
	for _, img := range k.Images {
		if err := setImage(m, envsubst(img, env)); err != nil {
			return nil, fmt.Errorf("kustomize.images %q: %w", img, err)
		}
	}
	if len(k.CommonLabels) > 0 {
		// Label values are always expanded; annotation values only with
		// commonAnnotationsEnvsubst (util/kustomize/kustomize.go:221-262
		// at 37ee0097cf).
		labels := map[string]string{}
		for key, v := range k.CommonLabels {
			labels[key] = envsubst(v, env)
		}
		switch {
		case k.LabelIncludeTemplates && !k.LabelWithoutSelector:
			// kustomize edit add label refuses the flag alone, and the
			// repo server fails the Application with it.
			return nil, errors.New("kustomize.labelIncludeTemplates needs labelWithoutSelector (kustomize edit add label: --without-selector flag must be specified for --include-templates to work)")
		case k.LabelWithoutSelector:
			if err := addLabelsWithoutSelector(m, labels, k.LabelIncludeTemplates, k.ForceCommonLabels); err != nil {
				return nil, err
			}
		default:
			if err := addPairs(m, "commonLabels", "label", labels, k.ForceCommonLabels); err != nil {
				return nil, err
			}
		}
	}
	if len(k.CommonAnnotations) > 0 {
		ann := k.CommonAnnotations
		if k.CommonAnnotationsEnvsubst {
			ann = map[string]string{}
			for key, v := range k.CommonAnnotations {
				ann[key] = envsubst(v, env)
			}
		}
		if err := addPairs(m, "commonAnnotations", "annotation", ann, k.ForceCommonAnnotations); err != nil {
			return nil, err
		}
	}
	for _, r := range k.Replicas {
		n, err := count(r.Count)
		if err != nil {
			return nil, fmt.Errorf("kustomize.replicas %s: %w", r.Name, err)
		}
		list, _ := m["replicas"].([]any)
		i := slices.IndexFunc(list, func(e any) bool { e2, _ := e.(map[string]any); return e2["name"] == r.Name })
		entry := map[string]any{"name": r.Name, "count": n}
		if i >= 0 {
			list[i] = entry
		} else {
			list = append(list, entry)
		}
		m["replicas"] = list
	}
	if len(k.Patches) > 0 {
		list, _ := m["patches"].([]any)
		for _, p := range k.Patches {
			list = append(list, p)
		}
		m["patches"] = list
	}
	for _, c := range k.Components {
		if !exists(c) {
			if k.IgnoreMissingComponents {
				continue
			}
			return nil, fmt.Errorf("kustomize.components: %s does not exist (kustomize edit add component fails; ignoreMissingComponents skips it)", c)
		}
		list, _ := m["components"].([]any)
		if !slices.Contains(list, any(c)) {
			m["components"] = append(list, c)
		}
	}
	out, err := sigsyaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// addPairs is kustomize edit add label/annotation: a key already set
// fails unless force.
func addPairs(m map[string]any, field, what string, pairs map[string]string, force bool) error {
	cur, _ := m[field].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
	}
	for _, key := range slices.Sorted(maps.Keys(pairs)) {
		if _, ok := cur[key]; ok && !force {
			return fmt.Errorf("kustomize.common%ss: %s %s is in the kustomization already (kustomize edit add %s fails without force; set forceCommon%ss)", strings.ToUpper(what[:1])+what[1:], what, key, what, strings.ToUpper(what[:1])+what[1:])
		}
		cur[key] = pairs[key]
	}
	m[field] = cur
	return nil
}

// count reads a replicas count: a number or a string of one.
func count(raw json.RawMessage) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("count %s: want an integer", raw)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: want an integer", s)
	}
	return n, nil
}

// setImage is kustomize edit set image: "name=newName:tag",
// "name=newName@digest", "name:tag", "name@digest" or "name=newName";
// an entry of the same name is updated.
func setImage(m map[string]any, arg string) error {
	name, spec, renamed := strings.Cut(arg, "=")
	if !renamed {
		spec = arg
	}
	img, tag, digest := splitImage(spec)
	if !renamed {
		name = img
	}
	if name == "" {
		return fmt.Errorf("no image name")
	}
	entry := map[string]any{"name": name}
	list, _ := m["images"].([]any)
	i := slices.IndexFunc(list, func(e any) bool { e2, _ := e.(map[string]any); return e2["name"] == name })
	if i >= 0 {
		if old, ok := list[i].(map[string]any); ok {
			entry = old
		}
	}
	if renamed && img != "" {
		entry["newName"] = img
	}
	if tag != "" {
		entry["newTag"] = tag
		delete(entry, "digest")
	}
	if digest != "" {
		entry["digest"] = digest
		delete(entry, "newTag")
	}
	if i >= 0 {
		list[i] = entry
	} else {
		list = append(list, entry)
	}
	m["images"] = list
	return nil
}

// splitImage splits an image reference into name, tag and digest.
func splitImage(s string) (name, tag, digest string) {
	if at := strings.Index(s, "@"); at >= 0 {
		return s[:at], "", s[at+1:]
	}
	if c := strings.LastIndex(s, ":"); c > strings.LastIndex(s, "/") {
		return s[:c], s[c+1:], ""
	}
	return s, "", ""
}

// envsubst is Argo CD's Env.Envsubst (pkg/apis/application/v1alpha1/
// types.go:180-193 at 37ee0097cf): os.Expand over the build
// environment, $$ for a dollar, a variable it does not set expanded to
// "". kplan's environment maps the revision variables to themselves
// (buildEnv): their value is the commit Argo CD syncs, which the plan
// cannot know before the merge.
func envsubst(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return os.Expand(s, func(k string) string {
		if k == "$" {
			return "$"
		}
		return env[k]
	})
}

// addLabelsWithoutSelector is kustomize edit add label --without-selector
// [--include-templates] (kustomize v5.8.2 commands/edit/add/
// addmetadata.go, writeToLabels): the pairs go into the first labels
// entry with the same settings (includeSelectors off, includeTemplates
// as asked), or a new one; a key already there fails unless force.
func addLabelsWithoutSelector(m map[string]any, labels map[string]string, includeTemplates, force bool) error {
	list, _ := m["labels"].([]any)
	entry := map[string]any(nil)
	for _, e := range list {
		em, _ := e.(map[string]any)
		sel, _ := em["includeSelectors"].(bool)
		tpl, _ := em["includeTemplates"].(bool)
		if em != nil && !sel && tpl == includeTemplates {
			entry = em
			break
		}
	}
	if entry == nil {
		entry = map[string]any{"pairs": map[string]any{}}
		if includeTemplates {
			entry["includeTemplates"] = true
		}
		list = append(list, entry)
	}
	pairs, _ := entry["pairs"].(map[string]any)
	if pairs == nil {
		pairs = map[string]any{}
		entry["pairs"] = pairs
	}
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		if _, ok := pairs[key]; ok && !force {
			return fmt.Errorf("kustomize edit add label: label %s already in kustomization file. Use --force to override (forceCommonLabels)", key)
		}
		pairs[key] = labels[key]
	}
	m["labels"] = list
	return nil
}
