package inventorydiff

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aymanbagabas/go-udiff/lcs"
)

// FieldChange is one field that differs between base and head.
type FieldChange struct {
	// Path like spec.template.spec.containers[name=app].image; list items
	// are named by their key ([name=app], [containerPort=80]) or, in
	// lists without one, by index ([2]: head's index, base's for a removal).
	Path string `json:"path"`
	// Op is "+" (added), "-" (removed), "~" (changed) or "order": the
	// same items of a list whose order matters, in another order (Old and
	// New then list their keys in order).
	Op string `json:"op"`
	// Old and New are the values as short JSON scalars (a long string
	// shows the window where the two differ, cut on character
	// boundaries); Hidden replaces both for Secret data.
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
	// Diff is, for a multi-line string, a unified line diff of it (hunks
	// with a few lines of context, no file header).
	Diff   string `json:"diff,omitempty"`
	Hidden bool   `json:"hidden,omitempty"`
}

// Header is the change on one line; a multi-line string says how many
// lines it had and has, its Diff follows.
func (f FieldChange) Header() string {
	switch {
	case f.Hidden:
		return fmt.Sprintf("%s %s (value hidden)", f.Op, f.Path)
	case f.Op == "order":
		return fmt.Sprintf("↕ %s: order %s → %s", f.Path, f.Old, f.New)
	case f.Diff != "" && f.Op == "+":
		return fmt.Sprintf("+ %s: text of %s", f.Path, f.lines(f.Diff, '+'))
	case f.Diff != "" && f.Op == "-":
		return fmt.Sprintf("- %s: text of %s", f.Path, f.lines(f.Diff, '-'))
	case f.Diff != "":
		return fmt.Sprintf("~ %s: text changed", f.Path)
	case f.Op == "+":
		return fmt.Sprintf("+ %s: %s", f.Path, f.New)
	case f.Op == "-":
		return fmt.Sprintf("- %s: %s", f.Path, f.Old)
	default:
		return fmt.Sprintf("~ %s: %s → %s", f.Path, f.Old, f.New)
	}
}

func (f FieldChange) lines(diff string, op byte) string {
	n := 0
	for _, l := range strings.Split(diff, "\n") {
		if len(l) > 0 && l[0] == op {
			n++
		}
	}
	if n == 1 {
		return "1 line"
	}
	return fmt.Sprintf("%d lines", n)
}

// DiffLines are the lines of Diff ("@@ -22,7 +22,7 @@", " context",
// "-old", "+new"); none for other changes.
func (f FieldChange) DiffLines() []string {
	if f.Diff == "" || f.Hidden {
		return nil
	}
	return strings.Split(strings.TrimSuffix(f.Diff, "\n"), "\n")
}

func (f FieldChange) String() string {
	lines := f.DiffLines()
	if len(lines) == 0 {
		return f.Header()
	}
	return f.Header() + "\n    " + strings.Join(lines, "\n    ")
}

// naturalKeys are the fields that identify the items of a list, tried in
// order: the first that every item on both sides has, with distinct
// values, keys the list, so an insertion is one addition and not a shift
// of every index. name covers containers, volumes, env and named ports;
// the others are Kubernetes' merge keys of lists whose items often have
// no name: container and service ports, volume mounts and devices, host
// aliases.
var naturalKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "ip"}

// orderedLists are keyed lists whose order changes what runs: init
// containers run one after another in order; containers start in order
// (a postStart hook holds the next one, as Istio's
// holdApplicationUntilProxyStarts relies on, and kubectl defaults to the
// first); env entries may refer to earlier ones with $(VAR). A reorder of
// these is reported; of other keyed lists (volumes, ports) it is not.
var orderedLists = map[string]bool{"containers": true, "initContainers": true, "env": true}

// differ compares two decoded objects.
type differ struct {
	hide func(path string) bool // values that must not be shown (Secret data)
	skip func(path string) bool // paths left out of the comparison
	out  []FieldChange
}

// diffFields compares two decoded objects field by field. hide reports
// paths whose values must not be shown (Secret data); skip, paths not
// compared.
func diffFields(base, head map[string]any, hide func(path string) bool, skip func(path string) bool) []FieldChange {
	d := &differ{hide: hide, skip: skip}
	d.maps("", base, head)
	return d.out
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func (d *differ) skipped(path string) bool { return d.skip != nil && d.skip(path) }

// value compares the values at path; field is the map key that holds
// them ("" for list items).
func (d *differ) value(path, field string, b, h any) {
	if d.skipped(path) {
		return
	}
	switch bt := b.(type) {
	case map[string]any:
		if ht, ok := h.(map[string]any); ok {
			d.maps(path, bt, ht)
			return
		}
	case []any:
		if ht, ok := h.([]any); ok {
			d.lists(path, field, bt, ht)
			return
		}
	}
	if encode(b) == encode(h) {
		return
	}
	if nonEmptyContainer(b) || nonEmptyContainer(h) {
		// A value that changes shape (a string becomes a map) shows as
		// its old leaves removed and its new ones added.
		d.leaves("-", path, b)
		d.leaves("+", path, h)
		return
	}
	d.change(path, b, h)
}

func nonEmptyContainer(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) > 0
	case []any:
		return len(t) > 0
	}
	return false
}

func (d *differ) maps(path string, b, h map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(union(b, h))) {
		p := join(path, k)
		bv, inB := b[k]
		hv, inH := h[k]
		switch {
		case inB && inH:
			d.value(p, k, bv, hv)
		case inB:
			d.leaves("-", p, bv)
		default:
			d.leaves("+", p, hv)
		}
	}
}

// leaves reports every leaf of v, added or removed as a whole.
func (d *differ) leaves(op, path string, v any) {
	if d.skipped(path) {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if len(t) > 0 {
			for _, k := range slices.Sorted(maps.Keys(t)) {
				d.leaves(op, join(path, k), t[k])
			}
			return
		}
	case []any:
		if len(t) > 0 {
			field, keys := listKey(t)
			for i, e := range t {
				d.leaves(op, itemPath(path, field, keys, i), e)
			}
			return
		}
	}
	fc := FieldChange{Path: path, Op: op}
	if d.hidden(&fc) {
		return
	}
	s, multi := v.(string)
	multi = multi && multiline(s)
	switch {
	case op == "+" && multi:
		fc.New, fc.Diff = preview(v), textDiff("", s)
	case op == "+":
		fc.New = preview(v)
	case multi:
		fc.Old, fc.Diff = preview(v), textDiff(s, "")
	default:
		fc.Old = preview(v)
	}
	d.out = append(d.out, fc)
}

// hidden appends fc with its value hidden when its path must not show
// one, and says so.
func (d *differ) hidden(fc *FieldChange) bool {
	if d.hide == nil || !d.hide(fc.Path) {
		return false
	}
	fc.Hidden = true
	d.out = append(d.out, *fc)
	return true
}

// change reports one leaf that differs on both sides.
func (d *differ) change(path string, b, h any) {
	fc := FieldChange{Path: path, Op: "~"}
	if d.hidden(&fc) {
		return
	}
	bs, bok := b.(string)
	hs, hok := h.(string)
	switch {
	case bok && hok:
		fc.Old, fc.New = previewPair(bs, hs)
		if multiline(bs) || multiline(hs) {
			fc.Diff = textDiff(bs, hs)
		}
	default:
		fc.Old, fc.New = preview(b), preview(h)
	}
	d.out = append(d.out, fc)
}

// lists compares two lists: by key when their items have one (see
// naturalKeys), else as sequences, so an insertion is one insertion.
func (d *differ) lists(path, field string, b, h []any) {
	key, bk, hk := commonKey(b, h)
	if key == "" {
		d.sequence(path, b, h)
		return
	}
	bi := map[string]int{}
	for i, k := range bk {
		bi[k] = i
	}
	hi := map[string]int{}
	for i, k := range hk {
		hi[k] = i
	}
	if orderedLists[field] {
		var bo, ho []string
		for _, k := range bk {
			if _, ok := hi[k]; ok {
				bo = append(bo, k)
			}
		}
		for _, k := range hk {
			if _, ok := bi[k]; ok {
				ho = append(ho, k)
			}
		}
		if !slices.Equal(bo, ho) {
			d.out = append(d.out, FieldChange{Path: path, Op: "order", Old: strings.Join(bo, ", "), New: strings.Join(ho, ", ")})
		}
	}
	for j, k := range hk {
		p := fmt.Sprintf("%s[%s=%s]", path, key, k)
		if i, ok := bi[k]; ok {
			d.value(p, "", b[i], h[j])
		} else {
			d.leaves("+", p, h[j])
		}
	}
	for i, k := range bk {
		if _, ok := hi[k]; !ok {
			d.leaves("-", fmt.Sprintf("%s[%s=%s]", path, key, k), b[i])
		}
	}
}

// sequence compares lists without keys by their longest common
// subsequence: what was inserted or deleted, with a deletion followed by
// an insertion at the same place compared item by item (a changed arg,
// a toleration with another effect).
func (d *differ) sequence(path string, b, h []any) {
	be, he := make([]string, len(b)), make([]string, len(h))
	for i, v := range b {
		be[i] = encode(v)
	}
	for i, v := range h {
		he[i] = encode(v)
	}
	for _, e := range lcs.DiffLines(be, he) {
		del, ins := e.End-e.Start, e.ReplEnd-e.ReplStart
		pairs := min(del, ins)
		for k := range pairs {
			d.value(fmt.Sprintf("%s[%d]", path, e.ReplStart+k), "", b[e.Start+k], h[e.ReplStart+k])
		}
		for i := e.Start + pairs; i < e.End; i++ {
			d.leaves("-", fmt.Sprintf("%s[%d]", path, i), b[i])
		}
		for j := e.ReplStart + pairs; j < e.ReplEnd; j++ {
			d.leaves("+", fmt.Sprintf("%s[%d]", path, j), h[j])
		}
	}
}

// commonKey finds the natural key both lists are keyed by, and each
// item's value of it; "" when there is none.
func commonKey(b, h []any) (field string, bk, hk []string) {
	for _, f := range naturalKeys {
		bk, hk = keysBy(b, f), keysBy(h, f)
		if bk != nil && hk != nil {
			return f, bk, hk
		}
	}
	return "", nil, nil
}

// listKey is the natural key of one list (for naming the items of an
// added or removed one).
func listKey(l []any) (string, []string) {
	for _, f := range naturalKeys {
		if k := keysBy(l, f); k != nil {
			return f, k
		}
	}
	return "", nil
}

func itemPath(path, field string, keys []string, i int) string {
	if field == "" {
		return fmt.Sprintf("%s[%d]", path, i)
	}
	return fmt.Sprintf("%s[%s=%s]", path, field, keys[i])
}

// keysBy returns the value of field of every item, or nil unless every
// item is a map with a distinct scalar value of it. An empty list is
// keyed by anything.
func keysBy(l []any, field string) []string {
	keys := make([]string, 0, len(l))
	seen := map[string]bool{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		var k string
		switch v := m[field].(type) {
		case string:
			k = v
		case int, int64, uint64, float64:
			k = fmt.Sprint(v)
		default:
			return nil
		}
		if seen[k] {
			return nil
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

func union(a, b map[string]any) map[string]any {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

// secretPath reports whether a path of a Secret holds secret material.
func secretPath(p string) bool {
	return strings.HasPrefix(p, "data.") || strings.HasPrefix(p, "stringData.") ||
		p == "data" || p == "stringData" ||
		strings.HasPrefix(p, "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration")
}
