package inventorydiff

import (
	"fmt"
	"slices"
	"strings"
)

// IgnoreRules are noise filters: changes a team has decided not to
// review (a checksum annotation every release rewrites, a chart label).
// They never hide silently: the plan lists every rule with what it hid.
//
// What they never hide: added and pruned objects (a prune may be
// dangerous, an add creates something), anything marked dangerous, and
// a Secret's data and stringData (its values are hidden already; that a
// key changed stays visible). A kind rule may not name Secret.
type IgnoreRules struct {
	// Fields are field path patterns, as field changes name paths
	// (metadata.annotations.checksum/config,
	// spec.template.spec.containers[name=web].image): "*" matches any
	// run of characters, dots included; a pattern also matches every
	// path below the one it names (metadata.labels matches each label),
	// and matches from any field down, so metadata.annotations.x covers
	// a pod template's annotation x too.
	Fields []string
	// Kinds are object kinds whose changes in place are ignored.
	Kinds []string
	// Scoped are rules for one overlay's objects, as an engine's own
	// ignore settings are (Argo CD's ignoreDifferences).
	Scoped []ScopedRule
	// Source says where the rules come from, for the report (".kplan.yaml",
	// "--ignore-field").
	Source string
}

// ScopedRule hides given field changes of given objects of one overlay.
type ScopedRule struct {
	// Rule is the rule as the report names it.
	Rule    string
	Overlay string
	// Hidden are the field change paths it hides, by object key (head's).
	Hidden map[string]map[string]bool
}

// HiddenPaths are the paths of the field changes between base and head
// that normalize removes: the changes left out when both sides are
// compared without what it drops (as Argo CD compares an object after
// its ignoreDifferences). A normalization that renames what it leaves
// (drops a list item's key, so its siblings are named otherwise) hides
// nothing: ok is false.
func HiddenPaths(base, head map[string]any, normalize func(map[string]any) (map[string]any, error)) (hidden map[string]bool, ok bool, err error) {
	nb, err := normalize(base)
	if err != nil {
		return nil, false, err
	}
	nh, err := normalize(head)
	if err != nil {
		return nil, false, err
	}
	all := map[string]bool{}
	for _, f := range diffFields(base, head, nil, nil) {
		all[f.Path] = true
	}
	left := map[string]bool{}
	for _, f := range diffFields(nb, nh, nil, nil) {
		if !all[f.Path] {
			return nil, false, nil
		}
		left[f.Path] = true
	}
	hidden = map[string]bool{}
	for p := range all {
		if !left[p] {
			hidden[p] = true
		}
	}
	return hidden, true, nil
}

// DefaultSource is the Source of DefaultIgnore's rules.
const DefaultSource = "default"

// DefaultIgnore is the default noise set: what a chart or release bump
// rewrites on every object it renders without changing what runs — the
// chart and version labels (app.kubernetes.io/version, helm.sh/chart,
// chart, as flux-local strips them), checksum/* annotations (a rollout
// trigger whose cause the plan shows where it changed) and the caBundle
// a webhook or APIService is injected with (argocd-diff-preview hides
// them too). Like any rule it hides changes in place only, and is counted.
// Labels in selectors are left shown: a selector change is no noise.
func DefaultIgnore() IgnoreRules {
	return IgnoreRules{Source: DefaultSource, Fields: []string{
		"metadata.labels.app.kubernetes.io/version",
		"metadata.labels.helm.sh/chart",
		"metadata.labels.chart",
		"metadata.annotations.checksum/*",
		"clientConfig.caBundle",
		"spec.caBundle",
	}}
}

// Hidden counts what the rules of one source hid: field changes, and the
// changed objects they were hidden in (each once, whatever the rules).
type Hidden struct {
	Source  string `json:"source"`
	Fields  int    `json:"fields"`
	Objects int    `json:"objects"`
}

// IgnoredRule is one rule as applied, with what it hid.
type IgnoredRule struct {
	// Rule is "field PATTERN" or "kind KIND".
	Rule   string `json:"rule"`
	Source string `json:"source,omitempty"`
	// Fields is how many field changes it hid; Objects, how many changed
	// objects it hid whole (every change of theirs ignored).
	Fields  int `json:"fields"`
	Objects int `json:"objects"`
	// Kept is how many changes it matched and left shown: adds, prunes
	// and Secret data.
	Kept int `json:"kept,omitempty"`
}

// CheckIgnore refuses rules that cannot be applied as asked.
func CheckIgnore(r IgnoreRules) error {
	for _, f := range r.Fields {
		if strings.TrimSpace(f) == "" || strings.Trim(f, "*.") == "" {
			return fmt.Errorf("ignore field %q: name a field path (e.g. metadata.annotations.checksum/*); a pattern that matches every field would hide the whole plan", f)
		}
	}
	for _, k := range r.Kinds {
		switch {
		case strings.TrimSpace(k) == "":
			return fmt.Errorf("ignore kind %q: name a kind (e.g. HorizontalPodAutoscaler)", k)
		case k == "Secret":
			return fmt.Errorf("ignore kind Secret: a Secret's changes are never ignored (their values never show anyway); ignore its annotations or labels by field instead")
		}
	}
	return nil
}

// matchPath reports whether pattern matches path, or a path above it,
// starting at the top or at any field below: metadata.annotations.x
// matches an object's annotation and its pod template's
// (spec.template.metadata.annotations.x). "*" matches any run of
// characters.
func matchPath(pattern, path string) bool {
	for start := 0; start < len(path); start++ {
		if start > 0 && path[start-1] != '.' {
			continue
		}
		sub := path[start:]
		for i := len(sub); i > 0; i-- {
			if i < len(sub) && sub[i] != '.' && sub[i] != '[' {
				continue
			}
			if glob(pattern, sub[:i]) {
				return true
			}
		}
	}
	return false
}

// glob matches s against a pattern whose only wildcard is "*".
func glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	rest := pattern[star+1:]
	for i := star; i <= len(s); i++ {
		if glob(rest, s[i:]) {
			return true
		}
	}
	return false
}

// Ignore applies rules to the plan: field changes they match leave the
// plan, and an object all of whose changes are ignored counts as
// unchanged. Each rule is recorded in p.Ignored with what it hid, even
// when that is nothing.
func (p *Plan) Ignore(rules ...IgnoreRules) {
	type applied struct {
		rule   *IgnoredRule
		field  string
		kind   string
		scoped *ScopedRule
	}
	// fieldRule says whether a field rule (not a kind rule) matches field
	// change f of c in overlay o.
	fieldRule := func(a applied, o string, c Change, f FieldChange) bool {
		if a.scoped != nil {
			return a.scoped.Overlay == o && a.scoped.Hidden[c.Key][f.Path]
		}
		return a.field != "" && matchPath(a.field, f.Path)
	}
	// touched are the objects each source hid something in, by overlay
	// and key; fields, the field changes it hid.
	touched := map[string]map[[2]string]bool{}
	fields := map[string]int{}
	hide := func(r *IgnoredRule, overlay, key string, n int) {
		if touched[r.Source] == nil {
			touched[r.Source] = map[[2]string]bool{}
		}
		touched[r.Source][[2]string{overlay, key}] = true
		fields[r.Source] += n
	}
	var all []applied
	for _, r := range rules {
		for _, f := range r.Fields {
			all = append(all, applied{rule: &IgnoredRule{Rule: "field " + f, Source: r.Source}, field: f})
		}
		for _, k := range r.Kinds {
			all = append(all, applied{rule: &IgnoredRule{Rule: "kind " + k, Source: r.Source}, kind: k})
		}
		for i := range r.Scoped {
			all = append(all, applied{rule: &IgnoredRule{Rule: r.Scoped[i].Rule, Source: r.Source}, scoped: &r.Scoped[i]})
		}
	}
	if len(all) == 0 {
		return
	}
	for i := range p.Overlays {
		o := &p.Overlays[i]
		for _, a := range all {
			if a.kind == "" {
				continue
			}
			for _, k := range append(append([]string{}, o.Added...), o.Pruned...) {
				if Kind(k) == a.kind {
					a.rule.Kept++
				}
			}
		}
		flagged := map[string]bool{}
		for _, f := range o.Dangerous {
			flagged[f.Object] = true
		}
		kept := o.Changed[:0]
		for _, c := range o.Changed {
			kind := Kind(c.Key)
			if flagged[c.Key] {
				// A dangerous change shows whole: the finding points at it.
				for _, a := range all {
					if a.kind == kind || slices.ContainsFunc(c.Fields, func(f FieldChange) bool { return fieldRule(a, o.Path, c, f) }) {
						a.rule.Kept++
					}
				}
				kept = append(kept, c)
				continue
			}
			if kind != "Secret" {
				hid := false
				for _, a := range all {
					if a.kind != "" && a.kind == kind {
						a.rule.Objects++
						a.rule.Fields += len(c.Fields)
						hide(a.rule, o.Path, c.Key, len(c.Fields))
						hid = true
						break
					}
				}
				if hid {
					o.Unchanged++
					continue
				}
			}
			fields := c.Fields[:0:0]
			for _, f := range c.Fields {
				var by *IgnoredRule
				for _, a := range all {
					if fieldRule(a, o.Path, c, f) {
						by = a.rule
						break
					}
				}
				switch {
				case by == nil:
					fields = append(fields, f)
				case f.Hidden || (kind == "Secret" && secretPath(f.Path)):
					by.Kept++ // a Secret's data always shows that it changed
					fields = append(fields, f)
				default:
					by.Fields++
					hide(by, o.Path, c.Key, 1)
				}
			}
			if len(fields) == 0 && len(c.Fields) > 0 && c.BaseKey == "" {
				// Every change ignored: the object is unchanged for review.
				for _, f := range c.Fields {
					for _, a := range all {
						if fieldRule(a, o.Path, c, f) {
							a.rule.Objects++
							break
						}
					}
					break
				}
				o.Unchanged++
				continue
			}
			c.Fields = fields
			kept = append(kept, c)
		}
		o.Changed = kept
		if o.Status == Changed && !o.HasChanges() {
			o.Status = Unchanged
		}
	}
	for _, a := range all {
		p.Ignored = append(p.Ignored, *a.rule)
	}
	for _, r := range rules {
		if t := touched[r.Source]; len(t) > 0 && !slices.ContainsFunc(p.Hidden, func(h Hidden) bool { return h.Source == r.Source }) {
			p.Hidden = append(p.Hidden, Hidden{Source: r.Source, Fields: fields[r.Source], Objects: len(t)})
		}
	}
	p.Totals = Sum(p.Overlays)
}
