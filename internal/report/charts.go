package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// chartsLine says what Kubernetes the plan's charts were templated for,
// each distinct one with how many overlays or targets it was for; "" when
// the plan templated no chart. code formats a file name.
func chartsLine(p *inventorydiff.Plan, code func(string) string) string {
	count := map[string]int{}
	defaulted := false
	for i := range p.Overlays {
		if k := p.Overlays[i].Kubernetes; k != nil {
			count[k.String()]++
			defaulted = defaulted || k.From == ""
		}
	}
	if len(count) == 0 {
		return ""
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(count)) {
		if len(count) == 1 {
			parts = append(parts, s)
			break
		}
		parts = append(parts, fmt.Sprintf("%s for %d", s, count[s]))
	}
	line := "Charts rendered for " + strings.Join(parts, "; ")
	if defaulted {
		line += "; declare what a cluster runs under " + code("kubernetes:") + " in " + code(".kplan.yaml")
	}
	return line
}

// chartsOf is the line a reported overlay gives for its charts; "" when
// it templated none.
func chartsOf(o *inventorydiff.Overlay) string {
	if o.Kubernetes == nil {
		return ""
	}
	return "Charts rendered for " + o.Kubernetes.String()
}

// escapeText escapes what Markdown would read as HTML in a line of text
// (a declared cluster's name is the repository's text).
var escapeText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
