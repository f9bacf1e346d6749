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
	all := appliedRules(rules)
	if len(all) == 0 {
		return
	}
	ig := &ignorer{rules: all, touched: map[string]map[[2]string]bool{}, fields: map[string]int{}}
	for i := range p.Overlays {
		ig.overlay(&p.Overlays[i])
	}
	for _, a := range all {
		p.Ignored = append(p.Ignored, *a.rule)
	}
	for _, r := range rules {
		if t := ig.touched[r.Source]; len(t) > 0 && !slices.ContainsFunc(p.Hidden, func(h Hidden) bool { return h.Source == r.Source }) {
			p.Hidden = append(p.Hidden, Hidden{Source: r.Source, Fields: ig.fields[r.Source], Objects: len(t)})
		}
	}
	p.Totals = Sum(p.Overlays)
}

// appliedRule is one rule being applied: a field pattern, a kind or a
// scoped rule, and the record of what it hid.
type appliedRule struct {
	rule   *IgnoredRule
	field  string
	kind   string
	scoped *ScopedRule
}

// appliedRules are the rules one by one, in the order they match: each
// source's fields, then its kinds, then its scoped rules.
func appliedRules(rules []IgnoreRules) []appliedRule {
	var all []appliedRule
	for _, r := range rules {
		for _, f := range r.Fields {
			all = append(all, appliedRule{rule: &IgnoredRule{Rule: "field " + f, Source: r.Source}, field: f})
		}
		for _, k := range r.Kinds {
			all = append(all, appliedRule{rule: &IgnoredRule{Rule: "kind " + k, Source: r.Source}, kind: k})
		}
		for i := range r.Scoped {
			all = append(all, appliedRule{rule: &IgnoredRule{Rule: r.Scoped[i].Rule, Source: r.Source}, scoped: &r.Scoped[i]})
		}
	}
	return all
}

// matchesField says whether a field rule (not a kind rule) matches field
// change f of c in overlay o.
func (a appliedRule) matchesField(o string, c Change, f FieldChange) bool {
	if a.scoped != nil {
		return a.scoped.Overlay == o && a.scoped.Hidden[c.Key][f.Path]
	}
	return a.field != "" && matchPath(a.field, f.Path)
}

// ignorer applies rules overlay by overlay.
type ignorer struct {
	rules []appliedRule
	// touched are the objects each source hid something in, by overlay
	// and key; fields, the field changes it hid.
	touched map[string]map[[2]string]bool
	fields  map[string]int
}

// hide records that r hid n field changes of object key in overlay.
func (ig *ignorer) hide(r *IgnoredRule, overlay, key string, n int) {
	if ig.touched[r.Source] == nil {
		ig.touched[r.Source] = map[[2]string]bool{}
	}
	ig.touched[r.Source][[2]string{overlay, key}] = true
	ig.fields[r.Source] += n
}

// overlay applies the rules to o's changes in place: a dangerous change
// is kept whole, an object of an ignored kind or whose every change is
// ignored counts as unchanged, and the rest keep the field changes no
// rule hides.
func (ig *ignorer) overlay(o *Overlay) {
	ig.keepAddedAndPruned(o)
	flagged := map[string]bool{}
	for _, f := range o.Dangerous {
		flagged[f.Object] = true
	}
	kept := o.Changed[:0]
	for _, c := range o.Changed {
		if flagged[c.Key] {
			// A dangerous change shows whole: the finding points at it.
			ig.keepDangerous(o.Path, c)
			kept = append(kept, c)
			continue
		}
		if ig.hideKind(o.Path, c) {
			o.Ignored = append(o.Ignored, c)
			o.Unchanged++
			continue
		}
		fields, hidden := ig.hideFields(o.Path, c)
		if len(hidden) > 0 {
			o.Ignored = append(o.Ignored, Change{Key: c.Key, BaseKey: c.BaseKey, Fields: hidden})
		}
		if len(fields) == 0 && len(c.Fields) > 0 && c.BaseKey == "" {
			// Every change ignored: the object is unchanged for review.
			ig.hideObject(o.Path, c)
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

// keepAddedAndPruned counts, for each kind rule, the added and pruned
// objects of its kind: shown, whatever the rule.
func (ig *ignorer) keepAddedAndPruned(o *Overlay) {
	for _, a := range ig.rules {
		if a.kind == "" {
			continue
		}
		for _, k := range append(append([]string{}, o.Added...), o.Pruned...) {
			if Kind(k) == a.kind {
				a.rule.Kept++
			}
		}
	}
}

// keepDangerous counts, for each rule matching the dangerous change c
// (its kind or one of its fields), a change kept.
func (ig *ignorer) keepDangerous(overlay string, c Change) {
	kind := Kind(c.Key)
	for _, a := range ig.rules {
		if a.kind == kind || slices.ContainsFunc(c.Fields, func(f FieldChange) bool { return a.matchesField(overlay, c, f) }) {
			a.rule.Kept++
		}
	}
}

// hideKind hides c whole if the first kind rule naming its kind does (a
// Secret never), saying whether it did.
func (ig *ignorer) hideKind(overlay string, c Change) bool {
	kind := Kind(c.Key)
	if kind == "Secret" {
		return false
	}
	for _, a := range ig.rules {
		if a.kind != "" && a.kind == kind {
			a.rule.Objects++
			a.rule.Fields += len(c.Fields)
			ig.hide(a.rule, overlay, c.Key, len(c.Fields))
			return true
		}
	}
	return false
}

// hideFields returns the field changes of c the rules leave, and those
// they hide: each one the first matching rule hides, unless its value is
// hidden already (a Secret's data always shows that it changed).
func (ig *ignorer) hideFields(overlay string, c Change) (fields, hidden []FieldChange) {
	kind := Kind(c.Key)
	fields = c.Fields[:0:0]
	for _, f := range c.Fields {
		var by *IgnoredRule
		for _, a := range ig.rules {
			if a.matchesField(overlay, c, f) {
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
			ig.hide(by, overlay, c.Key, 1)
			hidden = append(hidden, f)
		}
	}
	return fields, hidden
}

// hideObject counts c, every change of which was ignored, as an object
// hidden whole by the first rule matching its first field change.
func (ig *ignorer) hideObject(overlay string, c Change) {
	for _, a := range ig.rules {
		if a.matchesField(overlay, c, c.Fields[0]) {
			a.rule.Objects++
			return
		}
	}
}
