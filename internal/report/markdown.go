package report

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// openLimit is the size up to which overlays' sections are open: a
// small plan reads without a click, a large one as its table first.
const openLimit = 20000

// detail is how much of each overlay the Markdown shows.
type detail int

const (
	withObjects   detail = iota // field diffs and added objects' YAML, or unified diffs
	withFields                  // field diffs
	withFieldsCut               // field diffs, long text diffs cut to their first lines
	tablesOnly                  // the objects, no field diffs
	countsOnly                  // the table of overlays only
)

// Markdown renders the plan for a comment, fitting it in limit
// characters (the forge's MaxCommentChars: internal/forge/github,
// internal/forge/gitlab). It drops added
// objects' YAML, then the tails of long text diffs, then field diffs,
// then per-object lists, then trailing overlays, rather than fail.
// header goes first (a hidden marker, say) and counts against limit.
func Markdown(p *inventorydiff.Plan, header string, limit int) string {
	return MarkdownWith(p, header, limit, Options{})
}

// MarkdownWith is Markdown shown as opts say: with the unified style,
// each overlay's objects as unified YAML diffs instead of field changes.
// Objects' YAML (or the unified diffs) go first when the plan is too
// big, then field changes, then object lists, then overlays.
func MarkdownWith(p *inventorydiff.Plan, header string, limit int, opts Options) string {
	s, _ := MarkdownFit(p, header, limit, opts)
	return s
}

// MarkdownFit is MarkdownWith, and says whether the Markdown is complete:
// every field change and added object's YAML (or unified diff) is in it.
// When it is not, it says so, and where opts.Complete points. limit
// counts characters, as forges count a comment's.
func MarkdownFit(p *inventorydiff.Plan, header string, limit int, opts Options) (string, bool) {
	return fit(p, header, limit, opts, inChars)
}

// MarkdownFitBytes is MarkdownFit with limit in bytes, for what is
// bounded in bytes: GitHub's job summary, kplan's --max-bytes.
func MarkdownFitBytes(p *inventorydiff.Plan, header string, limit int, opts Options) (string, bool) {
	return fit(p, header, limit, opts, inBytes)
}

// A measure is a unit a report is fitted in: its size of a string, and
// the longest prefix of a string within n of it, never cutting a
// character in two.
type measure struct {
	size func(string) int
	cut  func(s string, n int) string
}

var (
	inChars = measure{size: utf8.RuneCountInString, cut: forge.CutChars}
	inBytes = measure{size: func(s string) int { return len(s) }, cut: cutBytes}
)

// cutBytes is s cut to at most n bytes at the start of a character.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

func fit(p *inventorydiff.Plan, header string, limit int, opts Options, unit measure) (string, bool) {
	size := unit.size
	m := &md{p: p, opts: opts, groups: findGroups(p), images: images(p), sections: -1, limit: limit}
	for _, d := range []detail{withObjects, withFields, withFieldsCut} {
		s := header + m.render(d, -1, true)
		if len(s) > openLimit {
			s = header + m.render(d, -1, false)
		}
		if size(s) <= limit {
			return s, d == withObjects
		}
	}
	// The first overlays' field changes, as many as fit, and the others
	// in the table: the limit is filled with field changes before they
	// all go (a plan whose changes passed it by a little came out as
	// keys only, at half the size allowed).
	fits := func(n int) bool {
		m.sections = n
		return size(header+m.render(withFieldsCut, -1, false)) <= limit
	}
	lo, hi := 0, len(p.Overlays)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo > 0 {
		m.sections = lo
		return header + m.render(withFieldsCut, -1, false), false
	}
	m.sections = -1
	for _, d := range []detail{tablesOnly, countsOnly} {
		if s := header + m.render(d, -1, false); size(s) <= limit {
			return s, false
		}
	}
	// Even the table is too long: list as many overlays as fit.
	lo, hi = 0, len(p.Overlays)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if size(header+m.render(countsOnly, mid, false)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	// The summary alone too long cannot happen for sane limits.
	return unit.cut(header+m.render(countsOnly, lo, false), limit), false
}

// md renders one plan at several levels of detail.
type md struct {
	p      *inventorydiff.Plan
	opts   Options
	groups groups
	images []*imageChange
	// sections is how many overlays get a section (-1: all).
	sections int
	// limit is the size the report is fitted in.
	limit int
}

func (m *md) render(d detail, maxRows int, open bool) string {
	p := m.p
	var b strings.Builder
	fmt.Fprintf(&b, "### kplan: %s\n\n", Summary(p))
	unchanged := 0
	for i := range p.Overlays {
		if !reported(&p.Overlays[i]) {
			unchanged++
		}
	}
	fmt.Fprintf(&b, "Planned %s. %d %s unchanged.", commits(p), unchanged, plural(unchanged, "overlay", "overlays"))
	if n := p.Totals.Dangerous; n > 0 {
		fmt.Fprintf(&b, " ⚠️ **%d dangerous %s**", n, plural(n, "change", "changes"))
		if g := m.opts.DangerGate.sentence(); g != "" {
			fmt.Fprintf(&b, ": %s", g)
		}
		b.WriteString(".")
	}
	if n := len(p.IntroducedFailures()); n > 0 {
		fmt.Fprintf(&b, " ❌ **%d %s broken by this change**.", n, plural(n, "overlay", "overlays"))
	}
	b.WriteString("\n\n")
	writeRunning(&b, m.opts.Running)
	partial := m.sections >= 0 && d != countsOnly
	if d != withObjects {
		what := map[detail]string{
			withFields:    "Added objects' YAML is",
			withFieldsCut: fmt.Sprintf("Added objects' YAML and text diffs past their first %d lines are", cutLines),
			tablesOnly:    "Field changes and added objects' YAML are",
			countsOnly:    "Per-object details are",
		}[d]
		if m.opts.unified() && d == withFields {
			what = "Unified diffs are"
		}
		if m.opts.unified() && d == withFieldsCut {
			what = fmt.Sprintf("Unified diffs and text diffs past their first %d lines are", cutLines)
		}
		if partial {
			// Each cut text diff says so where it is cut.
			what = fmt.Sprintf("Added objects' YAML and the changes of all but the first %d overlays are", m.sections)
		}
		if m.opts.Complete != "" {
			fmt.Fprintf(&b, "> [!NOTE]\n> %s not in this comment (the forge's size limit): the complete report is %s.\n\n", what, m.opts.Complete)
		} else {
			fmt.Fprintf(&b, "> [!NOTE]\n> %s not in this report (--max-bytes %d): print it without --max-bytes for them.\n\n", what, m.limit)
		}
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
	all := append(order, existing...)
	// The table is what this change does: overlays that fail as they did
	// on base are one row, folded below.
	m.writeTable(&b, order, len(existing), maxRows)
	m.writeImages(&b, d)
	if s := noLongerPlanned(m.p, inline); s != "" {
		b.WriteString(s + "\n\n")
	}
	m.writeNotPlanned(&b)
	m.writeIgnored(&b)
	m.writeUnread(&b)
	if s := chartsLine(p, inline); s != "" {
		b.WriteString(escapeText(s) + ".\n\n") // the code spans hold no & < >
	}
	if d != countsOnly {
		folded := false
		for i, o := range all {
			if partial && i >= m.sections {
				fmt.Fprintf(&b, "…the changes of %d more overlays are in the table above only (size limit).\n\n", len(all)-i)
				break
			}
			if i == len(order) {
				folded = true
				fmt.Fprintf(&b, "<details><summary>%d %s already failing on base (not caused by this change)</summary>\n\n",
					len(existing), plural(len(existing), "overlay", "overlays"))
			}
			m.writeOverlay(&b, o, d, open && i < len(order))
		}
		if folded {
			b.WriteString("</details>\n\n")
		}
	}
	if f := footer(p); f != "" {
		fmt.Fprintf(&b, "<sub>%s</sub>\n", html.EscapeString(f))
	}
	return b.String()
}

// writeTable is one row per reported overlay: counts and marks, the plan
// at a glance.
func (m *md) writeTable(b *strings.Builder, overlays []*inventorydiff.Overlay, failingBefore, maxRows int) {
	if len(overlays) == 0 && failingBefore == 0 {
		return
	}
	shown := overlays
	if maxRows >= 0 && len(overlays) > maxRows {
		shown = overlays[:maxRows]
	}
	b.WriteString("| Overlay | Add | Change | Prune | |\n|---|---:|---:|---:|---|\n")
	for _, o := range shown {
		var marks []string
		switch o.Status {
		case inventorydiff.New:
			marks = append(marks, "new")
		case inventorydiff.Removed:
			marks = append(marks, "removed")
		case inventorydiff.Moved:
			marks = append(marks, "moved from `"+cell(o.MovedFrom)+"`")
		}
		if msg, introduced := o.Problem(); msg != "" && introduced {
			marks = append(marks, "❌ broken by this change")
		} else if msg != "" {
			marks = append(marks, "failing on base too")
		}
		if n := len(o.Dangerous); n > 0 {
			marks = append(marks, fmt.Sprintf("⚠️ %d dangerous", n))
		}
		if n := len(o.Detached); n > 0 {
			marks = append(marks, fmt.Sprintf("%d left in the cluster", n))
		}
		if o.Status == inventorydiff.Failed {
			fmt.Fprintf(b, "| `%s` | | | | %s |\n", cell(title(o)), strings.Join(marks, ", "))
			continue
		}
		fmt.Fprintf(b, "| `%s` | %d | %d | %d | %s |\n", cell(title(o)), len(o.Added), len(o.Changed), len(o.Pruned), strings.Join(marks, ", "))
	}
	if failingBefore > 0 {
		fmt.Fprintf(b, "| *%d %s already failing on base* | | | | not caused by this change |\n", failingBefore, plural(failingBefore, "overlay", "overlays"))
	}
	if len(shown) < len(overlays) {
		fmt.Fprintf(b, "\n…and %d more changed overlays not shown (size limit).\n", len(overlays)-len(shown))
	}
	b.WriteString("\n")
}

// writeImages lists the images the plan rolls out, old → new.
func (m *md) writeImages(b *strings.Builder, d detail) {
	if len(m.images) == 0 {
		return
	}
	max := map[detail]int{withObjects: 1 << 30, withFields: 1 << 30, withFieldsCut: 1 << 30, tablesOnly: 100, countsOnly: 20}[d]
	if m.sections >= 0 {
		// Only the first overlays' changes fit: so that they do, the
		// images are bounded as in the table-only comment (a plan of
		// hundreds of images left room for none, and a marker a few
		// bytes longer dropped every field change).
		max = min(max, 100)
	}
	perLine := 5
	if d == countsOnly {
		perLine = 2
	}
	fmt.Fprintf(b, "**Images** (%d %s)\n\n", len(m.images), plural(len(m.images), "change", "changes"))
	code := func(s string) string { return "`" + s + "`" }
	for i, ic := range m.images {
		if i == max {
			fmt.Fprintf(b, "- …and %d more image changes (size limit)\n", len(m.images)-i)
			break
		}
		change := "new " + inline(ic.New)
		if ic.Old != "" {
			change = inline(ic.Old) + " → " + inline(ic.New)
		}
		if ic.New == "" {
			change = "removed " + inline(ic.Old)
		}
		fmt.Fprintf(b, "- %s: %s\n", change, objectsText(ic.Objects, perLine, code))
	}
	b.WriteString("\n")
}

// writeIgnored says what the plan's ignore rules hid: nothing is hidden
// without the report saying so.
func (m *md) writeIgnored(b *strings.Builder) {
	rules := shownRules(m.p)
	def := hiddenByDefault(m.p, inline, "shown with `default-ignore: false` (Action), `ignore: {defaults: false}` (`.kplan.yaml`) or `--no-default-ignore`")
	if len(rules) == 0 && def == "" {
		return
	}
	b.WriteString("**Ignored** (noise filters; adds, prunes, dangers and Secret data are never ignored)\n\n")
	if def != "" {
		fmt.Fprintf(b, "- %s\n", def)
	}
	for _, r := range rules {
		src := ""
		if r.Source != "" {
			src = " (" + r.Source + ")"
		}
		fmt.Fprintf(b, "- %s%s: %s\n", inline(r.Rule), src, ignoredText(r))
	}
	b.WriteString("\n")
}

// writeNotPlanned lists the engines' objects the plan does not plan,
// with why.
func (m *md) writeNotPlanned(b *strings.Builder) {
	lines := notPlanned(m.p, inline)
	if lines == nil {
		return
	}
	b.WriteString(lines[0] + ":\n")
	for _, l := range lines[1:] {
		b.WriteString("- " + escapeText(l) + "\n")
	}
	b.WriteString("\n")
}

// writeUnread lists the changed files no overlay reads: the plan cannot
// say what changing them does.
func (m *md) writeUnread(b *strings.Builder) {
	if len(m.p.Unread) == 0 {
		return
	}
	const max = 50
	fmt.Fprintf(b, "**No overlay reads these changed files** (%d): this plan cannot show what they change\n\n", len(m.p.Unread))
	for i, u := range m.p.Unread {
		if i == max {
			fmt.Fprintf(b, "- …and %d more\n", len(m.p.Unread)-i)
			break
		}
		if u.Hint != "" {
			fmt.Fprintf(b, "- ⚠️ %s — %s\n", inline(u.Path), u.Hint)
		} else {
			fmt.Fprintf(b, "- %s\n", inline(u.Path))
		}
	}
	b.WriteString("\n")
}

// inline is text as inline code, whatever backticks it holds.
func inline(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

func (m *md) writeOverlay(b *strings.Builder, o *inventorydiff.Overlay, d detail, open bool) {
	attr := ""
	if open {
		attr = " open"
	}
	fmt.Fprintf(b, "<details%s><summary><b><code>%s</code></b> — ", attr, html.EscapeString(title(o)))
	if o.Status == inventorydiff.Failed {
		if _, introduced := o.Problem(); introduced {
			b.WriteString("❌ failed to render: introduced by this change</summary>\n\n")
		} else {
			b.WriteString("failed to render, already on base (not caused by this change)</summary>\n\n")
		}
		for _, e := range []struct{ side, err string }{{"base", o.BaseErr}, {"head", o.HeadErr}} {
			if e.err != "" {
				fmt.Fprintf(b, "On %s:\n\n", e.side)
				codeBlock(b, "", e.err)
			}
		}
		if c := chartsOf(o); c != "" {
			fmt.Fprintf(b, "%s.\n\n", escapeText(c))
		}
		b.WriteString("</details>\n\n")
		return
	}
	switch o.Status {
	case inventorydiff.New:
		b.WriteString("new overlay, ")
	case inventorydiff.Removed:
		if len(o.Targets) > 0 {
			b.WriteString("no longer a target (its objects stay in the cluster), ")
		} else {
			b.WriteString("overlay removed, ")
		}
	case inventorydiff.Moved:
		fmt.Fprintf(b, "moved from <code>%s</code>, ", html.EscapeString(o.MovedFrom))
	}
	b.WriteString(html.EscapeString(overlayCounts(o)))
	if len(o.Dangerous) > 0 {
		b.WriteString(" ⚠️")
	}
	b.WriteString("</summary>\n\n")
	if msg, _ := o.Problem(); msg != "" {
		fmt.Fprintf(b, "> ❌ **Cannot be applied safely** (%s): %s\n\n", failureLine(o), msg)
	}
	for _, f := range o.Dangerous {
		fmt.Fprintf(b, "> ⚠️ **Dangerous:** %s (`%s`)\n", f.Reason, f.Rule)
	}
	if len(o.Dangerous) > 0 {
		b.WriteString("\n")
	}
	if changed := inventoryChange(o); changed != "" {
		fmt.Fprintf(b, "%s\n\n", changed)
	}
	if c := chartsOf(o); c != "" {
		fmt.Fprintf(b, "%s.\n\n", escapeText(c))
	}
	if objs := m.objects(o, d); objs != "" {
		codeBlock(b, "diff", objs)
	}
	if d == withObjects {
		if m.opts.unified() {
			var diff strings.Builder
			for _, u := range unifiedDiffs(o) {
				diff.WriteString(u.diff)
			}
			if diff.Len() > 0 {
				b.WriteString("<details><summary>Unified diff</summary>\n\n")
				codeBlock(b, "diff", diff.String())
				b.WriteString("</details>\n\n")
			}
		} else {
			for _, k := range o.Added {
				fmt.Fprintf(b, "<details><summary>+ %s: YAML</summary>\n\n", html.EscapeString(inventorydiff.Name(k)))
				codeBlock(b, "yaml", o.AddedYAML[k])
				b.WriteString("</details>\n\n")
			}
		}
	}
	writeNotes(b, o)
	b.WriteString("</details>\n\n")
}

// inventoryChange says that the inventory an overlay records its objects
// in changes (the dangers say what that does); "" when it does not.
func inventoryChange(o *inventorydiff.Overlay) string {
	b, h := o.BaseInventory, o.HeadInventory
	if b == nil || h == nil || *b == *h {
		return ""
	}
	return fmt.Sprintf("Inventory: %s → %s.", b, h)
}

// fluxNote starts the notes internal/plan gives a Flux target: what it
// could not render or know offline, not kustomize's warnings.
const fluxNote = "Flux: "

// argoNote starts the notes internal/plan gives an Argo CD target.
const argoNote = "Argo CD: "

// writeNotes shows kustomize's warnings about the overlay's files, and
// what a Flux target could not render or know offline.
func writeNotes(b *strings.Builder, o *inventorydiff.Overlay) {
	var kust, flux, argo, variants []string
	for _, n := range o.Notes {
		if rest, ok := strings.CutPrefix(n, fluxNote); ok {
			flux = append(flux, rest)
		} else if rest, ok := strings.CutPrefix(n, argoNote); ok {
			argo = append(argo, rest)
		} else if rest, ok := strings.CutPrefix(n, danger.VariantNote); ok {
			variants = append(variants, rest)
		} else {
			kust = append(kust, n)
		}
	}
	for _, group := range []struct {
		title string
		notes []string
	}{{"Flux:", flux}, {"Argo CD:", argo}, {"Also rendered by other overlays (not checked as duplicates: nothing says they deploy to one cluster):", variants}} {
		if len(group.notes) == 0 {
			continue
		}
		b.WriteString("> [!NOTE]\n> " + group.title + "\n")
		for _, n := range group.notes {
			fmt.Fprintf(b, "> - %s\n", html.EscapeString(n))
		}
		b.WriteString("\n")
	}
	if len(kust) == 0 {
		return
	}
	b.WriteString("> [!NOTE]\n> kustomize warns:\n")
	for _, n := range kust {
		file, msg, ok := strings.Cut(n, ": ")
		if ok {
			fmt.Fprintf(b, "> - `%s`: %s\n", file, msg)
		} else {
			fmt.Fprintf(b, "> - %s\n", n)
		}
	}
	b.WriteString("\n")
}

// objects is the overlay's objects as one diff block: added ones as +,
// pruned ones as -, then changed ones, each under an @@ header with its
// field changes as ! lines (a multi-line value's line diff follows its
// field, its lines keeping their +/- so they are coloured; withFieldsCut
// keeps its first cutLines lines). Without fields (tablesOnly and less,
// or unified diffs shown), changed objects are one ! line each.
func (m *md) objects(o *inventorydiff.Overlay, d detail) string {
	fields := d <= withFieldsCut && !(d == withObjects && m.opts.unified())
	var diff strings.Builder
	// Adds and prunes first: each is one line, and a line after an @@
	// header would read as a field of that object.
	for _, k := range o.Added {
		fmt.Fprintf(&diff, "+ %s\n", inventorydiff.Name(k))
	}
	for _, k := range o.Pruned {
		fmt.Fprintf(&diff, "- %s\n", inventorydiff.Name(k))
	}
	for _, k := range o.Detached {
		fmt.Fprintf(&diff, "  %s: left in the cluster (not pruned)\n", inventorydiff.Name(k))
	}
	for _, c := range o.Changed {
		name := changeName(c)
		if !fields || len(c.Fields) == 0 {
			fmt.Fprintf(&diff, "! %s\n", name)
			continue
		}
		self := member{o.Path, c.Key}
		if g := m.groups[self]; g != nil {
			if !g.first(self) {
				firstOverlay := g.members[0].overlay
				if i := g.index(self); firstOverlay != o.Path || i >= maxGroupNames {
					where := ""
					if firstOverlay != o.Path {
						where = " in " + firstOverlay
					}
					fmt.Fprintf(&diff, "! %s: same change as %s%s\n", name, inventorydiff.Name(g.members[0].key), where)
				}
				continue
			}
			// The headline's lines are context (a space first): uncoloured.
			fmt.Fprintf(&diff, "@@ %s @@\n", name)
			for _, l := range g.headline(maxGroupNames - 1) {
				diff.WriteString("  " + l + "\n")
			}
		} else {
			fmt.Fprintf(&diff, "@@ %s @@\n", name)
		}
		for _, f := range c.Fields {
			line := f.Header()
			switch f.Op {
			case "~":
				line = "!" + line[1:]
			case "order":
				line = "! " + line
			}
			diff.WriteString(line + "\n")
			lines := f.DiffLines()
			if d == withFieldsCut && len(lines) > cutLines {
				more := len(lines) - cutLines
				lines = append(lines[:cutLines:cutLines], fmt.Sprintf("… %d more lines of this text diff (size limit)", more))
			}
			for _, l := range lines {
				switch l[0] {
				case '+', '-', ' ':
					diff.WriteString(l[:1] + "      " + l[1:] + "\n")
				default: // @@ hunk headers, "\ No newline": context, not a change
					diff.WriteString("       " + l + "\n")
				}
			}
		}
	}
	return diff.String()
}

// cutLines is how many lines of a text diff withFieldsCut shows: one
// long embedded file must not push every other field change out.
const cutLines = 30

// maxGroupNames is how many members a group's headline names, the one
// the change is shown on included; the others say "same change as".
const maxGroupNames = 6

func (g *group) index(m member) int {
	if i, ok := g.pos[m]; ok {
		return i
	}
	return -1
}

// changeName names a changed object; a replaced generated object shows
// both names.
func changeName(c inventorydiff.Change) string {
	if c.Replaced() {
		return inventorydiff.Name(c.BaseKey) + " → " + inventorydiff.Name(c.Key) + ": replaced (generated name changed)"
	}
	return inventorydiff.Name(c.Key)
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

// cell escapes text for a Markdown table cell: keys contain "|".
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
