package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/testchart"
)

// The Flux cases run on the onedr0p/home-ops history bundle (a real
// home-ops repository: one cluster, 80-odd Flux Kustomizations, most apps
// HelmReleases of OCI charts):
//
//   - one-image bump: its commit 4c2c091, a Renovate bump of the
//     home-assistant image in a HelmRelease's values;
//   - chart version bump: on top of 4c2c091, home-assistant's release
//     takes the chart demo (testdata/flux-helm) from a HelmRepository
//     served on loopback, and the pull request bumps it 1.0.0 -> 2.0.0
//     (the real charts are on ghcr.io, out of reach of a benchmark).
//
// Each is planned by kplan cold (an empty --cache-dir) and warm (the
// cache directory a first plan of the same commits filled), and by flate
// (`flate diff all` on the two sides checked out, its changed-only mode)
// cold (an empty XDG cache) and warm, when it is installed (flate.go).
// kplan must be ahead of warm flate on every case.
const (
	fluxImageBump = "4c2c091"
	fluxApp       = "kubernetes/apps/default/home-assistant/app"
	fluxTree      = "kubernetes" // flate's --path
)

// fluxCase is one pull request of the Flux corpus.
type fluxCase struct {
	name       string
	key        string // in the baseline: flux/<key>/<bench>
	base, head string
	hosts      []string // kplan's --remote-hosts
	target     time.Duration
	// flateSays is what flate's diff of the case names (for the chart
	// bump, an object of the rendered chart): a flate that printed no
	// such thing did not do kplan's work (its exit status says only
	// whether every source reconciled, and ghcr.io is out of reach).
	flateSays string
	// The runs of each bench, by bench.
	runs map[string][]measure
}

// The Flux benches, kplan's and flate's.
const (
	kplanCold = "kplan cold"
	kplanWarm = "kplan warm"
	flateCold = "flate cold"
	flateWarm = "flate warm"
)

// fluxBench runs the Flux cases, recording them in l; flateFlag is the
// -flate flag (findFlate).
func fluxBench(ctx context.Context, l *ledger, work, kplan, bundle, flateFlag string, runs int) error {
	if _, err := os.Stat(bundle); err != nil {
		fmt.Printf("\nFlux cases skipped: no corpus bundle %s\n", bundle)
		return nil
	}
	step("Flux: clone " + filepath.Base(bundle))
	dir := filepath.Join(work, "flux-repo")
	if err := command(ctx, "", "git", "clone", "-q", bundle, dir); err != nil {
		return err
	}
	git := func(args ...string) error { return command(ctx, dir, "git", args...) }
	rev := func(r string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", r).Output()
		return strings.TrimSpace(string(out)), err
	}
	image := &fluxCase{name: "one-image bump (" + fluxImageBump + ")", key: "one-image bump", target: 250 * time.Millisecond,
		flateSays: "HelmRelease/default/home-assistant"}
	var err error
	if image.base, err = rev(fluxImageBump + "~1"); err != nil {
		return fmt.Errorf("the bundle has no commit %s: %w", fluxImageBump, err)
	}
	if image.head, err = rev(fluxImageBump); err != nil {
		return err
	}

	// The chart bump: a chart repository on loopback for this run.
	charts, stop := testchart.StartRepo()
	defer stop()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		tgz, err := testchart.PackageDir("testdata/flux-helm/charts/demo", v, v)
		if err != nil {
			return fmt.Errorf("package the demo chart: %w", err)
		}
		if err := charts.Publish(tgz); err != nil {
			return err
		}
	}
	chart := &fluxCase{name: "chart version bump (warm chart cache)", key: "chart bump", hosts: []string{"--remote-hosts", "127.0.0.1"}, target: time.Second,
		flateSays: "apps/v1/Deployment/default/home-assistant"}
	steps := []func() error{
		func() error { return git("checkout", "-q", "--detach", fluxImageBump) },
		func() error {
			return os.WriteFile(filepath.Join(dir, fluxApp, "ocirepository.yaml"), []byte(fmt.Sprintf(
				"apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: home-assistant\nspec:\n  interval: 1h\n  url: %s\n", charts.URL)), 0o644)
		},
		func() error {
			return replaceIn(filepath.Join(dir, fluxApp, "helmrelease.yaml"), "  chartRef:\n    kind: OCIRepository\n    name: home-assistant\n",
				"  chart:\n    spec:\n      chart: demo\n      version: 1.0.0\n      sourceRef:\n        kind: HelmRepository\n        name: home-assistant\n")
		},
		func() error { return git("commit", "-q", "-am", "home-assistant: the demo chart") },
		func() (err error) { chart.base, err = rev("HEAD"); return err },
		func() error {
			return replaceIn(filepath.Join(dir, fluxApp, "helmrelease.yaml"), "      version: 1.0.0\n", "      version: 2.0.0\n")
		},
		func() error { return git("commit", "-q", "-am", "home-assistant: demo 2.0.0") },
		func() (err error) { chart.head, err = rev("HEAD"); return err },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("Flux chart bump: %w", err)
		}
	}
	cases := []*fluxCase{image, chart}

	// Both sides checked out for flate.
	trees := map[string]string{}
	for _, c := range cases {
		for _, r := range []string{c.base, c.head} {
			if trees[r] != "" {
				continue
			}
			wt := filepath.Join(work, "flux-"+r[:12])
			if err := git("worktree", "add", "-q", "--detach", wt, r); err != nil {
				return err
			}
			trees[r] = wt
		}
	}
	flate, note := findFlate(flateFlag)
	version := ""
	if flate == "" {
		fmt.Printf("\n%s: the Flux cases run without flate's columns\n", note)
	} else {
		version = flateVersionOf(ctx, flate)
		fmt.Printf("\nflate %s (%s)", version, flate)
		if version != flateVersion {
			fmt.Printf(": not the pinned %s (make flate builds it)", flateVersion)
		}
		fmt.Println()
	}
	for _, c := range cases {
		if err := c.measure(ctx, work, kplan, dir, flate, trees, runs); err != nil {
			return err
		}
		if err := sameAsFull(ctx, kplan, dir, c.name, c.base, c.head, c.hosts); err != nil {
			return err
		}
		c.record(l, version)
	}
	fluxReport(cases, runs, flate != "")
	return nil
}

// measure runs the case's benches runs times, interleaved: kplan cold and
// warm, and flate cold and warm unless flate is "". trees are the
// commits checked out, for flate.
func (c *fluxCase) measure(ctx context.Context, work, kplan, dir, flate string, trees map[string]string, runs int) error {
	c.runs = map[string][]measure{}
	diff := func(cache string) []string {
		args := []string{kplan, "diff", "-C", dir, "--base", c.base, "--head", c.head, "--format", "json", "--fail-on-error=false", "--cache-dir", cache}
		return append(args, c.hosts...)
	}
	warmKplan, warmFlate := filepath.Join(work, "flux-kplan-warm"), filepath.Join(work, "flux-flate-warm")
	os.RemoveAll(warmKplan)
	os.RemoveAll(warmFlate)
	// The warm caches are filled by a first run of the same plan.
	if _, err := timed(ctx, diff(warmKplan), nil, nil); err != nil {
		return err
	}
	benches := map[string]func() (measure, error){
		kplanCold: func() (measure, error) {
			cold := filepath.Join(work, "flux-kplan-cold")
			os.RemoveAll(cold)
			return timed(ctx, diff(cold), nil, nil)
		},
		kplanWarm: func() (measure, error) { return timed(ctx, diff(warmKplan), nil, nil) },
	}
	names := []string{kplanCold, kplanWarm}
	if flate != "" {
		// `diff all`, not `diff ks`: ks leaves HelmReleases unrendered
		// (the chart bump's diff was the HelmRelease's version alone),
		// where kplan renders their charts. flate exits non-zero when a
		// source did not reconcile (the OCI charts on ghcr.io, out of
		// reach): what it printed says whether it ran, so the warm
		// fill is checked for the change.
		flateArgs := []string{flate, "diff", "all", "--path", filepath.Join(trees[c.head], fluxTree), "--path-orig", filepath.Join(trees[c.base], fluxTree)}
		var out strings.Builder
		if _, err := timed(ctx, flateArgs, []string{"XDG_CACHE_HOME=" + warmFlate}, &out); !strings.Contains(out.String(), c.flateSays) {
			return fmt.Errorf("%s: flate's diff does not name %s (did its command line change?): %v\n%s", c.name, c.flateSays, err, tail(out.String()))
		}
		benches[flateCold] = func() (measure, error) {
			cold := filepath.Join(work, "flux-flate-cold")
			os.RemoveAll(cold)
			return flateRun(ctx, flateArgs, cold)
		}
		benches[flateWarm] = func() (measure, error) { return flateRun(ctx, flateArgs, warmFlate) }
		names = append(names, flateCold, flateWarm)
	}
	for i := range runs {
		for _, name := range names {
			step(fmt.Sprintf("Flux run %d/%d: %s, %s", i+1, runs, c.name, name))
			m, err := benches[name]()
			if err != nil {
				return fmt.Errorf("%s, %s: %w", c.name, name, err)
			}
			c.runs[name] = append(c.runs[name], m)
		}
	}
	return nil
}

// record keeps the case's benches in l: kplan cold against flate cold,
// warm against warm. The peer's name holds flate's version: a ratio
// recorded against another flate is not compared.
func (c *fluxCase) record(l *ledger, flateVersion string) {
	prefix := "flux/" + c.key + "/"
	peer := func(bench string) string {
		if flateVersion == "" {
			return ""
		}
		return prefix + strings.Replace(bench, "flate", "flate "+flateVersion, 1)
	}
	for _, b := range []string{flateCold, flateWarm} {
		if runs := c.runs[b]; len(runs) > 0 {
			l.recordPeer(peer(b), runs)
		}
	}
	l.record(prefix+kplanCold, c.runs[kplanCold], peer(flateCold))
	l.record(prefix+kplanWarm, c.runs[kplanWarm], peer(flateWarm))
}

// flateRun runs flate with its cache in cache and measures it. Its exit
// status 1 says a source did not reconcile (ghcr.io is out of reach): a
// measure all the same; anything else (a crash) is an error.
func flateRun(ctx context.Context, args []string, cache string) (measure, error) {
	m, err := timed(ctx, args, []string{"XDG_CACHE_HOME=" + cache}, nil)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return m, nil
	}
	return m, err
}

// timed runs a command and measures it: wall time, CPU time (user and
// system, its child processes included) and peak RSS. stdout, when not
// nil, gets what it prints.
func timed(ctx context.Context, args, env []string, stdout io.Writer) (measure, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	m := measure{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		m.cpu, m.rss = cpuTime(cmd.ProcessState), maxRSS(cmd.ProcessState)
	}
	if err != nil {
		return m, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String()))
	}
	return m, nil
}

// sameAsFull checks that the changed-only plan of the pull request name
// (base..head, with kplan's flags extra) says what --full says.
func sameAsFull(ctx context.Context, kplan, dir, name, base, head string, extra []string) error {
	var plans [2]struct {
		Overlays []json.RawMessage
		Totals   map[string]int
	}
	for i, full := range [][]string{{"--full"}, nil} {
		args := append(append([]string{"diff", "-C", dir, "--base", base, "--head", head, "--format", "json", "--fail-on-error=false"}, extra...), full...)
		out, err := exec.CommandContext(ctx, kplan, args...).Output()
		if err != nil {
			return fmt.Errorf("kplan %s: %w", strings.Join(args, " "), err)
		}
		if err := json.Unmarshal(out, &plans[i]); err != nil {
			return err
		}
	}
	for _, k := range []string{"added", "changed", "pruned", "changedOverlays", "failed"} {
		if plans[0].Totals[k] != plans[1].Totals[k] {
			return fmt.Errorf("%s: plans disagree on total %s: %d full, %d changed-only", name, k, plans[0].Totals[k], plans[1].Totals[k])
		}
	}
	if plans[1].Totals["changedOverlays"] == 0 {
		return fmt.Errorf("%s: the plan has no change", name)
	}
	fmt.Printf("check: %s: the changed-only plan says what --full says (%d changed targets, %d objects changed, %d added)\n",
		name, plans[1].Totals["changedOverlays"], plans[1].Totals["changed"], plans[1].Totals["added"])
	return nil
}

func fluxReport(cases []*fluxCase, runs int, flate bool) {
	names := []string{kplanCold, kplanWarm}
	if flate {
		names = append(names, flateCold, flateWarm)
	}
	fmt.Printf("\nFlux plans on onedr0p/home-ops, load average %s: wall time best of %d (CPU user+sys of that run, child processes included; peak RSS the highest of the runs)\n\n", loadAverage(), runs)
	fmt.Printf("%-40s", "")
	for _, n := range names {
		fmt.Printf(" %31s", n)
	}
	fmt.Println()
	for _, c := range cases {
		fmt.Printf("%-40s", c.name)
		for _, n := range names {
			b := &bench{ms: c.runs[n]}
			m := b.best()
			fmt.Printf(" %8s (%7s CPU, %3d MiB)", round(m.wall), round(m.cpu), b.peakRSS()>>20)
		}
		fmt.Println()
	}
	fmt.Println()
	for _, c := range cases {
		least := func(n string) (wall, cpu time.Duration) {
			wall, cpu = time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
			for _, m := range c.runs[n] {
				wall, cpu = min(wall, m.wall), min(cpu, m.cpu)
			}
			return wall, cpu
		}
		kw, kwCPU := least(kplanWarm)
		kc, kcCPU := least(kplanCold)
		verdict := "met"
		if kw > c.target {
			verdict = "NOT met"
		}
		fmt.Printf("%s: kplan warm %s (target at most %s: %s)\n", c.name, round(kw), round(c.target), verdict)
		if flate {
			fw, fwCPU := least(flateWarm)
			fc, fcCPU := least(flateCold)
			// Wall time follows the machine's load; CPU time much less.
			fmt.Printf("  flate / kplan, warm: %.1fx wall, %.1fx CPU; cold: %.1fx wall, %.1fx CPU", ratio(fw, kw), ratio(fwCPU, kwCPU), ratio(fc, kc), ratio(fcCPU, kcCPU))
			if kw >= fw || kc >= fc || kwCPU >= fwCPU || kcCPU >= fcCPU {
				fmt.Printf(" (kplan NOT ahead of flate)")
			}
			fmt.Println()
		}
	}
}

// replaceIn replaces the first old in file with new.
func replaceIn(file, old, new string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), old) {
		return errors.New(file + ": no " + fmt.Sprintf("%q", old) + " to replace")
	}
	return os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
}
