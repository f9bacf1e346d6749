package inventorydiff

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FieldChange is one leaf field that differs between base and head.
type FieldChange struct {
	// Path like spec.template.spec.containers[name=app].image.
	Path string `json:"path"`
	// Op is "+" (added), "-" (removed) or "~" (changed).
	Op string `json:"op"`
	// Old and New are the values as short YAML-ish scalars; Hidden
	// replaces both for Secret data.
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Hidden bool   `json:"hidden,omitempty"`
}

func (f FieldChange) String() string {
	switch {
	case f.Hidden:
		return fmt.Sprintf("%s %s (value hidden)", f.Op, f.Path)
	case f.Op == "+":
		return fmt.Sprintf("+ %s: %s", f.Path, f.New)
	case f.Op == "-":
		return fmt.Sprintf("- %s: %s", f.Path, f.Old)
	default:
		return fmt.Sprintf("~ %s: %s → %s", f.Path, f.Old, f.New)
	}
}

// flatten maps every leaf of a decoded object to its value. Lists whose
// elements all carry a distinct "name" are keyed by name, so inserting a
// container or volume shows as one addition, not a shift of every index.
func flatten(v any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 {
				out[prefix] = t
				return
			}
			for k, e := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case []any:
			if len(t) == 0 {
				out[prefix] = t
				return
			}
			names := listNames(t)
			for i, e := range t {
				if names != nil {
					walk(fmt.Sprintf("%s[name=%s]", prefix, names[i]), e)
				} else {
					walk(fmt.Sprintf("%s[%d]", prefix, i), e)
				}
			}
		default:
			out[prefix] = t
		}
	}
	walk("", v)
	return out
}

// listNames returns the "name" of every element, or nil unless every
// element is a map with a distinct string name.
func listNames(l []any) []string {
	names := make([]string, len(l))
	seen := map[string]bool{}
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return nil
		}
		seen[n] = true
		names[i] = n
	}
	return names
}

// diffFields compares two decoded objects leaf by leaf. hide reports
// paths whose values must not be shown (Secret data).
func diffFields(base, head map[string]any, hide func(path string) bool, skip func(path string) bool) []FieldChange {
	b, h := flatten(base), flatten(head)
	var out []FieldChange
	for _, p := range slices.Sorted(maps.Keys(union(b, h))) {
		if skip != nil && skip(p) {
			continue
		}
		bv, inB := b[p]
		hv, inH := h[p]
		fc := FieldChange{Path: p}
		switch {
		case inB && !inH:
			fc.Op, fc.Old = "-", scalar(bv)
		case !inB && inH:
			fc.Op, fc.New = "+", scalar(hv)
		case encode(bv) != encode(hv):
			fc.Op, fc.Old, fc.New = "~", scalar(bv), scalar(hv)
		default:
			continue
		}
		if hide != nil && hide(p) {
			fc.Old, fc.New, fc.Hidden = "", "", true
		}
		out = append(out, fc)
	}
	return out
}

func union(a, b map[string]any) map[string]any {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

func encode(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// scalar prints a leaf compactly for people: strings as JSON strings (so
// spaces and newlines stay visible), everything else as JSON, cut short.
func scalar(v any) string {
	s := encode(v)
	if len(s) > 200 {
		s = s[:197] + "…\""
	}
	return s
}

// secretPath reports whether a path of a Secret holds secret material.
func secretPath(p string) bool {
	return strings.HasPrefix(p, "data.") || strings.HasPrefix(p, "stringData.") ||
		p == "data" || p == "stringData" ||
		strings.HasPrefix(p, "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration")
}
