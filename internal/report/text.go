package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Text writes the plan for a terminal, like a Terraform plan.
func Text(w io.Writer, p *inventorydiff.Plan) error { return TextWith(w, p, Options{}) }

// TextWith is Text shown as opts say: with the unified style, each
// overlay's objects follow as unified YAML diffs.
func TextWith(w io.Writer, p *inventorydiff.Plan, opts Options) error {
	ew := &errWriter{w: w}
	ew.printf("kplan: %s\n\n", commits(p))
	textRunning(ew, opts.Running)
	gs := findGroups(p)
	for i := range p.Overlays {
		o := &p.Overlays[i]
		if !reported(o) {
			continue
		}
		if o.Status == inventorydiff.Failed {
			textFailed(ew, o)
			continue
		}
		if !textProblem(ew, o) {
			continue
		}
		textHeader(ew, o)
		if opts.unified() {
			textUnified(ew, o)
			continue
		}
		textObjects(ew, o, gs)
	}
	textFooter(ew, p)
	ew.printf("Plan: %s.\n", Summary(p))
	return ew.err
}

// textFailed prints an overlay that failed to render, on either side,
// with each side's error.
func textFailed(ew *errWriter, o *inventorydiff.Overlay) {
	if o.HeadErr == "" {
		// Failing on base only: the change mends it (its objects
		// are not compared, base has none to compare with).
		ew.printf("%s: renders again (mended by this change; it failed on base)\n", title(o))
	} else {
		ew.printf("%s: failed to render (%s)\n", title(o), failureLine(o))
	}
	if o.BaseErr != "" {
		ew.printf("  base: %s\n", o.BaseErr)
	}
	if o.HeadErr != "" {
		ew.printf("  head: %s\n", o.HeadErr)
	}
	if c := chartsOf(o); c != "" {
		ew.printf("  %s\n", c)
	}
	ew.printf("\n")
}

// textProblem prints what keeps the overlay from being applied safely,
// if anything, and says whether its objects follow (not when it has no
// change).
func textProblem(ew *errWriter, o *inventorydiff.Overlay) bool {
	msg, _ := o.Problem()
	if msg == "" {
		return true
	}
	ew.printf("%s: cannot be applied safely (%s)\n  %s\n", title(o), failureLine(o), msg)
	if o.Status == inventorydiff.Unchanged {
		ew.printf("\n")
		return false
	}
	return true
}

// overlayLabel says what became of the overlay itself: new, removed (or
// no longer a target), moved; "" when it was changed.
func overlayLabel(o *inventorydiff.Overlay) string {
	switch o.Status {
	case inventorydiff.New:
		return " (new overlay)"
	case inventorydiff.Removed:
		if len(o.Targets) > 0 {
			return " (no longer a target: its objects stay in the cluster)"
		}
		return " (overlay removed)"
	case inventorydiff.Moved:
		return " (moved from " + o.MovedFrom + ")"
	}
	return ""
}

// textHeader prints the overlay's line with its counts, its inventory
// change, its dangerous findings and its notes.
func textHeader(ew *errWriter, o *inventorydiff.Overlay) {
	ew.printf("%s%s: %s\n", title(o), overlayLabel(o), overlayCounts(o))
	if changed := inventoryChange(o); changed != "" {
		ew.printf("  %s\n", changed)
	}
	for _, f := range o.Dangerous {
		ew.printf("  ! DANGEROUS: %s\n", f)
	}
	for _, n := range o.Notes {
		ew.printf("  note: %s\n", textNote(n))
	}
	if c := chartsOf(o); c != "" {
		ew.printf("  %s\n", c)
	}
}

// textNote is a note as the text report words it: Flux and danger
// variant notes without their prefix, Argo CD notes whole, the rest
// kustomize's warnings.
func textNote(n string) string {
	if rest, ok := strings.CutPrefix(n, fluxNote); ok {
		return rest
	} else if rest, ok := strings.CutPrefix(n, danger.VariantNote); ok {
		return rest
	} else if strings.HasPrefix(n, argoNote) {
		return n
	}
	return "kustomize warns: " + n
}

// textObjects prints the overlay's added objects whole, its changed
// objects field by field (a change shared with others once, on the
// first), its pruned and detached objects.
func textObjects(ew *errWriter, o *inventorydiff.Overlay, gs groups) {
	for _, k := range o.Added {
		ew.printf("  + %s\n", inventorydiff.Name(k))
		// The whole object: a reviewer reads what is created.
		ew.printf("%s", indent(o.AddedYAML[k], "      "))
	}
	for _, c := range o.Changed {
		textChange(ew, o, c, gs)
	}
	for _, k := range o.Pruned {
		ew.printf("  - %s\n", inventorydiff.Name(k))
	}
	for _, k := range o.Detached {
		ew.printf("    %s: left in the cluster (not pruned)\n", inventorydiff.Name(k))
	}
	ew.printf("\n")
}

// textChange prints one changed object: its field changes, headed by
// the other objects changed alike, or a pointer to the object of its
// group they are shown on.
func textChange(ew *errWriter, o *inventorydiff.Overlay, c inventorydiff.Change, gs groups) {
	self := member{o.Path, c.Key}
	g := gs[self]
	switch {
	case g != nil && !g.first(self):
		where := ""
		if g.members[0].overlay != o.Path {
			where = " in " + g.members[0].overlay
		}
		ew.printf("  ~ %s: same change as %s%s\n", changeName(c), inventorydiff.Name(g.members[0].key), where)
		return
	case g != nil:
		ew.printf("  ~ %s\n", changeName(c))
		for _, l := range g.headline(maxGroupNames - 1) {
			ew.printf("    %s\n", l)
		}
	default:
		ew.printf("  ~ %s\n", changeName(c))
	}
	for _, f := range c.Fields {
		ew.printf("      %s\n", f.Header())
		for _, l := range f.DiffLines() {
			ew.printf("        %s\n", l)
		}
	}
}

// textFooter prints what the plan leaves out: overlays no longer
// planned, what the default noise set and each ignore rule hid, and the
// changed files no overlay reads.
func textFooter(ew *errWriter, p *inventorydiff.Plan) {
	if s := noLongerPlanned(p, func(s string) string { return s }); s != "" {
		ew.printf("%s.\n", s)
	}
	if lines := notPlanned(p, func(s string) string { return s }); lines != nil {
		ew.printf("%s:\n", lines[0])
		for _, l := range lines[1:] {
			ew.printf("  %s\n", l)
		}
	}
	if def := hiddenByDefault(p, func(s string) string { return s }, "--no-default-ignore shows them"); def != "" {
		ew.printf("%s.\n", def)
	}
	for _, r := range shownRules(p) {
		src := ""
		if r.Source != "" {
			src = " (" + r.Source + ")"
		}
		ew.printf("Ignored %s%s: %s.\n", r.Rule, src, ignoredText(r))
	}
	if s := chartsLine(p, func(s string) string { return s }); s != "" {
		ew.printf("%s.\n", s)
	}
	if len(p.Unread) > 0 {
		ew.printf("No overlay reads these changed files (this plan cannot show what they change):\n")
		for _, u := range p.Unread {
			if u.Hint != "" {
				ew.printf("  %s — %s\n", u.Path, u.Hint)
			} else {
				ew.printf("  %s\n", u.Path)
			}
		}
	}
}

// textUnified prints an overlay's objects as diff -u prints files, so
// the output reads (and colours) as a diff.
func textUnified(ew *errWriter, o *inventorydiff.Overlay) {
	for _, k := range o.Detached {
		ew.printf("    %s: left in the cluster (not pruned)\n", inventorydiff.Name(k))
	}
	for _, d := range unifiedDiffs(o) {
		ew.printf("%s", d.diff)
	}
	ew.printf("\n")
}

// indent prefixes every line of text.
func indent(text, prefix string) string {
	if text == "" {
		return ""
	}
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// errWriter keeps the first write error so printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
