package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// What makes a report read at a glance: identical changes shown once,
// the images a plan rolls out, and what the plan did to get there.

// member is one changed object of a group of identical changes.
type member struct {
	overlay string
	key     string
}

// group is a set of objects of one kind changed in exactly the same way
// (the same fields, from the same values to the same values): the same
// change shown once, "same change in 15 Deployments".
type group struct {
	kind    string
	members []member
	pos     map[member]int // members' indexes: a plan may hold thousands
}

// groups finds the identical changes of a plan, across overlays, in the
// order the report shows them; only groups of two or more.
type groups map[member]*group

func findGroups(p *inventorydiff.Plan) groups {
	bySig := map[string]*group{}
	out := groups{}
	for i := range p.Overlays {
		o := &p.Overlays[i]
		for _, c := range o.Changed {
			if len(c.Fields) == 0 {
				continue
			}
			kind := inventorydiff.Kind(c.Key)
			data, err := json.Marshal(c.Fields)
			if err != nil {
				continue
			}
			sig := kind + "\x00" + string(data)
			g := bySig[sig]
			if g == nil {
				g = &group{kind: kind, pos: map[member]int{}}
				bySig[sig] = g
			}
			m := member{o.Path, c.Key}
			g.pos[m] = len(g.members)
			g.members = append(g.members, m)
			out[m] = g
		}
	}
	for m, g := range out {
		if len(g.members) < 2 {
			delete(out, m)
		}
	}
	return out
}

// first says whether m opens its group (the change is shown there).
func (g *group) first(m member) bool { return g.members[0] == m }

// headline names the group's other members, the object the change is
// shown on being named already, in lines of at most headlineWidth
// characters: "same change in 2 other Deployments: web (b) in
// overlays/b," then "  web (c) in overlays/c". A line per name list ran
// to 900 characters and counted the object itself.
func (g *group) headline(maxNames int) []string {
	others := len(g.members) - 1
	names := make([]string, 0, min(others, maxNames))
	for i, m := range g.members[1:] {
		if i == maxNames {
			break
		}
		n := shortName(m.key)
		if m.overlay != g.members[0].overlay {
			n += " in " + m.overlay
		}
		names = append(names, n)
	}
	if more := others - len(names); more > 0 {
		names = append(names, fmt.Sprintf("and %d more", more))
	}
	return wrap(fmt.Sprintf("same change in %d other %s:", others, kindPlural(g.kind, others)), names, headlineWidth)
}

// headlineWidth is the width a group's headline is wrapped at.
const headlineWidth = 100

// wrap lists words after lead, comma-separated, in lines of at most
// width characters (a longer word has a line of its own); the lines
// after the first are indented by two spaces.
func wrap(lead string, words []string, width int) []string {
	var lines []string
	line := lead
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if len(line)+1+len(w) > width && strings.TrimSpace(line) != "" {
			lines = append(lines, line)
			line = " "
		}
		line += " " + w
	}
	return append(lines, line)
}

// shortName is an object's name and namespace, its kind said already.
func shortName(key string) string {
	n := inventorydiff.Name(key)
	if k := inventorydiff.Kind(key); k != "" {
		return strings.TrimPrefix(n, k+" ")
	}
	return n
}

// kindPlural is a kind in the plural, as people write it: Deployments,
// Ingresses, NetworkPolicies.
func kindPlural(kind string, n int) string {
	if n == 1 || kind == "" {
		return kind
	}
	switch {
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"), strings.HasSuffix(kind, "ch"), strings.HasSuffix(kind, "sh"):
		return kind + "es"
	case strings.HasSuffix(kind, "y") && !strings.ContainsAny(kind[len(kind)-2:len(kind)-1], "aeiou"):
		return kind[:len(kind)-1] + "ies"
	}
	return kind + "s"
}

// imageChange is one image a plan rolls out: Old → New ("" for an added
// object's or container's image), in the objects that run it.
type imageChange struct {
	Old, New string
	Objects  []member
}

// images lists the image changes of a plan: changed image fields and the
// images of added objects, each old → new pair once with the objects it
// is in, in order of first appearance.
func images(p *inventorydiff.Plan) []*imageChange {
	var out []*imageChange
	index := map[[2]string]*imageChange{}
	add := func(old, new string, m member) {
		k := [2]string{old, new}
		ic := index[k]
		if ic == nil {
			ic = &imageChange{Old: old, New: new}
			index[k] = ic
			out = append(out, ic)
		}
		if !slices.Contains(ic.Objects, m) {
			ic.Objects = append(ic.Objects, m)
		}
	}
	for i := range p.Overlays {
		o := &p.Overlays[i]
		for _, k := range o.Added {
			for _, img := range yamlImages(o.AddedYAML[k]) {
				add("", img, member{o.Path, k})
			}
		}
		for _, c := range o.Changed {
			for _, f := range c.Fields {
				if f.Hidden || !isImagePath(f.Path) {
					continue
				}
				old, new := unquote(f.Old), unquote(f.New)
				if old == new {
					continue
				}
				add(old, new, member{o.Path, c.Key})
			}
		}
	}
	return out
}

// isImagePath: a field that names a container image
// (spec.template.spec.containers[name=web].image, and the same in any
// pod template or CRD that keeps the name).
func isImagePath(p string) bool { return p == "image" || strings.HasSuffix(p, ".image") }

// unquote reads a field change's value (a JSON scalar) back as text.
func unquote(v string) string {
	var s string
	if json.Unmarshal([]byte(v), &s) == nil {
		return s
	}
	return v
}

// yamlImages finds every string field named image in an object's YAML.
func yamlImages(y string) []string {
	if y == "" {
		return nil
	}
	var m any
	if sigsyaml.Unmarshal([]byte(y), &m) != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range t {
					if !yield(k) {
						return
					}
				}
			}) {
				if s, ok := t[k].(string); ok && k == "image" && s != "" {
					if !slices.Contains(out, s) {
						out = append(out, s)
					}
					continue
				}
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(m)
	return out
}

// objectsText names the objects of an image change, at most max, each
// once with the overlays that render it: an image bumped in dev, staging
// and prod reads "Deployment web (n) in dev, staging, prod".
func objectsText(ms []member, max int, code func(string) string) string {
	var keys []string
	in := map[string][]string{}
	overlays := map[string]bool{}
	for _, m := range ms {
		if _, ok := in[m.key]; !ok {
			keys = append(keys, m.key)
		}
		in[m.key] = append(in[m.key], m.overlay)
		overlays[m.overlay] = true
	}
	var names []string
	for i, k := range keys {
		if i == max {
			break
		}
		n := inventorydiff.Name(k)
		if len(overlays) > 1 {
			os := in[k]
			shown := os[:min(len(os), maxOverlayNames)]
			var quoted []string
			for _, o := range shown {
				quoted = append(quoted, code(o))
			}
			n += " in " + strings.Join(quoted, ", ")
			if more := len(os) - len(shown); more > 0 {
				n += fmt.Sprintf(" and %d more overlays", more)
			}
		}
		names = append(names, n)
	}
	s := strings.Join(names, "; ")
	if more := len(keys) - len(names); more > 0 {
		s += fmt.Sprintf("; and %d more objects", more)
	}
	return s
}

// maxOverlayNames is how many overlays an image change names per object.
const maxOverlayNames = 10

// shownRules are the ignore rules a report lists one by one: the default
// noise set is summed up in one line instead (hiddenByDefault).
func shownRules(p *inventorydiff.Plan) []inventorydiff.IgnoredRule {
	var out []inventorydiff.IgnoredRule
	for _, r := range p.Ignored {
		if r.Source != inventorydiff.DefaultSource {
			out = append(out, r)
		}
	}
	return out
}

// hiddenByDefault says what the default noise set hid, with the rules
// that hid it, then off (how to see it): "" when it hid nothing.
func hiddenByDefault(p *inventorydiff.Plan, code func(string) string, off string) string {
	i := slices.IndexFunc(p.Hidden, func(h inventorydiff.Hidden) bool { return h.Source == inventorydiff.DefaultSource })
	if i < 0 {
		return ""
	}
	h := p.Hidden[i]
	var rules []string
	for _, r := range p.Ignored {
		if r.Source == inventorydiff.DefaultSource && r.Fields > 0 {
			rules = append(rules, code(strings.TrimPrefix(r.Rule, "field ")))
		}
	}
	return fmt.Sprintf("Hidden by default: %d %s in %d %s (%s); %s",
		h.Fields, plural(h.Fields, "field", "fields"), h.Objects, plural(h.Objects, "object", "objects"),
		strings.Join(rules, ", "), off)
}

// noLongerPlanned says which overlays the change's new .kplan.yaml
// stops planning (code formats each name): "" when none.
func noLongerPlanned(p *inventorydiff.Plan, code func(string) string) string {
	n := len(p.NoLongerPlanned)
	if n == 0 {
		return ""
	}
	names := make([]string, 0, min(n, maxOverlayNames))
	for _, o := range p.NoLongerPlanned[:min(n, maxOverlayNames)] {
		names = append(names, code(o))
	}
	s := fmt.Sprintf("No longer planned, left as they are (not listed in the .kplan.yaml this change adds; nothing pruned): %d %s: %s",
		n, plural(n, "overlay", "overlays"), strings.Join(names, ", "))
	if n > len(names) {
		s += fmt.Sprintf(" and %d more", n-len(names))
	}
	return s
}

// maxNotPlanned bounds the objects notPlanned lists one by one.
const maxNotPlanned = 10

// notPlanned says which of the engines' objects the plan does not plan,
// and why, one per line (code formats each name): nil when none.
func notPlanned(p *inventorydiff.Plan, code func(string) string) []string {
	n := len(p.NotPlanned)
	if n == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("Not planned: %d %s", n, plural(n, "object", "objects"))}
	for _, np := range p.NotPlanned[:min(n, maxNotPlanned)] {
		out = append(out, fmt.Sprintf("%s %s (%s): %s", np.Engine, code(np.ID), code(np.File), np.Reason))
	}
	if n > maxNotPlanned {
		out = append(out, fmt.Sprintf("and %d more (the JSON report lists every one)", n-maxNotPlanned))
	}
	return out
}

// ignoredText says what one ignore rule hid.
func ignoredText(r inventorydiff.IgnoredRule) string {
	s := fmt.Sprintf("hid %d field %s", r.Fields, plural(r.Fields, "change", "changes"))
	if r.Objects > 0 {
		s += fmt.Sprintf(" (%d %s left with no change)", r.Objects, plural(r.Objects, "object", "objects"))
	}
	if r.Kept > 0 {
		s += fmt.Sprintf("; %d matching %s still shown (adds, prunes and Secret data are never ignored)", r.Kept, plural(r.Kept, "change", "changes"))
	}
	return s
}

// footer says how much the plan rendered and how long it took.
func footer(p *inventorydiff.Plan) string {
	w := p.Work
	if w == nil {
		return ""
	}
	s := fmt.Sprintf("kplan planned %d %s", w.Overlays, plural(w.Overlays, "overlay", "overlays"))
	if w.Shards > 1 {
		s += fmt.Sprintf(" on %d runners", w.Shards)
	}
	s += fmt.Sprintf(": %d kustomize %s", w.Rendered, plural(w.Rendered, "build", "builds"))
	if w.CacheHits > 0 {
		s += fmt.Sprintf(", %d from the cache", w.CacheHits)
	}
	if w.Skipped > 0 {
		s += fmt.Sprintf("; %d %s the change cannot affect, not rendered", w.Skipped, plural(w.Skipped, "overlay", "overlays"))
	}
	return s + fmt.Sprintf("; %s.", roundDuration(w.Took))
}

func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
