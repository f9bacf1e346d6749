package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/itchyny/gojq"
)

// IgnoreDifference is one entry of an Application's
// spec.ignoreDifferences: fields of the objects it names that Argo CD's
// diff leaves out.
type IgnoreDifference struct {
	Group                 string   `json:"group,omitempty"`
	Kind                  string   `json:"kind"`
	Name                  string   `json:"name,omitempty"`
	Namespace             string   `json:"namespace,omitempty"`
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

// jqTimeout bounds one jq expression on one object, as Argo CD's
// controller bounds it (its default, 1s): a repository's expression
// cannot stall a plan.
const jqTimeout = time.Second

// IgnoreRule is one JSON pointer or jq path expression of an
// IgnoreDifference, ready to apply.
type IgnoreRule struct {
	// Text names the rule in the report: "jsonPointers /spec/replicas of
	// apps/Deployment web".
	Text    string
	entry   IgnoreDifference
	pointer []string   // decoded tokens; nil for a jq rule
	jq      *gojq.Code // nil for a pointer rule
}

// IgnoreRules compiles the Application's ignoreDifferences, one rule per
// pointer and expression; notes say what kplan cannot apply offline (a
// jq expression that does not compile, managedFieldsManagers, which
// need the live objects' managedFields).
func (a *Application) IgnoreRules() (rules []IgnoreRule, notes []string) {
	for i, d := range a.Spec().IgnoreDifferences {
		scope := d.scope()
		for _, p := range d.JSONPointers {
			tokens, err := pointerTokens(p)
			if err != nil {
				notes = append(notes, fmt.Sprintf("spec.ignoreDifferences[%d].jsonPointers %q: %v; not applied", i, p, err))
				continue
			}
			rules = append(rules, IgnoreRule{Text: "jsonPointers " + p + " of " + scope, entry: d, pointer: tokens})
		}
		for _, e := range d.JQPathExpressions {
			// As Argo CD: the expression's paths are deleted from both sides.
			q, err := gojq.Parse("del(" + e + ")")
			var code *gojq.Code
			if err == nil {
				code, err = gojq.Compile(q)
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("spec.ignoreDifferences[%d].jqPathExpressions %q cannot be evaluated (%v); its fields are shown", i, e, err))
				continue
			}
			rules = append(rules, IgnoreRule{Text: "jqPathExpressions " + e + " of " + scope, entry: d, jq: code})
		}
		if len(d.ManagedFieldsManagers) > 0 {
			notes = append(notes, fmt.Sprintf("spec.ignoreDifferences[%d].managedFieldsManagers %s: the fields those managers own are known only in the cluster (managedFields); kplan shows their changes", i, strings.Join(d.ManagedFieldsManagers, ", ")))
		}
	}
	return rules, notes
}

// scope names the objects an entry applies to: "apps/Deployment web (shop)".
func (d IgnoreDifference) scope() string {
	s := d.Kind
	if d.Group != "" {
		s = d.Group + "/" + s
	}
	if d.Name != "" {
		s += " " + d.Name
	}
	if d.Namespace != "" {
		s += " (" + d.Namespace + ")"
	}
	return s
}

// Matches says whether the rule applies to an object, as Argo CD matches
// an entry: group and kind as globs, name and namespace when set.
func (r IgnoreRule) Matches(group, kind, namespace, name string) bool {
	g, _ := path.Match(r.entry.Group, group)
	k, _ := path.Match(r.entry.Kind, kind)
	return g && k && (r.entry.Name == "" || r.entry.Name == name) && (r.entry.Namespace == "" || r.entry.Namespace == namespace)
}

// Normalize returns a copy of obj without what the rule ignores: the
// pointer's value removed (nothing when it is absent), or the jq
// expression's paths deleted. obj is as JSON decodes it.
func (r IgnoreRule) Normalize(ctx context.Context, obj map[string]any) (map[string]any, error) {
	c, err := jsonCopy(obj)
	if err != nil {
		return nil, err
	}
	if r.jq == nil {
		removePointer(c, r.pointer) // c is a map: changed in place
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, jqTimeout)
	defer cancel()
	iter := r.jq.RunWithContext(ctx, c)
	v, ok := iter.Next()
	if !ok {
		return c, nil
	}
	if err, isErr := v.(error); isErr {
		return nil, fmt.Errorf("%s: %w", r.Text, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the expression made the object a %T", r.Text, v)
	}
	return m, nil
}

// jsonCopy is obj through JSON: the value types gojq takes, and a copy
// the rule may change.
func jsonCopy(obj map[string]any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	err = json.Unmarshal(data, &out)
	return out, err
}

// pointerTokens decodes an RFC 6901 JSON pointer.
func pointerTokens(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("an empty pointer names the whole object")
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// removePointer returns v without the value tokens point at, if
// present (as Argo CD's JSON patch remove, whose failure on an absent
// path it ignores); maps are changed in place.
func removePointer(v any, tokens []string) any {
	if len(tokens) == 0 {
		return v
	}
	t, rest := tokens[0], tokens[1:]
	switch c := v.(type) {
	case map[string]any:
		if _, ok := c[t]; !ok {
			return v
		}
		if len(rest) == 0 {
			delete(c, t)
		} else {
			c[t] = removePointer(c[t], rest)
		}
	case []any:
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n >= len(c) {
			return v
		}
		if len(rest) == 0 {
			return append(c[:n:n], c[n+1:]...)
		}
		c[n] = removePointer(c[n], rest)
	}
	return v
}
