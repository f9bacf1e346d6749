package shard

import (
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		err  bool
	}{
		{"", Shard{}, false},
		{"1/3", Shard{1, 3}, false},
		{" 3 / 3 ", Shard{3, 3}, false},
		{"1/1", Shard{1, 1}, false},
		{"0/3", Shard{}, true},
		{"4/3", Shard{}, true},
		{"3", Shard{}, true},
		{"a/b", Shard{}, true},
		{"1/0", Shard{}, true},
	} {
		got, err := Parse(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// Assign balances by cost, largest first, and does not depend on the
// order the units come in.
func TestAssignBalancesLargestFirst(t *testing.T) {
	units := []Unit{{[]string{"a"}, 10}, {[]string{"b"}, 7}, {[]string{"c"}, 6}, {[]string{"d"}, 4}, {[]string{"e"}, 3}, {[]string{"f"}, 0}, {[]string{"g"}, 0}}
	got := Assign(units, 3)
	load := map[int]int{}
	for i, s := range got {
		load[s] += units[i].Cost
	}
	// a→1 (10), b→2 (7), c→3 (6), d→3 (10), e→2 (10); f, g to the
	// shards with the fewest units.
	if want := []int{1, 2, 3, 3, 2, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("Assign = %v, want %v (loads %v)", got, want, load)
	}
	reversed := slices.Clone(units)
	slices.Reverse(reversed)
	again := Assign(reversed, 3)
	slices.Reverse(again)
	if !slices.Equal(again, got) {
		t.Errorf("Assign of the units reversed = %v, want %v", again, got)
	}
}

func TestMergeRefusesOtherVersionsAndCounts(t *testing.T) {
	part := func(s, version, head string) Named {
		p := Named{Name: "part-" + s, Part: Part{Format: Format, Version: version, Shard: s, Base: "b", Head: head}}
		p.Part.Plan = newPlan("b", head)
		return p
	}
	for _, c := range []struct {
		parts []Named
		want  string
	}{
		{[]Named{part("1/2", "v1", "h"), part("2/2", "v2", "h")}, "by kplan v2 and part-1/2 by kplan v1"},
		{[]Named{part("1/2", "v1", "h"), part("2/3", "v1", "h")}, "different shard counts"},
		{[]Named{part("1/2", "v1", "h"), part("2/2", "v1", "x")}, "different commits"},
		{[]Named{part("2/3", "v1", "h")}, "shard 1/3, 3/3 missing"},
		{nil, "no parts"},
	} {
		_, err := Merge(c.parts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Merge: %v, want an error saying %q", err, c.want)
		}
	}
	if _, err := Merge([]Named{part("1/2", "v1", "h"), part("2/2", "v1", "h")}); err != nil {
		t.Errorf("Merge of a whole set: %v", err)
	}
}

func newPlan(base, head string) *inventorydiff.Plan {
	return &inventorydiff.Plan{Base: base, Head: head}
}

// A part of another format — written by an older kplan, without what
// merge needs for the findings across overlays — is refused, saying so.
func TestDecodeRefusesOtherFormats(t *testing.T) {
	for _, c := range []struct{ part, want string }{
		{`{"format":"kplan-plan-part/1","version":"v0.9.0","shard":"1/2","plan":{}}`, "a part of format kplan-plan-part/1 (kplan v0.9.0), and this kplan merges " + Format},
		{`{"Overlays":[]}`, "not a plan part of format " + Format},
		{`[`, "not a plan part"},
	} {
		if _, err := Decode([]byte(c.part)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%s): %v, want an error saying %q", c.part, err, c.want)
		}
	}
	if _, err := Decode([]byte(`{"format":"` + Format + `","shard":"1/2","plan":{}}`)); err != nil {
		t.Errorf("Decode of a part: %v", err)
	}
}
