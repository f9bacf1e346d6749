// Package report prints a plan for people and machines: Markdown for the
// PR comment and job summary, plain text for the terminal, and JSON.
package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Summary is the one-line total that opens every form of the report, e.g.
// "3 to add, 1 to change, 2 to prune in 2 of 48 overlays".
func Summary(p *inventorydiff.Plan) string {
	t := p.Totals
	s := fmt.Sprintf("%d to add, %d to change, %d to prune in %d of %d overlays",
		t.Added, t.Changed, t.Pruned, t.ChangedOverlays, t.Overlays)
	if t.Detached > 0 {
		s += fmt.Sprintf(", %d left in the cluster", t.Detached)
	}
	if t.Failed > 0 {
		s += fmt.Sprintf("; %d %s failed to render", t.Failed, plural(t.Failed, "overlay", "overlays"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func overlayCounts(o *inventorydiff.Overlay) string {
	s := fmt.Sprintf("%d to add, %d to change, %d to prune", len(o.Added), len(o.Changed), len(o.Pruned))
	if len(o.Detached) > 0 {
		s += fmt.Sprintf(", %d left in the cluster", len(o.Detached))
	}
	return s
}

// shortRev abbreviates a commit SHA for display.
func shortRev(rev string) string {
	if len(rev) == 40 && !strings.ContainsAny(rev, " ") {
		return rev[:7]
	}
	return rev
}

// overlayError is the error of an overlay that failed on either side.
func overlayError(o *inventorydiff.Overlay) string {
	var parts []string
	if o.BaseErr != "" {
		parts = append(parts, "base: "+o.BaseErr)
	}
	if o.HeadErr != "" {
		parts = append(parts, "head: "+o.HeadErr)
	}
	return strings.Join(parts, "; ")
}

// jsonOverlay is the JSON form of one overlay.
type jsonOverlay struct {
	Path      string                                 `json:"path"`
	Status    inventorydiff.Status                   `json:"status"`
	Base      jsonSide                               `json:"base"`
	Head      jsonSide                               `json:"head"`
	Added     []string                               `json:"added"`
	Pruned    []string                               `json:"pruned"`
	Changed   []string                               `json:"changed"`
	Replaced  []jsonReplacement                      `json:"replaced"`
	Detached  []string                               `json:"detached"`
	Unchanged int                                    `json:"unchanged"`
	Dangerous []string                               `json:"dangerous"`
	Fields    map[string][]inventorydiff.FieldChange `json:"fields,omitempty"`
	Error     string                                 `json:"error,omitempty"`
}

type jsonSide struct {
	Hash  string `json:"hash"`
	Error string `json:"error,omitempty"`
}

type jsonReplacement struct {
	Base string `json:"base"`
	Head string `json:"head"`
}

type jsonPlan struct {
	Base     string        `json:"base"`
	Head     string        `json:"head"`
	Summary  string        `json:"summary"`
	Overlays []jsonOverlay `json:"overlays"`
	Totals   jsonTotals    `json:"totals"`
}

type jsonTotals struct {
	Added           int `json:"added"`
	Changed         int `json:"changed"`
	Pruned          int `json:"pruned"`
	Detached        int `json:"detached"`
	Overlays        int `json:"overlays"`
	ChangedOverlays int `json:"changedOverlays"`
	Failed          int `json:"failed"`
	Dangerous       int `json:"dangerous"`
}

// JSON is the machine-readable plan. Every overlay is listed; changed
// holds objects changed in place, replaced the generated objects whose
// name suffix changed (counted as changes in totals.changed). Secret
// values never appear: their field changes carry hidden=true.
func JSON(p *inventorydiff.Plan) ([]byte, error) {
	out := jsonPlan{Base: p.Base, Head: p.Head, Summary: Summary(p), Overlays: []jsonOverlay{}}
	t := p.Totals
	out.Totals = jsonTotals{t.Added, t.Changed, t.Pruned, t.Detached, t.Overlays, t.ChangedOverlays, t.Failed, t.Dangerous}
	for i := range p.Overlays {
		o := &p.Overlays[i]
		j := jsonOverlay{
			Path: o.Path, Status: o.Status,
			Base:  jsonSide{Hash: o.BaseHash, Error: o.BaseErr},
			Head:  jsonSide{Hash: o.HeadHash, Error: o.HeadErr},
			Added: nonNil(o.Added), Pruned: nonNil(o.Pruned), Detached: nonNil(o.Detached),
			Changed: []string{}, Replaced: []jsonReplacement{},
			Unchanged: o.Unchanged, Dangerous: nonNil(o.Dangerous),
			Error: overlayError(o),
		}
		for _, c := range o.Changed {
			if c.Replaced() {
				j.Replaced = append(j.Replaced, jsonReplacement{Base: c.BaseKey, Head: c.Key})
			} else {
				j.Changed = append(j.Changed, c.Key)
			}
			if len(c.Fields) > 0 {
				if j.Fields == nil {
					j.Fields = map[string][]inventorydiff.FieldChange{}
				}
				j.Fields[c.Key] = c.Fields
			}
		}
		out.Overlays = append(out.Overlays, j)
	}
	return json.MarshalIndent(out, "", "  ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
