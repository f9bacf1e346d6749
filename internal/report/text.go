package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Text writes the plan for a terminal, like a Terraform plan.
func Text(w io.Writer, p *inventorydiff.Plan) error { return TextWith(w, p, Options{}) }

// TextWith is Text shown as opts say: with the unified style, each
// overlay's objects follow as unified YAML diffs.
func TextWith(w io.Writer, p *inventorydiff.Plan, opts Options) error {
	ew := &errWriter{w: w}
	ew.printf("kplan: %s\n\n", commits(p))
	for i := range p.Overlays {
		o := &p.Overlays[i]
		if !reported(o) {
			continue
		}
		if o.Status == inventorydiff.Failed {
			ew.printf("%s: failed to render (%s)\n", title(o), failureLine(o))
			if o.BaseErr != "" {
				ew.printf("  base: %s\n", o.BaseErr)
			}
			if o.HeadErr != "" {
				ew.printf("  head: %s\n", o.HeadErr)
			}
			ew.printf("\n")
			continue
		}
		if msg, _ := o.Problem(); msg != "" {
			ew.printf("%s: cannot be applied safely (%s)\n  %s\n", title(o), failureLine(o), msg)
			if o.Status == inventorydiff.Unchanged {
				ew.printf("\n")
				continue
			}
		}
		label := ""
		switch o.Status {
		case inventorydiff.New:
			label = " (new overlay)"
		case inventorydiff.Removed:
			label = " (overlay removed)"
			if len(o.Targets) > 0 {
				label = " (no longer a target: its objects stay in the cluster)"
			}
		case inventorydiff.Moved:
			label = " (moved from " + o.MovedFrom + ")"
		}
		ew.printf("%s%s: %s (inventory %s → %s)\n", title(o), label, overlayCounts(o), orNone(o.BaseHash), orNone(o.HeadHash))
		for _, why := range o.Dangerous {
			ew.printf("  ! DANGEROUS: %s\n", why)
		}
		if opts.unified() {
			textUnified(ew, o)
			continue
		}
		for _, k := range o.Added {
			ew.printf("  + %s\n", k)
			// The whole object: a reviewer reads what is created.
			ew.printf("%s", indent(o.AddedYAML[k], "      "))
		}
		for _, c := range o.Changed {
			if c.Replaced() {
				ew.printf("  ± %s → %s (replaced: generated name changed)\n", c.BaseKey, c.Key)
			} else {
				ew.printf("  ~ %s\n", c.Key)
			}
			for _, f := range c.Fields {
				ew.printf("      %s\n", f.Header())
				for _, l := range f.DiffLines() {
					ew.printf("        %s\n", l)
				}
			}
		}
		for _, k := range o.Pruned {
			ew.printf("  - %s (%s)\n", k, describe(k))
		}
		for _, k := range o.Detached {
			ew.printf("  ⏏ %s (%s, left in the cluster)\n", k, describe(k))
		}
		ew.printf("\n")
	}
	ew.printf("Plan: %s.\n", Summary(p))
	return ew.err
}

// textUnified prints an overlay's objects as diff -u prints files, so
// the output reads (and colours) as a diff.
func textUnified(ew *errWriter, o *inventorydiff.Overlay) {
	for _, k := range o.Detached {
		ew.printf("  ⏏ %s (%s, left in the cluster)\n", k, describe(k))
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
