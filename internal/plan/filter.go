package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNoMatch is the category of NoMatchError, for callers that branch.
var ErrNoMatch = errors.New("matches no overlay")

// NoMatchError says which of the filter's patterns (Options.Filter)
// match no overlay on either side: a typo in a glob must not be a green,
// empty plan. Front ends name the patterns as their users gave them.
type NoMatchError struct {
	Include, Exclude []string
	// Known are a few of the directories (or engines' targets) the
	// patterns could have matched, for the message.
	Known []string
}

func (e *NoMatchError) Error() string {
	var parts []string
	for _, p := range e.Include {
		parts = append(parts, fmt.Sprintf("overlay pattern %q", p))
	}
	for _, p := range e.Exclude {
		parts = append(parts, fmt.Sprintf("exclude pattern %q", p))
	}
	return strings.Join(parts, ", ") + " " + e.Hint()
}

// Hint says what the patterns could match, for a front end's wording.
func (e *NoMatchError) Hint() string {
	s := "matches no overlay of base or head"
	if len(e.Known) > 0 {
		s += " (there are " + strings.Join(e.Known, ", ")
		if len(e.Known) == maxKnown {
			s += ", …"
		}
		s += ")"
	}
	return s + ": fix the glob (doublestar, relative to the repository root)"
}

func (e *NoMatchError) Is(target error) bool { return target == ErrNoMatch }

// maxKnown is how many directories a NoMatchError names.
const maxKnown = 5

// checkFilter refuses filter patterns that match none of what the plan
// could plan: each side's overlays (its .kplan.yaml targets, else every
// kustomization that builds on its own) and the targets of the engines
// planned (a Flux Kustomization by path and namespace/name).
func (p *planner) checkFilter(sides [2]*side) error {
	f := p.opts.Filter
	if !f.On() {
		return nil
	}
	var names []string
	for _, sd := range sides {
		if sd.targets != nil {
			names = append(names, sd.targets.Overlays()...)
			continue
		}
		for dir := range sd.tree.Kustomizations {
			if sd.tree.Renderable(dir) {
				names = append(names, dir)
			}
		}
	}
	for _, m := range p.modes {
		names = append(names, m.names()...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	inc, exc := f.Unmatched(names)
	if len(inc)+len(exc) == 0 {
		return nil
	}
	return &NoMatchError{Include: inc, Exclude: exc, Known: names[:min(len(names), maxKnown)]}
}

// NameFilter rewrites a *NoMatchError in err to name each pattern as a
// front end's users gave it: name returns, for a pattern of Include (or
// of Exclude), how to call it (`input overlays "ovv/*"`), with any hint
// of its own. Other errors are returned as they are.
func NameFilter(err error, name func(pattern string, exclude bool) string) error {
	e, ok := errors.AsType[*NoMatchError](err)
	if !ok {
		return err
	}
	var parts []string
	for _, p := range e.Include {
		parts = append(parts, name(p, false))
	}
	for _, p := range e.Exclude {
		parts = append(parts, name(p, true))
	}
	return fmt.Errorf("%s %s: %w", strings.Join(parts, ", "), e.Hint(), ErrNoMatch)
}
