package report

import (
	"fmt"
	"io"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Text writes the plan for a terminal, like a Terraform plan.
func Text(w io.Writer, p *inventorydiff.Plan) error {
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
		for _, k := range o.Added {
			ew.printf("  + %s\n", k)
		}
		for _, c := range o.Changed {
			if c.Replaced() {
				ew.printf("  ± %s → %s (replaced: generated name changed)\n", c.BaseKey, c.Key)
			} else {
				ew.printf("  ~ %s\n", c.Key)
			}
			for _, f := range c.Fields {
				ew.printf("      %s\n", f)
			}
		}
		for _, k := range o.Pruned {
			ew.printf("  - %s\n", k)
		}
		for _, k := range o.Detached {
			ew.printf("  ⏏ %s (left in the cluster)\n", k)
		}
		ew.printf("\n")
	}
	ew.printf("Plan: %s.\n", Summary(p))
	return ew.err
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
