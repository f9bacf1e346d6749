// Package gate says whether a plan fails the CI job that made it: the
// overlays the change breaks (not those that already failed on base), a
// crash of the planner, and dangerous changes no label acknowledged. The
// CI front ends (internal/action, internal/gitlabci) call it with their
// own names for the settings and the change, so that messages speak the
// user's configuration.
package gate

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/report"
)

// Names are how a front end spells what the messages point at.
type Names struct {
	// Change is "pull request" or "merge request"; Comment is where the
	// plan is shown ("the plan comment", "the plan note").
	Change, Comment string
	// NoFailOnError and NoFailOnDangerous turn the checks off, as the
	// user writes it ("set fail-on-error: false").
	NoFailOnError, NoFailOnDangerous string
	// LabelRerun says how adding the label re-runs the job, "" when it
	// needs nothing said.
	LabelRerun string
}

// Check is the job's failures, joined; nil passes. failOnError fails on
// the overlays the change breaks; a crash fails whatever it says.
func Check(p *inventorydiff.Plan, failOnError bool, g report.DangerGate, n Names, log *slog.Logger) error {
	introduced := p.IntroducedFailures()
	if existing := preexistingFailures(p); len(existing) > 0 {
		log.Warn("overlays that already fail on the base commit: reported in the plan, not failing the job", "overlays", strings.Join(existing, ", "))
	}
	var failures []error
	if failOnError && len(introduced) > 0 {
		failures = append(failures, fmt.Errorf("this change breaks %d %s: %s (see %s; %s to only report)",
			len(introduced), plural(len(introduced), "overlay", "overlays"), strings.Join(introduced, ", "), n.Comment, n.NoFailOnError))
	}
	if crashed := p.Crashed(); len(crashed) > 0 {
		// Whatever fail-on-error says: what the change does there is unknown.
		failures = append(failures, fmt.Errorf("planning %s crashed (a bug in kplan; %s shows the panic): please report it at %s",
			strings.Join(crashed, ", "), n.Comment, crash.ReportURL))
	}
	if err := dangerous(p, g, n, log); err != nil {
		failures = append(failures, err)
	}
	return errors.Join(failures...)
}

// dangerous fails on the plan's dangerous findings when the gate says so
// and no label acknowledged them.
func dangerous(p *inventorydiff.Plan, g report.DangerGate, n Names, log *slog.Logger) error {
	count := p.Totals.Dangerous
	if count == 0 || !g.Fails {
		return nil
	}
	var rules []string
	for _, o := range p.Overlays {
		for _, f := range o.Dangerous {
			if !slices.Contains(rules, f.Rule) {
				rules = append(rules, f.Rule)
			}
		}
	}
	if g.Acknowledged {
		log.Info("dangerous changes acknowledged by the "+n.Change+"'s label", "count", count, "rules", strings.Join(rules, ","), "label", g.Label)
		return nil
	}
	how := "fix them"
	if g.Label != "" {
		how += fmt.Sprintf(", or have a maintainer add the label %q to the %s", g.Label, n.Change)
		if n.LabelRerun != "" {
			how += " (" + n.LabelRerun + ")"
		}
	}
	return fmt.Errorf("the plan has %d dangerous %s (%s; see %s): %s, or %s to only report",
		count, plural(count, "change", "changes"), strings.Join(rules, ", "), n.Comment, how, n.NoFailOnDangerous)
}

// preexistingFailures are the overlays that fail on head as they already
// did on base: the complement of IntroducedFailures.
func preexistingFailures(p *inventorydiff.Plan) []string {
	var out []string
	for i := range p.Overlays {
		if msg, introduced := p.Overlays[i].Problem(); msg != "" && !introduced {
			out = append(out, p.Overlays[i].Path)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
