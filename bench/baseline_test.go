package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSummarizeTakesTheFiguresLeastMovedByLoad(t *testing.T) {
	got := summarize([]measure{
		{wall: 300 * time.Millisecond, cpu: 200 * time.Millisecond, rss: 90 << 20},
		{wall: 250 * time.Millisecond, cpu: 260 * time.Millisecond, rss: 100 << 20},
		{wall: 400 * time.Millisecond, cpu: 180 * time.Millisecond, rss: 95 << 20},
	})
	want := figures{CPUms: 180, WallMs: 250, RSSMiB: 100}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
}

func TestLedgerFiguresAgainstThePeerOfTheSameRun(t *testing.T) {
	l := newLedger()
	l.recordPeer("flux/x/flate warm", []measure{{cpu: 500 * time.Millisecond}, {cpu: 400 * time.Millisecond}})
	l.record("flux/x/kplan warm", []measure{{cpu: 100 * time.Millisecond}}, "flux/x/flate warm")
	l.record("flux/x/kplan cold", []measure{{cpu: 300 * time.Millisecond}}, "flux/x/flate cold") // flate cold not measured
	l.record("empty", nil, "")
	got := l.figures("today")
	if want := []string{"flux/x/flate warm", "flux/x/kplan warm", "flux/x/kplan cold"}; !reflect.DeepEqual(l.order, want) {
		t.Errorf("order %q, want %q", l.order, want)
	}
	if f := got["flux/x/kplan warm"]; f.VsPeer != 0.25 || f.Peer != "flux/x/flate warm" || f.Reference || f.Recorded != "today" {
		t.Errorf("kplan warm: %+v, want a quarter of the peer's 400 ms", f)
	}
	if f := got["flux/x/kplan cold"]; f.VsPeer != 0 {
		t.Errorf("kplan cold: %+v, want no ratio (its peer was not measured)", f)
	}
	if !got["flux/x/flate warm"].Reference {
		t.Error("the peer is not marked as one")
	}
}

func TestCompare(t *testing.T) {
	const limit = 1.2
	for _, tc := range []struct {
		name                   string
		was, now               figures
		slower, larger, faster bool
		warning                string // a line warnings must hold, "" for none
	}{
		{
			name: "no peer, within the limit",
			was:  figures{CPUms: 1000, RSSMiB: 100}, now: figures{CPUms: 1190, RSSMiB: 110},
		},
		{
			name: "no peer, 34% more CPU",
			was:  figures{CPUms: 1000, RSSMiB: 100}, now: figures{CPUms: 1340, RSSMiB: 100},
			slower:  true,
			warning: "SLOWER THAN BASELINE: case c: 1.34× its recorded CPU (1s → 1.34s)",
		},
		{
			name: "a slower machine: more CPU, the same ratio to the peer",
			was:  figures{CPUms: 200, RSSMiB: 80, Peer: "p", VsPeer: 0.4}, now: figures{CPUms: 300, RSSMiB: 80, Peer: "p", VsPeer: 0.41},
		},
		{
			name: "noise in the peer: the same CPU, 1.5× its ratio to the peer",
			was:  figures{CPUms: 200, RSSMiB: 80, Peer: "p", VsPeer: 0.4}, now: figures{CPUms: 210, RSSMiB: 80, Peer: "p", VsPeer: 0.6},
		},
		{
			name: "a slower kplan: 1.3× its CPU and its ratio to the peer",
			was:  figures{CPUms: 200, RSSMiB: 80, Peer: "p", VsPeer: 0.4}, now: figures{CPUms: 260, RSSMiB: 80, Peer: "p", VsPeer: 0.52},
			slower:  true,
			warning: "SLOWER THAN BASELINE: case c: 1.30× its recorded CPU (200ms → 260ms), 1.30× against p in the same run (0.4× → 0.52× its CPU)",
		},
		{
			name: "the peer missing this run: judged by CPU",
			was:  figures{CPUms: 200, Peer: "p", VsPeer: 0.4}, now: figures{CPUms: 300},
			slower:  true,
			warning: "1.50× its recorded CPU (200ms → 300ms)",
		},
		{
			name: "another peer (flate upgraded): judged by CPU",
			was:  figures{CPUms: 200, Peer: "flate v1", VsPeer: 0.4}, now: figures{CPUms: 210, Peer: "flate v2", VsPeer: 0.8},
		},
		{
			name: "peak RSS 1.3×",
			was:  figures{CPUms: 200, RSSMiB: 100}, now: figures{CPUms: 200, RSSMiB: 130},
			larger:  true,
			warning: "LARGER THAN BASELINE: case c: 1.30× its recorded peak RSS (100 MiB → 130 MiB)",
		},
		{
			name: "a peer is never reported",
			was:  figures{CPUms: 200, RSSMiB: 100, Reference: true}, now: figures{CPUms: 900, RSSMiB: 900, Reference: true},
		},
		{
			name: "faster by half: worth recording",
			was:  figures{CPUms: 200}, now: figures{CPUms: 100},
			faster: true,
		},
		{
			name: "faster by half, but the peer too: a faster machine",
			was:  figures{CPUms: 200, Peer: "p", VsPeer: 0.4}, now: figures{CPUms: 100, Peer: "p", VsPeer: 0.4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := compare(map[string]figures{"c": tc.was}, map[string]figures{"c": tc.now}, []string{"c"}, limit)
			if len(vs) != 1 {
				t.Fatalf("%d verdicts, want 1", len(vs))
			}
			v := vs[0]
			if v.slower != tc.slower || v.larger != tc.larger || v.faster != tc.faster {
				t.Errorf("slower %v, larger %v, faster %v; want %v, %v, %v", v.slower, v.larger, v.faster, tc.slower, tc.larger, tc.faster)
			}
			lines := strings.Join(warnings(vs), "\n")
			if tc.warning == "" && lines != "" {
				t.Errorf("warnings %q, want none", lines)
			}
			if !strings.Contains(lines, tc.warning) {
				t.Errorf("warnings %q, want %q", lines, tc.warning)
			}
		})
	}
}

func TestCompareANewCaseIsNoRegression(t *testing.T) {
	vs := compare(map[string]figures{}, map[string]figures{"new": {CPUms: 5000}}, []string{"new", "not run"}, 1.2)
	if len(vs) != 1 || vs[0].recorded || vs[0].slower || len(warnings(vs)) > 0 {
		t.Errorf("verdicts %+v, want one unrecorded case and no warning", vs)
	}
}

func TestPrintComparisonIsLoudOnlyOnARegression(t *testing.T) {
	base := map[string]figures{"fast": {CPUms: 100, RSSMiB: 50}, "slow": {CPUms: 100, RSSMiB: 50}}
	now := map[string]figures{"fast": {CPUms: 105, RSSMiB: 50}, "slow": {CPUms: 134, RSSMiB: 50}}
	var out bytes.Buffer
	printComparison(&out, "bench/baseline.json", compare(base, now, []string{"fast"}, 1.2), 1.2)
	if strings.Contains(out.String(), "SLOWER") || strings.Contains(out.String(), "!!") {
		t.Errorf("a case within its baseline printed a warning:\n%s", out.String())
	}
	out.Reset()
	printComparison(&out, "bench/baseline.json", compare(base, now, []string{"fast", "slow"}, 1.2), 1.2)
	if !strings.Contains(out.String(), "!!  SLOWER THAN BASELINE: case slow: 1.34× its recorded CPU") {
		t.Errorf("the regression is not in the warning block:\n%s", out.String())
	}
}

func TestRecordKeepsTheCasesNotRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baseline.json")
	b, err := readBaseline(path)
	if err != nil || len(b.Cases) != 0 {
		t.Fatalf("a missing baseline: %+v, %v; want an empty one", b, err)
	}
	first := merged(b, map[string]figures{"kubeflow/a": {CPUms: 1000}, "flux/b": {CPUms: 200}})
	if err := writeBaseline(path, first); err != nil {
		t.Fatal(err)
	}
	b, err = readBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	second := merged(b, map[string]figures{"flux/b": {CPUms: 150}}) // a -flux-only run
	want := map[string]figures{"kubeflow/a": {CPUms: 1000}, "flux/b": {CPUms: 150}}
	if !reflect.DeepEqual(second.Cases, want) || second.About == "" {
		t.Errorf("merged %+v, want %+v and the file's description", second, want)
	}
}
