package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
// (`flate diff ks` on the two sides checked out, its changed-only mode)
// cold (an empty XDG cache) and warm, when flate is on the PATH (or
// -flate). kplan must be ahead of warm flate on every case.
const (
	fluxImageBump = "4c2c091"
	fluxApp       = "kubernetes/apps/default/home-assistant/app"
	fluxTree      = "kubernetes" // flate's --path
)

// fluxCase is one pull request of the Flux corpus.
type fluxCase struct {
	name       string
	base, head string
	hosts      []string // kplan's --remote-hosts
	target     time.Duration
	// Best wall times and CPU (user+sys, with child processes) by bench.
	wall, cpu map[string][]time.Duration
}

// fluxBench runs the Flux cases; flate is "" when it is not installed.
func fluxBench(ctx context.Context, work, kplan, bundle, flate string, runs int) error {
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
	image := &fluxCase{name: "one-image bump (" + fluxImageBump + ")", target: 250 * time.Millisecond}
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
	chart := &fluxCase{name: "chart version bump (warm chart cache)", hosts: []string{"--remote-hosts", "127.0.0.1"}, target: time.Second}
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
	if flate == "" {
		fmt.Println("\nflate is not installed (go install github.com/home-operations/flate/cmd/flate@v0.6.5, or -flate PATH): its columns are left out")
	}

	for _, c := range cases {
		c.wall, c.cpu = map[string][]time.Duration{}, map[string][]time.Duration{}
		diff := func(cache string) []string {
			args := []string{kplan, "diff", "-C", dir, "--base", c.base, "--head", c.head, "--format", "json", "--fail-on-error=false", "--cache-dir", cache}
			return append(args, c.hosts...)
		}
		warmKplan, warmFlate := filepath.Join(work, "flux-kplan-warm"), filepath.Join(work, "flux-flate-warm")
		os.RemoveAll(warmKplan)
		os.RemoveAll(warmFlate)
		// The warm caches are filled by a first run of the same plan.
		if _, _, err := timed(ctx, diff(warmKplan), nil); err != nil {
			return err
		}
		flateArgs := []string{flate, "diff", "ks", "--path", filepath.Join(trees[c.head], fluxTree), "--path-orig", filepath.Join(trees[c.base], fluxTree)}
		if flate != "" {
			timed(ctx, flateArgs, []string{"XDG_CACHE_HOME=" + warmFlate})
		}
		benches := []struct {
			name string
			run  func() (time.Duration, time.Duration, error)
		}{
			{"kplan cold", func() (time.Duration, time.Duration, error) {
				cold := filepath.Join(work, "flux-kplan-cold")
				os.RemoveAll(cold)
				return timed(ctx, diff(cold), nil)
			}},
			{"kplan warm", func() (time.Duration, time.Duration, error) { return timed(ctx, diff(warmKplan), nil) }},
		}
		if flate != "" {
			benches = append(benches,
				struct {
					name string
					run  func() (time.Duration, time.Duration, error)
				}{"flate cold", func() (time.Duration, time.Duration, error) {
					cold := filepath.Join(work, "flux-flate-cold")
					os.RemoveAll(cold)
					w, cpu, _ := timed(ctx, flateArgs, []string{"XDG_CACHE_HOME=" + cold}) // its exit says whether it found changes
					return w, cpu, nil
				}},
				struct {
					name string
					run  func() (time.Duration, time.Duration, error)
				}{"flate warm", func() (time.Duration, time.Duration, error) {
					w, cpu, _ := timed(ctx, flateArgs, []string{"XDG_CACHE_HOME=" + warmFlate})
					return w, cpu, nil
				}})
		}
		for i := range runs {
			for _, b := range benches {
				step(fmt.Sprintf("Flux run %d/%d: %s, %s", i+1, runs, c.name, b.name))
				w, cpu, err := b.run()
				if err != nil {
					return fmt.Errorf("%s, %s: %w", c.name, b.name, err)
				}
				c.wall[b.name] = append(c.wall[b.name], w)
				c.cpu[b.name] = append(c.cpu[b.name], cpu)
			}
		}
		if err := sameAsFull(ctx, kplan, dir, c.name, c.base, c.head, c.hosts); err != nil {
			return err
		}
	}
	fluxReport(cases, runs, flate != "")
	return nil
}

// timed runs a command and returns its wall time and CPU time (user and
// system, its child processes included).
func timed(ctx context.Context, args, env []string) (wall, cpu time.Duration, err error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = nil, &stderr
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil {
		return wall, cpu, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String()))
	}
	return wall, cpu, nil
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
	names := []string{"kplan cold", "kplan warm"}
	if flate {
		names = append(names, "flate cold", "flate warm")
	}
	fmt.Printf("\nFlux plans on onedr0p/home-ops: wall time best of %d (CPU user+sys of that run, child processes included)\n\n", runs)
	fmt.Printf("%-40s", "")
	for _, n := range names {
		fmt.Printf(" %22s", n)
	}
	fmt.Println()
	for _, c := range cases {
		fmt.Printf("%-40s", c.name)
		for _, n := range names {
			i := bestIndex(c.wall[n])
			fmt.Printf(" %10s (%7s CPU)", round(c.wall[n][i]), round(c.cpu[n][i]))
		}
		fmt.Println()
	}
	fmt.Println()
	for _, c := range cases {
		w := func(n string) time.Duration { return slices.Min(c.wall[n]) }
		cpu := func(n string) time.Duration { return slices.Min(c.cpu[n]) }
		verdict := "met"
		if w("kplan warm") > c.target {
			verdict = "NOT met"
		}
		fmt.Printf("%s: kplan warm %s (target at most %s: %s)\n", c.name, round(w("kplan warm")), round(c.target), verdict)
		if flate {
			// Wall time follows the machine's load; CPU time much less.
			fmt.Printf("  flate / kplan, warm: %.1fx wall, %.1fx CPU; cold: %.1fx wall, %.1fx CPU", ratio(w("flate warm"), w("kplan warm")), ratio(cpu("flate warm"), cpu("kplan warm")),
				ratio(w("flate cold"), w("kplan cold")), ratio(cpu("flate cold"), cpu("kplan cold")))
			if w("kplan warm") >= w("flate warm") || w("kplan cold") >= w("flate cold") {
				fmt.Printf(" (kplan NOT ahead of flate)")
			}
			fmt.Println()
		}
	}
}

func bestIndex(ds []time.Duration) int {
	best := 0
	for i, d := range ds {
		if d < ds[best] {
			best = i
		}
	}
	return best
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

// findFlate is the flate binary: path if given, else flate on the PATH,
// else "".
func findFlate(path string) string {
	if path != "" {
		return path
	}
	p, err := exec.LookPath("flate")
	if err != nil {
		return ""
	}
	return p
}
