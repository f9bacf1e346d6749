package report

import (
	"fmt"
	"html"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// MaxCommentSize is GitHub's limit on an issue comment's body.
const MaxCommentSize = 65536

// detail is how much of each overlay the Markdown shows.
type detail int

const (
	withObjects detail = iota // tables, field diffs and added objects' YAML, or unified diffs
	withFields                // tables and field diffs
	tablesOnly                // tables, no field diffs
	countsOnly                // one row per overlay
)

// Markdown renders the plan for a PR comment or job summary, fitting it in
// limit characters (MaxCommentSize for a comment). It drops added
// objects' YAML, then field diffs, then per-object tables, then trailing
// overlays, rather than fail.
// header goes first (a hidden marker, say) and counts against limit.
func Markdown(p *inventorydiff.Plan, header string, limit int) string {
	return MarkdownWith(p, header, limit, Options{})
}

// MarkdownWith is Markdown shown as opts say: with the unified style,
// each overlay's objects as unified YAML diffs instead of field changes.
// Objects' YAML (or the unified diffs) go first when the plan is too
// big, then field changes, then tables, then overlays.
func MarkdownWith(p *inventorydiff.Plan, header string, limit int, opts Options) string {
	for _, d := range []detail{withObjects, withFields, tablesOnly, countsOnly} {
		if s := header + markdown(p, d, -1, opts); len(s) <= limit {
			return s
		}
	}
	// Even the counts are too long: list as many overlays as fit.
	lo, hi := 0, len(p.Overlays)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(header+markdown(p, countsOnly, mid, opts)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	s := header + markdown(p, countsOnly, lo, opts)
	if len(s) > limit { // the summary alone is too long: cannot happen for sane limits
		s = s[:limit]
	}
	return s
}

func markdown(p *inventorydiff.Plan, d detail, maxOverlays int, opts Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### kplan: %s\n\n", Summary(p))
	unchanged := 0
	for i := range p.Overlays {
		if !reported(&p.Overlays[i]) {
			unchanged++
		}
	}
	fmt.Fprintf(&b, "Planned %s. %d %s unchanged.", commits(p), unchanged, plural(unchanged, "overlay", "overlays"))
	if p.Totals.Dangerous > 0 {
		fmt.Fprintf(&b, " ⚠️ **%d dangerous %s**.", p.Totals.Dangerous, plural(p.Totals.Dangerous, "prune", "prunes"))
	}
	b.WriteString("\n\n")
	switch d {
	case withFields:
		what := "Added objects' YAML"
		if opts.unified() {
			what = "Unified diffs"
		}
		fmt.Fprintf(&b, "_%s omitted to fit GitHub's comment size limit; run `kplan diff` locally for them._\n\n", what)
	case tablesOnly:
		b.WriteString("_Field-level changes and object YAML omitted to fit GitHub's comment size limit; run `kplan diff` locally for them._\n\n")
	case countsOnly:
		b.WriteString("_Per-object details omitted to fit GitHub's comment size limit; run `kplan diff` locally or read the JSON report._\n\n")
		b.WriteString("| Overlay | Add | Change | Prune | Status |\n|---|---:|---:|---:|---|\n")
	}
	// What the change does comes first; overlays that only fail as they
	// already did on base go last, folded: they are not this change's.
	var order, existing []*inventorydiff.Overlay
	for i := range p.Overlays {
		o := &p.Overlays[i]
		switch msg, introduced := o.Problem(); {
		case !reported(o):
		case msg != "" && !introduced && o.Status == inventorydiff.Failed:
			existing = append(existing, o)
		default:
			order = append(order, o)
		}
	}
	shown, listed := 0, 0
	folded := false
	for i, o := range append(order, existing...) {
		if i == len(order) && d != countsOnly && (maxOverlays < 0 || shown < maxOverlays) {
			fmt.Fprintf(&b, "<details><summary>%d %s already failing on base (not caused by this change)</summary>\n\n",
				len(existing), plural(len(existing), "overlay", "overlays"))
			folded = true
		}
		listed++
		if maxOverlays >= 0 && shown >= maxOverlays {
			continue
		}
		shown++
		if d == countsOnly {
			status := string(o.Status)
			if msg, introduced := o.Problem(); msg != "" && introduced {
				status += " ❌"
			}
			if len(o.Dangerous) > 0 {
				status += " ⚠️"
			}
			fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %s |\n", cell(title(o)), len(o.Added), len(o.Changed), len(o.Pruned), status)
			continue
		}
		writeOverlay(&b, o, d, opts)
	}
	if folded {
		b.WriteString("</details>\n\n")
	}
	if listed > shown {
		fmt.Fprintf(&b, "\n…and %d more changed overlays not shown (size limit).\n", listed-shown)
	}
	return b.String()
}

func writeOverlay(b *strings.Builder, o *inventorydiff.Overlay, d detail, opts Options) {
	fmt.Fprintf(b, "#### `%s` — ", title(o))
	switch o.Status {
	case inventorydiff.Failed:
		if _, introduced := o.Problem(); introduced {
			b.WriteString("❌ failed to render: introduced by this change\n\n")
		} else {
			b.WriteString("failed to render, already on base (not caused by this change)\n\n")
		}
		for _, e := range []struct{ side, err string }{{"base", o.BaseErr}, {"head", o.HeadErr}} {
			if e.err != "" {
				fmt.Fprintf(b, "On %s:\n```\n%s\n```\n", e.side, strings.ReplaceAll(e.err, "```", "'''"))
			}
		}
		b.WriteString("\n")
		return
	case inventorydiff.New:
		b.WriteString("new overlay, ")
	case inventorydiff.Removed:
		if len(o.Targets) > 0 {
			b.WriteString("no longer a target (its objects stay in the cluster), ")
		} else {
			b.WriteString("overlay removed, ")
		}
	case inventorydiff.Moved:
		fmt.Fprintf(b, "moved from `%s`, ", o.MovedFrom)
	}
	fmt.Fprintf(b, "%s\n\n", overlayCounts(o))
	if msg, _ := o.Problem(); msg != "" {
		fmt.Fprintf(b, "> ❌ **Cannot be applied safely** (%s): %s\n\n", failureLine(o), msg)
	}
	if inv := o.HeadInventory; inv != nil {
		fmt.Fprintf(b, "Inventory: %s. ", inv)
	}
	fmt.Fprintf(b, "Inventory hash `%s` → `%s`", orNone(o.BaseHash), orNone(o.HeadHash))
	if o.Unchanged > 0 {
		fmt.Fprintf(b, ", %d unchanged", o.Unchanged)
	}
	b.WriteString("\n\n")
	for _, why := range o.Dangerous {
		fmt.Fprintf(b, "> ⚠️ **Dangerous:** %s\n", why)
	}
	if len(o.Dangerous) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("| | Object | Action |\n|---|---|---|\n")
	for _, k := range o.Added {
		fmt.Fprintf(b, "| + | `%s` | add |\n", cell(k))
	}
	for _, c := range o.Changed {
		if c.Replaced() {
			fmt.Fprintf(b, "| ± | `%s` → `%s` | replace (generated name) |\n", cell(c.BaseKey), cell(c.Key))
		} else {
			fmt.Fprintf(b, "| ~ | `%s` | change |\n", cell(c.Key))
		}
	}
	for _, k := range o.Pruned {
		fmt.Fprintf(b, "| - | `%s` (%s) | prune |\n", cell(k), cell(describe(k)))
	}
	for _, k := range o.Detached {
		fmt.Fprintf(b, "| ⏏ | `%s` (%s) | left in the cluster (not pruned) |\n", cell(k), cell(describe(k)))
	}
	b.WriteString("\n")
	switch {
	case d == withFields:
		writeFields(b, o)
	case d != withObjects:
	case opts.unified():
		var diff strings.Builder
		for _, u := range unifiedDiffs(o) {
			diff.WriteString(u.diff)
		}
		if diff.Len() > 0 {
			b.WriteString("<details><summary>Unified diff</summary>\n\n")
			codeBlock(b, "diff", diff.String())
			b.WriteString("</details>\n\n")
		}
	default:
		writeFields(b, o)
		for _, k := range o.Added {
			fmt.Fprintf(b, "<details><summary>+ <code>%s</code> (%s)</summary>\n\n", html.EscapeString(k), html.EscapeString(describe(k)))
			codeBlock(b, "yaml", o.AddedYAML[k])
			b.WriteString("</details>\n\n")
		}
	}
}

// writeFields writes the overlay's field changes as one diff block: "!"
// lines read as changes, a multi-line value's line diff follows its
// field, its lines keeping their +/- so they are coloured.
func writeFields(b *strings.Builder, o *inventorydiff.Overlay) {
	if !hasFields(o) {
		return
	}
	var diff strings.Builder
	for _, c := range o.Changed {
		if len(c.Fields) == 0 {
			continue
		}
		fmt.Fprintf(&diff, "@@ %s @@\n", c.Key)
		for _, f := range c.Fields {
			line := f.Header()
			switch f.Op {
			case "~":
				line = "!" + line[1:]
			case "order":
				line = "! " + line
			}
			diff.WriteString(line + "\n")
			for _, l := range f.DiffLines() {
				switch l[0] {
				case '+', '-', ' ':
					diff.WriteString(l[:1] + "      " + l[1:] + "\n")
				default: // @@ hunk headers, "\ No newline": context, not a change
					diff.WriteString("       " + l + "\n")
				}
			}
		}
	}
	b.WriteString("<details><summary>Field changes</summary>\n\n")
	codeBlock(b, "diff", diff.String())
	b.WriteString("</details>\n\n")
}

// codeBlock writes text as a fenced code block, its fence longer than any
// run of backticks in it (CommonMark), so nothing in it can end it.
func codeBlock(b *strings.Builder, lang, text string) {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	b.WriteString(fence + lang + "\n" + text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(fence + "\n\n")
}

func hasFields(o *inventorydiff.Overlay) bool {
	for _, c := range o.Changed {
		if len(c.Fields) > 0 {
			return true
		}
	}
	return false
}

// cell escapes an object key for a Markdown table cell: keys contain "|".
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func orNone(h string) string {
	if h == "" {
		return "none"
	}
	return h
}
