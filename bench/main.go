// Command bench measures kplan against the kustomize CLI on a real
// corpus: the kubeflow manifests, unpacked into a git repository with a
// synthetic head commit that touches one application; then Flux plans
// against flate on onedr0p/home-ops's history (flux.go); then a
// one-Application change beside the full plan on synthetic repositories
// of 500, 2,000 and 5,000 Argo CD Applications (argocd.go).
//
//	go run ./bench -corpus ../shared/corpus/kubeflow-manifests.tar.gz
//	go run ./bench -flux-only -flate /path/to/flate
//	go run ./bench -argocd-only
//	go run ./bench -install-flate   # make flate: the pinned flate (flate.go)
//
// Each case's figures are compared with those recorded in
// bench/baseline.json, loudly when a case is more than 20% slower
// (baseline.go); -record writes them there, -strict makes a regression
// an exit status.
//
// It measures, as subprocesses, each repeated and interleaved (the best
// of -runs is reported, and the median):
//
//   - the kustomize CLI (the release built on the same kustomize api as
//     kplan, built once and cached), run the way a user's script would:
//     `kustomize build` per overlay per side, one after another;
//   - `kplan diff --full`: every overlay, base and head;
//   - `kplan diff`: only what the change can affect;
//   - `kplan diff --cache-dir`: a second push to the pull request, with
//     the cache of the first;
//
// wall time and peak RSS of each, and prints the ratios. It also checks
// that the changed-only plan says what the full plan says.
package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// peerVersion is the kustomize CLI release built on the kustomize api
// version kplan uses; main checks that they agree.
const peerVersion = "v5.8.2"

// The synthetic pull request: one application, one file per push.
const (
	appFile  = "applications/katib/upstream/components/controller/controller.yaml"
	appLine  = "            - --katib-config=/katib-config.yaml\n"
	push1Add = "            - --zap-log-level=debug\n"
	push2Add = "            - --zap-devel=true\n"
)

// options are the bench's flags.
type options struct {
	corpus, copies     string
	runs               int
	keep, profile      bool
	fluxCorpus, flate  string
	fluxOnly, argoOnly bool
	kplan              string
	argoApps           int
	installFlate       bool
	baseline           string
	record, strict     bool
}

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "../shared/corpus/kubeflow-manifests.tar.gz", "the kubeflow manifests tarball")
	flag.IntVar(&o.runs, "runs", 3, "measurements of each command")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory and print its path")
	flag.BoolVar(&o.profile, "profile", true, "profile the kplan plans and print where their time goes")
	flag.StringVar(&o.copies, "growth", "1,4,10", "copies of the corpus in the monorepos of the growth table (\"\" for none)")
	flag.StringVar(&o.fluxCorpus, "flux-corpus", "../shared/corpus/onedr0p-home-ops-150.bundle", "the onedr0p/home-ops history bundle for the Flux cases (\"\" for none)")
	flag.StringVar(&o.flate, "flate", "", "the flate binary the Flux cases compare with (default: the pinned flate `make flate` built, else flate on the PATH; none: its columns are left out)")
	flag.BoolVar(&o.fluxOnly, "flux-only", false, "run the Flux cases only")
	flag.StringVar(&o.kplan, "kplan", "", "with -flux-only or -argocd-only: the kplan binary to measure (default: built from this checkout), to compare builds")
	flag.IntVar(&o.argoApps, "argocd-apps", 5000, "Applications in the Argo CD case's largest synthetic repository: the curve plans 500, 2000 and 5000 up to it (0 for no Argo CD case)")
	flag.BoolVar(&o.argoOnly, "argocd-only", false, "run the Argo CD case only")
	flag.BoolVar(&o.installFlate, "install-flate", false, "build the pinned flate ("+flateVersion+", with "+flateToolchain+") into the cache unless it is there, print its path and exit (make flate)")
	flag.StringVar(&o.baseline, "baseline", "bench/baseline.json", "the recorded figures each case is compared with (\"\" for none)")
	flag.BoolVar(&o.record, "record", false, "write this run's figures into -baseline (the cases it did not run are kept)")
	flag.BoolVar(&o.strict, "strict", false, "exit non-zero (3; go run says 1) when a case is more than 20% slower (or larger) than its baseline")
	flag.Parse()
	ctx := context.Background()
	if o.installFlate {
		bin, err := installFlate(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Println(bin)
		return
	}
	load := loadAverage()
	fmt.Printf("load average at the start: %s (%d cores)\n", load, runtime.NumCPU())
	l := newLedger()
	if err := runCases(ctx, o, l); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	end := loadAverage()
	fmt.Printf("\nload average at the end: %s\n", end)
	regressed, err := settle(o, l, runContext(load+" to "+end))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if regressed && o.strict {
		os.Exit(3)
	}
}

// runCases runs the cases the flags ask for, recording each in l.
func runCases(ctx context.Context, o options, l *ledger) error {
	if o.argoOnly {
		return runArgo(ctx, l, o.argoApps, o.kplan, o.runs, o.keep)
	}
	if o.fluxOnly {
		return runFlux(ctx, l, o.fluxCorpus, o.flate, o.kplan, o.runs, o.keep)
	}
	// Each case needs its own input: one missing skips that case only
	// (the Argo CD case writes its own).
	if _, err := os.Stat(o.corpus); err != nil {
		fmt.Printf("kubeflow cases skipped: no corpus %s\n", o.corpus)
	} else if err := run(ctx, l, o.corpus, o.runs, o.keep, o.profile, o.copies); err != nil {
		return err
	}
	if o.fluxCorpus != "" {
		if err := runFlux(ctx, l, o.fluxCorpus, o.flate, "", o.runs, o.keep); err != nil {
			return err
		}
	}
	if o.argoApps > 0 {
		return runArgo(ctx, l, o.argoApps, "", o.runs, o.keep)
	}
	return nil
}

// settle compares the run with the baseline, prints the comparison
// (loudly when a case regressed), records the run when asked, and says
// whether a case regressed.
func settle(o options, l *ledger, context string) (bool, error) {
	if o.baseline == "" {
		return false, nil
	}
	b, err := readBaseline(o.baseline)
	if err != nil {
		return false, err
	}
	now := l.figures(context)
	vs := compare(b.Cases, now, l.order, regressionLimit)
	printComparison(os.Stdout, o.baseline, vs, regressionLimit)
	if o.record {
		if err := writeBaseline(o.baseline, merged(b, now)); err != nil {
			return false, err
		}
		fmt.Printf("\nrecorded %d cases into %s\n", len(now), o.baseline)
	}
	return len(warnings(vs)) > 0, nil
}

func run(ctx context.Context, l *ledger, corpus string, runs int, keep, profile bool, copies string) error {
	work, err := os.MkdirTemp("", "kplan-bench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work directory:", work)
	} else {
		defer os.RemoveAll(work)
	}
	kplan := filepath.Join(work, "kplan")
	step("build kplan")
	if err := command(ctx, "", "go", "build", "-o", kplan, "./cmd/kplan"); err != nil {
		return err
	}
	step("build the kustomize CLI " + peerVersion + " (cached)")
	kustomize, err := peerKustomize(ctx)
	if err != nil {
		return err
	}
	step("unpack the corpus and make the pull request's commits")
	r, err := makeRepo(ctx, corpus, filepath.Join(work, "repo"), 1)
	if err != nil {
		return err
	}
	sides, err := r.worktrees(ctx, work)
	if err != nil {
		return err
	}
	fmt.Printf("corpus: %s, %d files; overlays: %d base, %d head; head changes %s\n",
		filepath.Base(corpus), r.files, len(sides[0].overlays), len(sides[1].overlays), appFile)

	cacheDir := filepath.Join(work, "cache")
	diff := func(extra ...string) []string {
		return append([]string{kplan, "diff", "-C", r.dir, "--base", r.base, "--format", "json", "--fail-on-error=false"}, extra...)
	}
	benches := []*bench{
		{name: cliSeq, run: func() (measure, error) { return cliScript(ctx, kustomize, sides, 1) }},
		{name: cliPar, run: func() (measure, error) { return cliScript(ctx, kustomize, sides, runtime.NumCPU()) }},
		{name: kplanFull, run: func() (measure, error) { return kplanRun(ctx, diff("--head", r.head1, "--full"), "") }},
		{name: kplanChanged, run: func() (measure, error) { return kplanRun(ctx, diff("--head", r.head1), "") }},
		{name: kplanCached, run: func() (measure, error) {
			// The first push fills the cache; the second is measured.
			os.RemoveAll(cacheDir)
			if _, err := kplanRun(ctx, diff("--head", r.head1, "--cache-dir", cacheDir), ""); err != nil {
				return measure{}, err
			}
			return kplanRun(ctx, diff("--head", r.head2, "--cache-dir", cacheDir), "")
		}},
		{name: kplanGOGC, run: func() (measure, error) {
			return kplanRun(ctx, diff("--head", r.head1, "--full"), "GOGC=100")
		}},
		// Detection's cost: the same plan with both engines' modes set.
		{name: kplanNoDetect, run: func() (measure, error) {
			return kplanRun(ctx, diff("--head", r.head1, "--flux=false", "--argocd=false"), "")
		}},
		// The Action's default: the push to main that made the base ran
		// the Action, whose plan rendered every overlay through the cache
		// the pull request's first plan restores.
		{name: kplanFromMain, run: func() (measure, error) {
			if err := fromMain(ctx, diff, r, cacheDir); err != nil {
				return measure{}, err
			}
			return kplanRun(ctx, diff("--head", r.head1, "--cache-dir", cacheDir), "")
		}},
		{name: kplanFromMainNoDetect, run: func() (measure, error) {
			if err := fromMain(ctx, diff, r, cacheDir); err != nil {
				return measure{}, err
			}
			return kplanRun(ctx, diff("--head", r.head1, "--cache-dir", cacheDir, "--flux=false", "--argocd=false"), "")
		}},
	}
	extra, err := issue25Benches(ctx, r, work, diff)
	if err != nil {
		return err
	}
	benches = append(benches, extra...)
	for i := range runs {
		for _, b := range benches {
			step(fmt.Sprintf("run %d/%d: %s", i+1, runs, b.name))
			m, err := b.run()
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			b.ms = append(b.ms, m)
		}
	}
	if err := checkPlans(ctx, diff, r); err != nil {
		return err
	}
	report(benches, runs)
	reportIssue25(benches)
	for _, b := range benches {
		if b.name == cliSeq || b.name == cliPar {
			l.recordPeer("kubeflow/"+b.name, b.ms)
		} else {
			l.record("kubeflow/"+b.name, b.ms, "kubeflow/"+cliSeq)
		}
	}
	if copies != "" {
		if err := growth(ctx, l, corpus, work, kplan, copies, runs); err != nil {
			return err
		}
	}
	if profile {
		for _, p := range []struct {
			name string
			args []string
		}{{"kplan --full", diff("--head", r.head1, "--full")}, {"kplan (changed only)", diff("--head", r.head1)}} {
			if err := where(ctx, p.name, p.args, work); err != nil {
				return err
			}
		}
	}
	return nil
}

// runFlux builds kplan and runs the Flux cases (flux.go).
func runFlux(ctx context.Context, l *ledger, bundle, flate, kplan string, runs int, keep bool) error {
	return inWork(ctx, "kplan-bench-flux-", kplan, keep, func(work, kplan string) error {
		return fluxBench(ctx, l, work, kplan, bundle, flate, runs)
	})
}

// inWork runs a case in a new work directory (kept when keep, and named),
// with kplan built into it unless given.
func inWork(ctx context.Context, prefix, kplan string, keep bool, run func(work, kplan string) error) error {
	work, err := os.MkdirTemp("", prefix)
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work directory:", work)
	} else {
		defer os.RemoveAll(work)
	}
	if kplan == "" {
		kplan = filepath.Join(work, "kplan")
		step("build kplan")
		if err := command(ctx, "", "go", "build", "-o", kplan, "./cmd/kplan"); err != nil {
			return err
		}
	}
	return run(work, kplan)
}

func step(s string) { fmt.Fprintln(os.Stderr, "bench:", s) }

// measure is one run of a command.
type measure struct {
	wall   time.Duration
	cpu    time.Duration // user + system
	rss    int64         // peak resident set, bytes
	stats  string        // kplan's own account of its work
	phases string        // and of its time
}

type bench struct {
	name string
	run  func() (measure, error)
	ms   []measure
}

func (b *bench) best() measure {
	return slices.MinFunc(b.ms, func(x, y measure) int { return int(x.wall - y.wall) })
}

func (b *bench) median() time.Duration {
	w := make([]time.Duration, len(b.ms))
	for i, m := range b.ms {
		w[i] = m.wall
	}
	slices.Sort(w)
	return w[len(w)/2]
}

// leastCPU is the least CPU time of the runs: the figure load moves least.
func (b *bench) leastCPU() time.Duration {
	return slices.MinFunc(b.ms, func(x, y measure) int { return cmp.Compare(x.cpu, y.cpu) }).cpu
}

func (b *bench) peakRSS() int64 {
	var peak int64
	for _, m := range b.ms {
		peak = max(peak, m.rss)
	}
	return peak
}

func report(benches []*bench, runs int) {
	fmt.Printf("\n%d cores, %s; best of %d runs (median in brackets), peak RSS the highest of the runs\n\n", runtime.NumCPU(), runtime.Version(), runs)
	fmt.Printf("%-26s %18s %10s   %s\n", "", "wall", "peak RSS", "work")
	by := map[string]*bench{}
	for _, b := range benches {
		by[b.name] = b
		m := b.best()
		fmt.Printf("%-26s %8s [%7s] %6d MiB   %s\n", b.name, round(m.wall), round(b.median()), b.peakRSS()>>20, m.stats)
	}
	wall := func(name string) time.Duration { return by[name].best().wall }
	cli, par, full, changed, cached := wall(cliSeq), wall(cliPar), wall(kplanFull), wall(kplanChanged), wall(kplanCached)
	fmt.Printf("\nfull plan vs CLI script, sequential:    %5.1fx faster (target at least 10x)\n", ratio(cli, full))
	fmt.Printf("full plan vs CLI script, 1 per core:    %5.1fx faster (target at least 6x)\n", ratio(par, full))
	fmt.Printf("one-app PR plan vs CLI script:          %5.1fx faster\n", ratio(cli, changed))
	fmt.Printf("changed-only plan vs full plan:         %5.1fx faster (target at least 20x)\n", ratio(full, changed))
	fmt.Printf("second push, warm cache:                %s (%.1fx faster than full)\n", round(cached), ratio(full, cached))
	fmt.Printf("kplan's GC settings vs GOGC=100:        %5.1f%% less wall time on the full plan\n",
		100*(1-float64(full)/float64(wall(kplanGOGC))))
	fromMainWall := wall(kplanFromMain)
	fmt.Printf("one-app PR, cache from main's push:     %s, %5.1fx faster than the CLI script (target at least 150x)\n", round(fromMainWall), ratio(cli, fromMainWall))
	fmt.Printf("one-app PR peak RSS:                    %d MiB cold, %d MiB from main's cache (target under 128 MiB)\n",
		by[kplanChanged].peakRSS()>>20, by[kplanFromMain].peakRSS()>>20)
	cpu := func(name string) time.Duration { return by[name].leastCPU() }
	fmt.Printf("detection's share of the one-app PR:    %5.1f%% of the CPU cold, %.1f%% from main's cache (target at most 5%%)\n",
		100*(float64(cpu(kplanChanged))/float64(cpu(kplanNoDetect))-1), 100*(float64(cpu(kplanFromMain))/float64(cpu(kplanFromMainNoDetect))-1))
	var peak int64
	for _, name := range []string{kplanFull, kplanChanged, kplanCached} {
		peak = max(peak, by[name].peakRSS())
	}
	fmt.Printf("kplan peak RSS:                         %d MiB (target under 512 MiB)\n", peak>>20)
	fmt.Printf("\nkplan's phases in its best runs (the rest of the wall time is process start and exit):\n")
	for _, name := range []string{kplanFull, kplanChanged, kplanCached} {
		fmt.Printf("  %-24s %s\n", name, by[name].best().phases)
	}
}

// The benches' names.
const (
	cliSeq       = "kustomize CLI script"
	cliPar       = "kustomize CLI, 1 per core"
	kplanFull    = "kplan --full"
	kplanChanged = "kplan (changed only)"
	kplanCached  = "kplan 2nd push, cached"
	kplanGOGC    = "kplan --full, GOGC=100"

	kplanNoDetect         = "kplan, no detection"
	kplanFromMain         = "kplan, cache from main"
	kplanFromMainNoDetect = "kplan, main's, no detection"
)

// fromMain leaves in cacheDir what the Action's plan of the push to main
// that made the base leaves: every overlay rendered through the cache
// (--warm-cache), and detection's searches of the base.
func fromMain(ctx context.Context, diff func(...string) []string, r *repo, cacheDir string) error {
	os.RemoveAll(cacheDir)
	_, err := kplanRun(ctx, diff("--head", r.base, "--cache-dir", cacheDir, "--warm-cache"), "")
	return err
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func round(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// side is one revision checked out for the CLI.
type side struct {
	dir      string
	overlays []string
}

// cliScript runs `kustomize build` per overlay per side, as a script
// would: one after another (workers 1), or one process per core (xargs
// -P). Failing overlays (remote bases, without network) count as they
// take. Peak RSS is the largest single process's, CPU time the sum of
// theirs.
func cliScript(ctx context.Context, kustomize string, sides [2]side, workers int) (measure, error) {
	type build struct{ dir, overlay string }
	var todo []build
	for _, s := range sides {
		for _, o := range s.overlays {
			todo = append(todo, build{s.dir, o})
		}
	}
	var (
		m      measure
		mu     sync.Mutex
		failed int
		first  error
	)
	next := make(chan build)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				cmd := exec.CommandContext(ctx, kustomize, "build", b.overlay)
				cmd.Dir = b.dir
				cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
				err := cmd.Run()
				var exit *exec.ExitError
				mu.Lock()
				switch {
				case err != nil && !errors.As(err, &exit):
					first = cmp.Or(first, err)
				case err != nil:
					failed++
				}
				if cmd.ProcessState != nil {
					m.rss = max(m.rss, maxRSS(cmd.ProcessState))
					m.cpu += cpuTime(cmd.ProcessState)
				}
				mu.Unlock()
			}
		}()
	}
	for _, b := range todo {
		next <- b
	}
	close(next)
	wg.Wait()
	m.wall = time.Since(start)
	m.stats = fmt.Sprintf("%d builds, %d failed", len(todo), failed)
	return m, first
}

// kplanRun runs kplan and reads its own account from its debug log.
func kplanRun(ctx context.Context, args []string, env string) (measure, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KPLAN_DEBUG=1")
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	m := measure{wall: time.Since(start)}
	if err != nil {
		return m, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String()))
	}
	m.rss, m.cpu = maxRSS(cmd.ProcessState), cpuTime(cmd.ProcessState)
	m.stats = plannedStats(stderr.String())
	var phases []string
	for _, p := range phaseRE.FindAllStringSubmatch(stderr.String(), -1) {
		phases = append(phases, p[1]+" "+p[2])
	}
	m.phases = strings.Join(phases, ", ")
	return m, nil
}

var phaseRE = regexp.MustCompile(`msg=(opened|discovered|closures|settled|loaded|built) took=(\S+)`)

var plannedRE = regexp.MustCompile(`msg=planned .*overlays=(\d+) skipped=(\d+) rendered=(\d+) cacheHits=(\d+) stored=\d+ failFast=(\d+)`)

func plannedStats(log string) string {
	m := plannedRE.FindStringSubmatch(log)
	if m == nil {
		return "?"
	}
	return fmt.Sprintf("%s overlays, %s builds, %s skipped, %s cached, %s failed fast", m[1], m[3], m[2], m[4], m[5])
}

// cpuTime is a finished process's CPU time, user and system, its
// waited-for children included.
func cpuTime(ps *os.ProcessState) time.Duration {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return 0
}

func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // kilobytes on Linux
	}
	return 0
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// checkPlans compares the changed-only plan with the full plan: the same
// overlays, the same changes.
func checkPlans(ctx context.Context, diff func(...string) []string, r *repo) error {
	var plans [2]struct {
		Overlays []map[string]any
		Totals   map[string]int
	}
	for i, extra := range [][]string{{"--head", r.head1, "--full"}, {"--head", r.head1}} {
		args := diff(extra...)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		if err := json.Unmarshal(out, &plans[i]); err != nil {
			return err
		}
	}
	full, changed := plans[0], plans[1]
	if len(full.Overlays) != len(changed.Overlays) {
		return fmt.Errorf("plans disagree: %d overlays in full, %d changed-only", len(full.Overlays), len(changed.Overlays))
	}
	for i, f := range full.Overlays {
		c := changed.Overlays[i]
		untouched := f["status"] == "unchanged" || (f["status"] == "error" && fmt.Sprint(f["base"]) == fmt.Sprint(f["head"]))
		if c["status"] == "unchanged" && untouched {
			continue
		}
		fj, _ := json.Marshal(f)
		cj, _ := json.Marshal(c)
		if !bytes.Equal(fj, cj) {
			return fmt.Errorf("plans disagree on %v:\nfull    %s\nchanged %s", f["path"], fj, cj)
		}
	}
	for _, k := range []string{"added", "changed", "pruned", "detached", "overlays", "changedOverlays", "dangerous"} {
		if full.Totals[k] != changed.Totals[k] {
			return fmt.Errorf("plans disagree on total %s: %d full, %d changed-only", k, full.Totals[k], changed.Totals[k])
		}
	}
	fmt.Printf("check: the changed-only plan says what the full plan says (%d changed overlays)\n", full.Totals["changedOverlays"])
	return nil
}

// where profiles a kplan run and prints its top functions.
func where(ctx context.Context, name string, args []string, work string) error {
	prof := filepath.Join(work, "cpu.prof")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KPLAN_CPUPROFILE="+prof)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=25", args[0], prof).Output()
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	fmt.Printf("\nwhere %s spends its CPU (pprof -top -cum):\n", name)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "%") && !strings.Contains(line, "runtime.goexit") {
			fmt.Println(" ", line)
		}
	}
	return nil
}

// command runs a command, showing its output only when it fails.
func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@kplan.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@kplan.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(string(out)))
	}
	return nil
}

// peerKustomize builds the kustomize CLI once per release and Go version,
// into os.UserCacheDir()/kplan, and checks it uses kplan's kustomize api.
func peerKustomize(ctx context.Context) (string, error) {
	dir := filepath.Join(cacheRoot(), "kustomize-"+peerVersion+"-"+runtime.Version())
	bin := filepath.Join(dir, "kustomize")
	if !executable(bin) {
		if err := goInstall(ctx, "sigs.k8s.io/kustomize/kustomize/v5@"+peerVersion, dir); err != nil {
			return "", err
		}
	}
	want, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/kustomize/api").Output()
	if err != nil {
		return "", fmt.Errorf("kplan's kustomize api version: %w", err)
	}
	got, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return "", err
	}
	api := "sigs.k8s.io/kustomize/api\t" + strings.TrimSpace(string(want))
	if !strings.Contains(string(got), api) {
		return "", fmt.Errorf("kustomize %s is not built on %s; update peerVersion", peerVersion, api)
	}
	return bin, nil
}

// repo is the corpus in git: a base commit and two pushes to a pull
// request that changes one application.
type repo struct {
	dir                string
	base, head1, head2 string
	files              int
}

// makeRepo unpacks copies of the corpus (copies > 1: under c0/, c1/, …,
// a monorepo) and commits the pull request's pushes to the first copy.
func makeRepo(ctx context.Context, tarball, dir string, copies int) (*repo, error) {
	prefix := ""
	r := &repo{dir: dir}
	for i := range copies {
		into := dir
		if copies > 1 {
			into = filepath.Join(dir, fmt.Sprintf("c%d", i))
			prefix = "c0/"
		}
		n, err := untar(tarball, into)
		if err != nil {
			return nil, fmt.Errorf("unpack %s: %w", tarball, err)
		}
		r.files += n
	}
	git := func(args ...string) error { return command(ctx, dir, "git", args...) }
	rev := func() (string, error) {
		out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
		return strings.TrimSpace(string(out)), err
	}
	edit := func(add string) error {
		p := filepath.Join(dir, filepath.FromSlash(prefix+appFile))
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte(appLine)) {
			return fmt.Errorf("%s has no line %q to change", appFile, appLine)
		}
		data = bytes.Replace(data, []byte(appLine), []byte(appLine+add), 1)
		return os.WriteFile(p, data, 0o644)
	}
	steps := []func() error{
		func() error { return git("init", "-q", "-b", "main") },
		func() error { return git("add", "-A") },
		func() error { return git("commit", "-q", "-m", "base") },
		func() (err error) { r.base, err = rev(); return err },
		func() error { return edit(push1Add) },
		func() error { return git("commit", "-q", "-am", "katib: debug logging") },
		func() (err error) { r.head1, err = rev(); return err },
		func() error { return edit(push2Add) },
		func() error { return git("commit", "-q", "-am", "katib: development logging") },
		func() (err error) { r.head2, err = rev(); return err },
		// A CI checkout is packed.
		func() error { return git("repack", "-a", "-d", "-q") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// worktrees checks out base and the first push for the CLI, and finds
// their overlays as kplan does.
func (r *repo) worktrees(ctx context.Context, work string) ([2]side, error) {
	var sides [2]side
	for i, rev := range []string{r.base, r.head1} {
		dir := filepath.Join(work, []string{"base", "head"}[i])
		if err := command(ctx, r.dir, "git", "worktree", "add", "-q", "--detach", dir, rev); err != nil {
			return sides, err
		}
		s, err := snapshot.FromCommit(ctx, r.dir, rev)
		if err != nil {
			return sides, err
		}
		tree, err := render.Discover(s.FS, render.Filter{})
		if err != nil {
			return sides, err
		}
		sides[i] = side{dir: dir, overlays: tree.Overlays}
	}
	return sides, nil
}

// untar unpacks a .tar.gz whose entries sit under one top directory into
// dir, and counts its files.
func untar(tarball, dir string) (int, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(gz)
	files := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return files, err
		}
		_, rest, _ := strings.Cut(strings.TrimPrefix(hdr.Name, "./"), "/")
		if rest == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(rest))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return files, fmt.Errorf("entry %s leaves the directory", hdr.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return files, err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			files++
			err = writeFile(p, tr, hdr.FileInfo().Mode())
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		}
		if err != nil {
			return files, err
		}
	}
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// growth measures how a plan's cost grows with the repository: monorepos
// of 1, 4 and 10 copies of the corpus, a pull request changing one file of
// the first copy. The one-file PR is measured runs times (best shown), the
// full plan once.
func growth(ctx context.Context, l *ledger, corpus, work, kplan, copies string, runs int) error {
	fmt.Printf("\ngrowth with the repository: monorepos of N copies of the corpus, a one-file PR to the first copy\n\n")
	fmt.Printf("%7s %7s %8s   %20s   %20s\n", "copies", "files", "overlays", "one-file PR (RSS)", "full plan (RSS)")
	first := 0
	for _, c := range strings.Split(copies, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-growth %q: want a list of positive numbers", copies)
		}
		if first == 0 {
			first = n
		}
		step(fmt.Sprintf("growth: %d copies of the corpus", n))
		dir := filepath.Join(work, fmt.Sprintf("growth-%d", n))
		r, err := makeRepo(ctx, corpus, dir, n)
		if err != nil {
			return err
		}
		diff := func(extra ...string) []string {
			return append([]string{kplan, "diff", "-C", r.dir, "--base", r.base, "--head", r.head1, "--format", "json", "--fail-on-error=false"}, extra...)
		}
		pr := &bench{}
		for range runs {
			m, err := kplanRun(ctx, diff(), "")
			if err != nil {
				return err
			}
			pr.ms = append(pr.ms, m)
		}
		full, err := kplanRun(ctx, diff("--full"), "")
		if err != nil {
			return err
		}
		overlays := "?"
		if m := overlaysRE.FindStringSubmatch(full.stats); m != nil {
			overlays = m[1]
		}
		fmt.Printf("%7d %7d %8s   %9s (%4d MiB)   %9s (%4d MiB)\n", n, r.files, overlays,
			round(pr.best().wall), pr.peakRSS()>>20, round(full.wall), full.rss>>20)
		// Each size against the first: how a plan grows is the figure.
		for _, c := range []struct {
			what string
			ms   []measure
		}{{"one-file PR", pr.ms}, {"full plan", []measure{full}}} {
			name := fmt.Sprintf("kubeflow growth/%d copies/%s", n, c.what)
			peer := fmt.Sprintf("kubeflow growth/%d copies/%s", first, c.what)
			if n == first {
				peer = ""
			}
			l.record(name, c.ms, peer)
		}
		os.RemoveAll(dir)
	}
	return nil
}

var overlaysRE = regexp.MustCompile(`^(\d+) overlays`)

// The benches of one render per distinct input and of a pull request
// that adds an object (issue 25).
const (
	kplanFullTwice = "kplan --full, both sides"
	kplanAdds      = "kplan, PR adding an object"
)

// addedObject is the object the second pull request adds, beside the
// file the first changes.
const addedObject = "applications/katib/upstream/components/controller/extra-config.yaml"

// issue25Benches measures the full plan rendering both sides of every
// overlay (as it did before one render served both sides of an unchanged
// input), and a pull request that adds an object to the application the
// one-file pull request changes (duplicate-object answered without
// rendering every skipped overlay).
func issue25Benches(ctx context.Context, r *repo, work string, diff func(...string) []string) ([]*bench, error) {
	adds, err := addObjectCommit(ctx, r, filepath.Join(work, "adds"))
	if err != nil {
		return nil, fmt.Errorf("the pull request adding an object: %w", err)
	}
	return []*bench{
		{name: kplanFullTwice, run: func() (measure, error) {
			return kplanRun(ctx, diff("--head", r.head1, "--full", "--no-render-reuse"), "")
		}},
		{name: kplanAdds, run: func() (measure, error) { return kplanRun(ctx, diff("--head", adds), "") }},
	}, nil
}

// addObjectCommit commits, on top of the base, a ConfigMap added to the
// kustomization beside appFile, in a worktree at dir; it returns the
// commit.
func addObjectCommit(ctx context.Context, r *repo, dir string) (string, error) {
	if err := command(ctx, r.dir, "git", "worktree", "add", "-q", "--detach", dir, r.base); err != nil {
		return "", err
	}
	defer command(ctx, r.dir, "git", "worktree", "remove", "--force", dir)
	kust := filepath.Join(dir, filepath.Dir(filepath.FromSlash(appFile)), "kustomization.yaml")
	data, err := os.ReadFile(kust)
	if err != nil {
		return "", err
	}
	if !bytes.Contains(data, []byte("resources:\n")) {
		return "", fmt.Errorf("%s lists no resources to add to", kust)
	}
	data = bytes.Replace(data, []byte("resources:\n"), []byte("resources:\n  - "+filepath.Base(addedObject)+"\n"), 1)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: katib-extra-config\ndata:\n  debug: \"true\"\n"
	if err := os.WriteFile(kust, data, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(addedObject)), []byte(cm), 0o644); err != nil {
		return "", err
	}
	if err := command(ctx, dir, "git", "add", "-A"); err != nil {
		return "", err
	}
	if err := command(ctx, dir, "git", "commit", "-q", "-m", "katib: an extra ConfigMap"); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	return strings.TrimSpace(string(out)), err
}

// reportIssue25 prints the full plan's time and builds with one render
// per distinct input against rendering both sides, and the pull request
// adding an object against the one-file pull request (target: within 2x).
func reportIssue25(benches []*bench) {
	by := map[string]*bench{}
	for _, b := range benches {
		by[b.name] = b
	}
	if by[kplanFullTwice] == nil || by[kplanAdds] == nil {
		return
	}
	full, twice := by[kplanFull].best(), by[kplanFullTwice].best()
	fmt.Printf("\nfull plan, one render per distinct input: %s (%s)\n", round(full.wall), full.stats)
	fmt.Printf("  vs rendering both sides:               %s (%s): %.2fx faster\n", round(twice.wall), twice.stats, ratio(twice.wall, full.wall))
	adds, one := by[kplanAdds].best(), by[kplanChanged].best()
	fmt.Printf("PR adding an object vs one-file PR:      %s vs %s: %.2fx the time (target within 2x) (%s)\n",
		round(adds.wall), round(one.wall), ratio(adds.wall, one.wall), adds.stats)
}
