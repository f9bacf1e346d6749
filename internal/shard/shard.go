// Package shard splits a plan's overlays over runners and puts the parts
// back together: `kplan diff --shard I/N` plans a share of the overlays
// and writes a part; `kplan merge` joins the parts into the one plan.
package shard

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/overlap"
)

// Shard is the share of a plan one run renders: Index of Count, from 1.
// The zero value is the whole plan.
type Shard struct{ Index, Count int }

// Parse reads "I/N" (1 ≤ I ≤ N); "" is the whole plan.
func Parse(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	count, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 1 || index > count {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 1 ≤ I ≤ N, e.g. 2/3 for the second of three runners", s)
	}
	return Shard{Index: index, Count: count}, nil
}

// On says the run plans a share, not the whole plan.
func (s Shard) On() bool { return s.Count > 0 }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Unit is what goes to one shard whole: an overlay, or overlays that must
// be planned together (a removed and a new overlay may be one move).
type Unit struct {
	Overlays []string
	// Cost is the unit's input size; a shard's load is the sum of its
	// units' costs.
	Cost int
}

// Assign returns, for each unit, the shard (1..n) it goes to: largest
// first, each to the shard with the least load so far (then the fewest
// units, then the lowest index). Every run given the same units assigns
// the same way, whatever their order.
func Assign(units []Unit, n int) []int {
	order := make([]int, len(units))
	for i := range order {
		order[i] = i
	}
	first := func(u Unit) string {
		if len(u.Overlays) == 0 {
			return ""
		}
		return slices.Min(u.Overlays)
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(units[b].Cost, units[a].Cost), cmp.Compare(first(units[a]), first(units[b])))
	})
	load := make([]int, n)
	count := make([]int, n)
	out := make([]int, len(units))
	for _, u := range order {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] || load[s] == load[best] && count[s] < count[best] {
				best = s
			}
		}
		load[best] += units[u].Cost
		count[best]++
		out[u] = best + 1
	}
	return out
}

// Format names the part file format; a part of another format is refused.
const Format = "kplan-plan-part/2"

// Part is one shard's plan: the overlays it owns, planned in full but for
// the findings across overlays, what merge needs to find those over every
// shard's overlays, and what every shard computes alike (the files no
// overlay reads).
type Part struct {
	Format  string `json:"format"`
	Version string `json:"version"` // kplan's version
	Shard   string `json:"shard"`   // I/N
	Base    string `json:"base"`
	Head    string `json:"head"`
	// Options are what the run was asked to plan and how (overlays,
	// rendering flags), as the caller spells them: every shard of a run
	// must plan the same overlays the same way.
	Options string `json:"options"`
	// Plan is the share's plan as kplan holds it, so that the merged plan
	// prints in every format as the unsharded one does.
	Plan *inventorydiff.Plan `json:"plan"`
	// Overlap is what the findings across overlays (shared inventories,
	// duplicate objects) read of the share's overlays besides their plans.
	Overlap overlap.Facts `json:"overlap"`
}

// NewPart wraps a shard's plan, planned with options, and its overlays'
// facts for the findings across overlays.
func NewPart(p *inventorydiff.Plan, facts overlap.Facts, s Shard, version, options string) Part {
	return Part{Format: Format, Version: version, Shard: s.String(), Base: p.Base, Head: p.Head, Options: options, Plan: p, Overlap: facts}
}

// Decode reads a part written by Marshal.
func Decode(data []byte) (Part, error) {
	var p Part
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("not a plan part (kplan diff --shard I/N -o json): %w", err)
	}
	if strings.HasPrefix(p.Format, "kplan-plan-part/") && p.Format != Format {
		return p, fmt.Errorf("a part of format %s (kplan %s), and this kplan merges %s: plan every shard and merge with the same kplan", p.Format, p.Version, Format)
	}
	if p.Format != Format || p.Plan == nil {
		return p, fmt.Errorf("not a plan part of format %s (kplan diff --shard I/N -o json writes one)", Format)
	}
	return p, nil
}

// Named is a part and where it was read from, for messages.
type Named struct {
	Name string
	Part Part
}

// Merge joins the parts of one plan, refusing parts of different kplan
// versions, commits or shard counts and an incomplete set. The findings
// across overlays are found over every part's overlays, as the unsharded
// plan finds them. The merged plan's work sums the shards' (its time is
// the longest shard's: what a matrix waits for).
func Merge(parts []Named) (*inventorydiff.Plan, error) {
	if len(parts) == 0 {
		return nil, errors.New("no parts to merge: give the part files kplan diff --shard wrote")
	}
	first := parts[0]
	s0, err := Parse(first.Part.Shard)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", first.Name, err)
	}
	seen := map[int]string{}
	for _, n := range parts {
		p := n.Part
		s, err := Parse(p.Shard)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		switch {
		case p.Version != first.Part.Version:
			return nil, fmt.Errorf("%s was planned by kplan %s and %s by kplan %s: run every shard with the same kplan", n.Name, p.Version, first.Name, first.Part.Version)
		case p.Base != first.Part.Base || p.Head != first.Part.Head:
			return nil, fmt.Errorf("%s plans head %s against base %s, but %s plans head %s against base %s: parts of different commits; merge the parts of one run",
				n.Name, p.Head, p.Base, first.Name, first.Part.Head, first.Part.Base)
		case p.Options != first.Part.Options:
			return nil, fmt.Errorf("%s was planned with options %s and %s with %s: run every shard with the same flags", n.Name, p.Options, first.Name, first.Part.Options)
		case s.Count != s0.Count:
			return nil, fmt.Errorf("%s is shard %s and %s is shard %s: parts of different shard counts; merge the parts of one run", n.Name, s, first.Name, s0)
		case seen[s.Index] != "":
			return nil, fmt.Errorf("shard %s given twice (%s and %s)", s, seen[s.Index], n.Name)
		}
		seen[s.Index] = n.Name
	}
	var missing []string
	for i := 1; i <= s0.Count; i++ {
		if seen[i] == "" {
			missing = append(missing, Shard{i, s0.Count}.String())
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("shard %s missing: merge needs every part of the run (%d given of %d)", strings.Join(missing, ", "), len(parts), s0.Count)
	}
	fp := first.Part.Plan
	out := &inventorydiff.Plan{Base: fp.Base, Head: fp.Head, BaseLabel: fp.BaseLabel, HeadLabel: fp.HeadLabel, Unread: fp.Unread, Settings: fp.Settings}
	owner := map[string]string{}
	var work *inventorydiff.Work
	var facts overlap.Facts
	for _, n := range parts {
		facts.Add(n.Part.Overlap)
		p := n.Part.Plan
		for _, o := range p.Overlays {
			if prev, ok := owner[o.Path]; ok {
				return nil, fmt.Errorf("overlay %s is planned in both %s and %s: parts of different runs", o.Path, prev, n.Name)
			}
			owner[o.Path] = n.Name
			out.Overlays = append(out.Overlays, o)
		}
		ignored, err := addIgnored(out.Ignored, p.Ignored)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		out.Ignored = ignored
		out.Hidden = addHidden(out.Hidden, p.Hidden)
		// Every share finds the same (discovery is the whole repository's).
		out.NoLongerPlanned = slices.Compact(slices.Sorted(slices.Values(append(out.NoLongerPlanned, p.NoLongerPlanned...))))
		for _, np := range p.NotPlanned {
			if !slices.Contains(out.NotPlanned, np) {
				out.NotPlanned = append(out.NotPlanned, np)
			}
		}
		if w := p.Work; w != nil {
			if work == nil {
				work = &inventorydiff.Work{}
			}
			work.Overlays += w.Overlays
			work.Skipped += w.Skipped
			work.Rendered += w.Rendered
			work.CacheHits += w.CacheHits
			work.Took = max(work.Took, w.Took)
		}
	}
	slices.SortFunc(out.Overlays, func(a, b inventorydiff.Overlay) int { return cmp.Compare(a.Path, b.Path) })
	facts.Check(out.Overlays)
	out.Totals = inventorydiff.Sum(out.Overlays)
	if work != nil {
		work.Shards = s0.Count
	}
	out.Work = work
	return out, nil
}

// addHidden sums what each source's rules hid in two shares of a plan:
// their overlays differ, so their objects do.
func addHidden(sum, part []inventorydiff.Hidden) []inventorydiff.Hidden {
	for _, h := range part {
		i := slices.IndexFunc(sum, func(s inventorydiff.Hidden) bool { return s.Source == h.Source })
		if i < 0 {
			sum = append(sum, h)
			continue
		}
		sum[i].Fields += h.Fields
		sum[i].Objects += h.Objects
	}
	return sum
}

// addIgnored sums what each ignore rule hid in two shares of a plan; the
// rules are the same in every part of one run.
func addIgnored(sum, part []inventorydiff.IgnoredRule) ([]inventorydiff.IgnoredRule, error) {
	if sum == nil {
		return slices.Clone(part), nil
	}
	if len(sum) != len(part) {
		return nil, errors.New("its ignore rules differ from the other parts': run every shard with the same flags")
	}
	for i, r := range part {
		if r.Rule != sum[i].Rule || r.Source != sum[i].Source {
			return nil, fmt.Errorf("ignore rule %s differs from the other parts' %s: run every shard with the same flags", r.Rule, sum[i].Rule)
		}
		sum[i].Fields += r.Fields
		sum[i].Objects += r.Objects
		sum[i].Kept += r.Kept
	}
	return sum, nil
}
