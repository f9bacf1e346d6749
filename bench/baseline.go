package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The baseline: the figures of each case of a run, kept in a file the
// repository commits (bench/baseline.json), so that `make bench` says
// loudly when a case got slower than when it was recorded. The bench is
// not in CI and machines differ, so the comparison is between figures
// least moved by the machine and its load:
//
//   - CPU time (user + system), the least of the runs, not wall time;
//   - for a case measured against a peer in the same run (kplan warm
//     against flate warm, a kubeflow plan against the kustomize CLI
//     script), also its CPU divided by the peer's, and both must be over:
//     a slower machine raises the CPU alone, noise in the peer the ratio
//     alone (a re-run of the unchanged Flux cases at load 4–7 gave the
//     warm chart bump 1.15× its CPU and 1.21× its ratio, flate warm
//     having been 5% faster), a slower kplan both;
//   - peak RSS, the highest of the runs (the same binary on the same
//     input: close to machine-independent).
//
// A case more than regressionLimit over its recorded figure is reported
// in a block at the end of the output; -strict makes that an exit status.
// The peers themselves (flate, the kustomize CLI) are recorded, for the
// ratios and to tell a slower machine, and never reported.
const regressionLimit = 1.20

// figures is what the baseline keeps of one case.
type figures struct {
	CPUms  int64 `json:"cpu_ms"`       // the least CPU (user+sys) of the runs
	WallMs int64 `json:"wall_ms"`      // the least wall time of the runs
	RSSMiB int64 `json:"peak_rss_mib"` // the highest peak RSS of the runs
	// Peer is the case this one is compared against in the same run, and
	// VsPeer its CPU divided by the peer's (0: the peer was not measured).
	Peer   string  `json:"peer,omitempty"`
	VsPeer float64 `json:"cpu_vs_peer,omitempty"`
	// Reference marks a peer (flate, the kustomize CLI): recorded, never
	// reported as a regression.
	Reference bool `json:"reference,omitempty"`
	// Recorded says when, where and under what load.
	Recorded string `json:"recorded,omitempty"`
}

// baseline is the file.
type baseline struct {
	About string             `json:"about"`
	Cases map[string]figures `json:"cases"`
}

const baselineAbout = "kplan's bench figures per case (go run ./bench -record; docs/performance.md#the-baseline): " +
	"CPU is user+sys, the least of the runs; a case with a peer is reported only when both its CPU and cpu_vs_peer (its CPU over the peer's in the same run) are over"

// ledger collects the cases of one run, in the order they ran.
type ledger struct {
	cases map[string]*entry
	order []string
}

type entry struct {
	runs      []measure
	peer      string
	reference bool
}

func newLedger() *ledger { return &ledger{cases: map[string]*entry{}} }

// record keeps a case of kplan's: its runs, and the case it is compared
// against in the same run ("" for none). A name recorded again replaces
// the first.
func (l *ledger) record(name string, runs []measure, peer string) {
	l.add(name, &entry{runs: slices.Clone(runs), peer: peer})
}

// recordPeer keeps a peer's runs (flate, the kustomize CLI): the cases
// compared against it need them, and it is never reported.
func (l *ledger) recordPeer(name string, runs []measure) {
	l.add(name, &entry{runs: slices.Clone(runs), reference: true})
}

func (l *ledger) add(name string, e *entry) {
	if len(e.runs) == 0 {
		return
	}
	if _, ok := l.cases[name]; !ok {
		l.order = append(l.order, name)
	}
	l.cases[name] = e
}

// figures are the figures of the run's cases, each recorded with
// context (when, where, under what load).
func (l *ledger) figures(context string) map[string]figures {
	out := make(map[string]figures, len(l.cases))
	for name, e := range l.cases {
		out[name] = summarize(e.runs)
	}
	for name, e := range l.cases {
		f := out[name]
		f.Reference, f.Recorded, f.Peer = e.reference, context, e.peer
		if p, ok := out[e.peer]; ok && p.CPUms > 0 {
			f.VsPeer = math.Round(float64(f.CPUms)/float64(p.CPUms)*1000) / 1000
		}
		out[name] = f
	}
	return out
}

// summarize reduces runs to the figures least moved by other load.
func summarize(runs []measure) figures {
	f := figures{CPUms: math.MaxInt64, WallMs: math.MaxInt64}
	for _, m := range runs {
		f.CPUms = min(f.CPUms, m.cpu.Milliseconds())
		f.WallMs = min(f.WallMs, m.wall.Milliseconds())
		f.RSSMiB = max(f.RSSMiB, m.rss>>20)
	}
	return f
}

// verdict is one case against its baseline.
type verdict struct {
	name      string
	now, was  figures
	recorded  bool    // the baseline has the case
	cpu       float64 // now/was CPU
	vsPeer    float64 // now/was of CPU over the peer's; 0: not comparable
	rss       float64 // now/was peak RSS
	slower    bool    // more than the limit slower: by cpu, and by vsPeer when comparable
	larger    bool    // peak RSS more than the limit larger
	faster    bool    // more than the limit faster, by both: worth recording
	reference bool
}

// compare judges each case of the run (in order) against the baseline.
func compare(base map[string]figures, now map[string]figures, order []string, limit float64) []verdict {
	var out []verdict
	for _, name := range order {
		n, ok := now[name]
		if !ok {
			continue
		}
		v := verdict{name: name, now: n, reference: n.Reference}
		v.was, v.recorded = base[name]
		if v.recorded {
			v.cpu = ratioOf(n.CPUms, v.was.CPUms)
			v.rss = ratioOf(n.RSSMiB, v.was.RSSMiB)
			if n.VsPeer > 0 && v.was.VsPeer > 0 && n.Peer == v.was.Peer {
				v.vsPeer = n.VsPeer / v.was.VsPeer
			}
			// With a peer, both figures must agree: a slower machine
			// moves the CPU alone, noise in the peer the ratio alone,
			// a slower kplan both.
			lo, hi := v.cpu, v.cpu
			if v.vsPeer > 0 {
				lo, hi = min(v.cpu, v.vsPeer), max(v.cpu, v.vsPeer)
			}
			v.slower = !v.reference && lo > limit
			v.larger = !v.reference && v.rss > limit
			v.faster = !v.reference && hi > 0 && hi < 1/limit
		}
		out = append(out, v)
	}
	return out
}

// ratioOf is now/was, 0 when was is 0 (nothing to compare).
func ratioOf(now, was int64) float64 {
	if was <= 0 {
		return 0
	}
	return float64(now) / float64(was)
}

// warnings are the loud lines of the regressions.
func warnings(vs []verdict) []string {
	var out []string
	for _, v := range vs {
		if v.slower {
			line := fmt.Sprintf("SLOWER THAN BASELINE: case %s: %.2f× its recorded CPU (%s → %s)", v.name, v.cpu, ms(v.was.CPUms), ms(v.now.CPUms))
			if v.vsPeer > 0 {
				line += fmt.Sprintf(", %.2f× against %s in the same run (%.3g× → %.3g× its CPU)", v.vsPeer, v.now.Peer, v.was.VsPeer, v.now.VsPeer)
			}
			out = append(out, line)
		}
		if v.larger {
			out = append(out, fmt.Sprintf("LARGER THAN BASELINE: case %s: %.2f× its recorded peak RSS (%d MiB → %d MiB)",
				v.name, v.rss, v.was.RSSMiB, v.now.RSSMiB))
		}
	}
	return out
}

// printComparison prints each case against the baseline, then the
// regressions in a block no one scrolls past.
func printComparison(w io.Writer, path string, vs []verdict, limit float64) {
	fmt.Fprintf(w, "\nagainst the baseline %s (CPU user+sys, the least of the runs; ×: now over recorded; with a peer, both its CPU and its CPU over the peer's must be over)\n\n", path)
	width := len("case")
	for _, v := range vs {
		width = max(width, len(v.name)+len(" (peer)"))
	}
	fmt.Fprintf(w, "%-*s %9s %9s %6s   %7s %7s %6s   %11s %6s\n", width, "case", "CPU", "recorded", "×", "vs peer", "rec.", "×", "RSS MiB", "×")
	var faster []string
	for _, v := range vs {
		name := v.name
		if v.reference {
			name += " (peer)"
		}
		if !v.recorded {
			fmt.Fprintf(w, "%-*s %9s %9s %6s   %7s %7s %6s   %11d %6s\n", width, name, ms(v.now.CPUms), "-", "new", peerRatio(v.now.VsPeer), "-", "", v.now.RSSMiB, "")
			continue
		}
		fmt.Fprintf(w, "%-*s %9s %9s %6.2f   %7s %7s %6s   %5d/%5d %6.2f%s\n", width, name, ms(v.now.CPUms), ms(v.was.CPUms), v.cpu,
			peerRatio(v.now.VsPeer), peerRatio(v.was.VsPeer), times(v.vsPeer), v.now.RSSMiB, v.was.RSSMiB, v.rss, mark(v))
		if v.faster {
			faster = append(faster, v.name)
		}
	}
	if len(faster) > 0 {
		fmt.Fprintf(w, "\nfaster than recorded by more than %.0f%%: %s (go run ./bench -record keeps the gain)\n", 100*(1-1/limit), strings.Join(faster, ", "))
	}
	if lines := warnings(vs); len(lines) > 0 {
		bar := strings.Repeat("!", 100)
		fmt.Fprintf(w, "\n%s\n!!\n", bar)
		for _, l := range lines {
			fmt.Fprintf(w, "!!  %s\n", l)
		}
		fmt.Fprintf(w, "!!\n!!  (more than %.0f%% over %s; if the change meant it, record it with -record)\n!!\n%s\n", 100*(limit-1), path, bar)
	}
}

func mark(v verdict) string {
	switch {
	case v.slower && v.larger:
		return "  SLOWER, LARGER"
	case v.slower:
		return "  SLOWER"
	case v.larger:
		return "  LARGER"
	}
	return ""
}

func peerRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", r)
}

func times(r float64) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", r)
}

func ms(v int64) string { return round(time.Duration(v) * time.Millisecond) }

// readBaseline reads the baseline file; a missing file is an empty one.
func readBaseline(path string) (baseline, error) {
	b := baseline{Cases: map[string]figures{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("%s: %w", path, err)
	}
	if b.Cases == nil {
		b.Cases = map[string]figures{}
	}
	return b, nil
}

// merged is the baseline with this run's cases in place of theirs; the
// cases this run did not measure (a -flux-only run) are kept.
func merged(b baseline, now map[string]figures) baseline {
	out := baseline{About: baselineAbout, Cases: make(map[string]figures, len(b.Cases)+len(now))}
	for k, v := range b.Cases {
		out.Cases[k] = v
	}
	for k, v := range now {
		out.Cases[k] = v
	}
	return out
}

func writeBaseline(path string, b baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// runContext says when, where and under what load a run was made.
func runContext(load string) string {
	return fmt.Sprintf("%s, %d cores, %s, load %s", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), load)
}

// loadAverage is the machine's 1, 5 and 15 minute load average
// (/proc/loadavg), or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
