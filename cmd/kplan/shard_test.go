package main

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shardRepo is a repository of eight overlays and a change that edits a
// base two of them share, edits one overlay, breaks one, removes one,
// moves one and adds one, leaving two alone.
func shardRepo(t *testing.T) (dir, base, head string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	files := map[string]string{
		"base/kustomization.yaml": "resources:\n- cm.yaml\n",
		"base/cm.yaml":            configMap("shared", "a: '1'"),
	}
	for _, o := range []string{"shared-a", "shared-b", "edited", "broken", "removed", "still-1", "still-2", "old-home"} {
		dir := "overlays/" + o
		files[dir+"/kustomization.yaml"] = "namePrefix: " + o + "-\nresources:\n- cm.yaml\n"
		files[dir+"/cm.yaml"] = configMap("own", "v: '1'")
		if strings.HasPrefix(o, "shared") {
			files[dir+"/kustomization.yaml"] += "- ../../base\n"
		}
	}
	write(t, dir, files)
	base = commitAll(t, dir, "base")
	write(t, dir, map[string]string{
		"base/cm.yaml":                       configMap("shared", "a: '2'"),
		"overlays/edited/cm.yaml":            configMap("own", "v: '2'"),
		"overlays/broken/kustomization.yaml": "resources:\n- missing.yaml\n",
		"overlays/removed":                   "",
		"overlays/added/kustomization.yaml":  "resources:\n- cm.yaml\n",
		"overlays/added/cm.yaml":             configMap("new", "v: '1'"),
	})
	git(t, dir, "mv", "overlays/old-home", "overlays/new-home")
	head = commitAll(t, dir, "head")
	return dir, base, head
}

// exitOf is the exit status a kplan run ends with.
func exitOf(t *testing.T, err error, stderr string) int {
	t.Helper()
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return int(exit)
	}
	t.Fatalf("kplan: %v\n%s", err, stderr)
	return -1
}

// writeParts plans each shard of n into its own part file, with extra
// flags.
func writeParts(t *testing.T, dir, base, head string, n int, extra ...string) []string {
	t.Helper()
	var parts []string
	for i := 1; i <= n; i++ {
		out, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", base, "--head", head, "--shard", strconv.Itoa(i) + "/" + strconv.Itoa(n), "-o", "json"}, extra...)...)
		if err != nil {
			t.Fatalf("kplan diff --shard %d/%d: %v\n%s", i, n, err, stderr)
		}
		name := filepath.Join(t.TempDir(), "part-"+strconv.Itoa(i)+".json")
		if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, name)
	}
	return parts
}

// The parts of --shard 1/3, 2/3 and 3/3 merge into the plan kplan diff
// prints unsharded — in JSON but for the work section, in Markdown but
// for its footer (time and renders are per run), in text — and in exit
// codes; each shard plans a share.
func TestShardedPlanMergesToTheUnshardedPlan(t *testing.T) {
	t.Parallel()
	dir, base, head := shardRepo(t)
	parts := writeParts(t, dir, base, head, 3)
	for _, p := range parts {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"Path":"overlays/`) {
			t.Errorf("%s plans no overlay: the shards are not shared out\n%s", p, data)
		}
	}
	for _, flags := range [][]string{{"-o", "json"}, {"-o", "json", "--fail-on-error=false", "--exit-code"}, {"-o", "markdown"}, {"-o", "text"}} {
		want, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", base, "--head", head}, flags...)...)
		wantExit := exitOf(t, err, stderr)
		got, stderr, err := kplan(t, nil, append(append([]string{"merge"}, parts...), flags...)...)
		gotExit := exitOf(t, err, stderr)
		switch flags[1] {
		case "json":
			want, got = withoutWork(t, want), withoutWork(t, got)
		case "markdown":
			if !strings.Contains(got, "<sub>kplan planned 10 overlays on 3 runners: ") {
				t.Errorf("the merged comment's footer does not say the plan ran on 3 runners:\n%s", got)
			}
			want, got = withoutFooter(want), withoutFooter(got)
		}
		if got != want {
			t.Errorf("merge %q printed\n%s\nwant, as kplan diff unsharded:\n%s", flags, got, want)
		}
		if gotExit != wantExit {
			t.Errorf("merge %q exits %d, kplan diff unsharded %d", flags, gotExit, wantExit)
		}
	}
	p := diffJSON(t, "-C", dir, "--base", base, "--head", head)
	want := map[string]string{"overlays/added": "new", "overlays/broken": "error", "overlays/edited": "changed", "overlays/removed": "removed",
		"overlays/new-home": "moved", "overlays/shared-a": "changed", "overlays/shared-b": "changed", "overlays/still-1": "unchanged", "overlays/still-2": "unchanged"}
	if got := statuses(p); !maps.Equal(got, want) {
		t.Errorf("the unsharded plan is not the case this test is for: %v, want %v", got, want)
	}
}

// withoutFooter is a Markdown plan without the line saying what the plan
// rendered and how long it took: the work of each run.
func withoutFooter(md string) string {
	var keep []string
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "<sub>kplan planned") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// merge refuses a set with a shard missing, naming it, parts of
// different commits or flags and a shard given twice.
func TestMergeRefusesMissingShardsAndOtherCommits(t *testing.T) {
	t.Parallel()
	dir, base, head := shardRepo(t)
	parts := writeParts(t, dir, base, head, 3)
	write(t, dir, map[string]string{"overlays/still-1/cm.yaml": configMap("own", "v: '3'")})
	later := commitAll(t, dir, "later")
	other := writeParts(t, dir, base, later, 3)
	excluding := writeParts(t, dir, base, head, 3, "--exclude", "overlays/still-1")
	// A render setting no flag list named: the fingerprint is derived from plan.Options.
	fetching := writeParts(t, dir, base, head, 3, "--remote-hosts", "charts.example.com")
	for _, c := range []struct {
		name  string
		parts []string
		want  string
	}{
		{"missing", []string{parts[0], parts[2]}, "shard 2/3 missing"},
		{"other commits", []string{parts[0], other[1], parts[2]}, "parts of different commits"},
		{"twice", []string{parts[0], parts[1], parts[1]}, "shard 2/3 given twice"},
		{"other flags", []string{parts[0], excluding[1], parts[2]}, "run every shard with the same flags"},
		{"other remote hosts", []string{parts[0], parts[1], fetching[2]}, "Render.Remote=charts.example.com"},
	} {
		out, _, err := kplan(t, nil, append([]string{"merge", "-o", "json"}, c.parts...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%s: merge printed %q and returned %v, want nothing printed and an error saying %q", c.name, out, err, c.want)
		}
	}
}

// The findings across overlays — an inventory-id two overlays render, an
// object two overlays render for one cluster — are the unsharded plan's
// when the overlays are planned in different shards: merge computes them
// over every shard's overlays.
func TestShardedFindingsAcrossOverlaysAreTheUnshardedOnes(t *testing.T) {
	t.Parallel()
	cm := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n+".yaml"] = configMap(n, "k: v")
		}
		return m
	}
	// overlay lays out an overlay of ConfigMaps (and its ResourceGroup,
	// when inventory is set).
	overlay := func(files map[string]string, dir, inventory string, objects ...string) {
		res := "resources:\n"
		for name, content := range cm(objects...) {
			files[dir+"/"+name] = content
			res += "- " + name + "\n"
		}
		files[dir+"/kustomization.yaml"] = res
		if inventory != "" {
			files[dir+"/resourcegroup.yaml"] = rg(inventory, "")
		}
	}
	for _, tc := range []struct {
		name string
		// base and head lay out the commits; apart are overlays the test
		// needs in different shards.
		base, head func(files map[string]string)
		apart      []string
		// want says the unsharded plan has the finding the case is for.
		want func(p jsonPlan) bool
	}{
		{
			name: "an inventory-id the change copies into an overlay of another shard",
			base: func(f map[string]string) {
				overlay(f, "a", "inv-a", "a1")
				overlay(f, "b", "", "b1")
				overlay(f, "c", "", "c1")
			},
			head:  func(f map[string]string) { f["b/resourcegroup.yaml"] = rg("inv-a", "") },
			apart: []string{"a", "b"},
			want: func(p jsonPlan) bool {
				return slices.Equal(p.overlay(t, "a").SharedInventoryWith, []string{"b"}) && slices.Equal(p.overlay(t, "b").SharedInventoryWith, []string{"a"})
			},
		},
		{
			name: "overlays sharing an inventory-id before, the change giving a third one an inventory",
			base: func(f map[string]string) {
				overlay(f, "a", "inv-shared", "a1")
				overlay(f, "b", "inv-shared", "b1")
				overlay(f, "c", "", "c1")
			},
			head:  func(f map[string]string) { f["c/resourcegroup.yaml"] = rg("inv-c", "") },
			apart: []string{"a", "b", "c"},
			want: func(p jsonPlan) bool {
				a, b := p.overlay(t, "a"), p.overlay(t, "b")
				return slices.Equal(a.SharedInventoryWith, []string{"b"}) && a.Failure == "existing" && slices.Equal(b.SharedInventoryWith, []string{"a"}) && b.Failure == "existing"
			},
		},
		{
			name: "an object two overlays of different shards start rendering, and one a third renders already",
			base: func(f map[string]string) {
				// Targets of one environment: without them the overlays
				// are variants, noted and not dangerous.
				f[".kplan.yaml"] = "targets:\n  - {name: a, overlay: a, environment: prod}\n  - {name: b, overlay: b, environment: prod}\n  - {name: c, overlay: c, environment: prod}\n"
				overlay(f, "a", "", "a1")
				overlay(f, "b", "", "b1")
				overlay(f, "c", "", "x")
			},
			head: func(f map[string]string) {
				overlay(f, "a", "", "a1", "dup", "x")
				overlay(f, "b", "", "b1", "dup")
			},
			apart: []string{"a", "b", "c"},
			want: func(p jsonPlan) bool {
				return len(p.overlay(t, "a").Dangerous) == 1 && strings.Contains(p.overlay(t, "a").Dangerous[0], "also rendered by c") && len(p.overlay(t, "b").Dangerous) == 0
			},
		},
		{
			name: "an object overlays of one environment render, with targets",
			base: func(f map[string]string) {
				f[".kplan.yaml"] = "targets:\n  - {name: a, overlay: a, environment: prod}\n  - {name: b, overlay: b, environment: prod}\n  - {name: c, overlay: c, environment: staging}\n  - {name: d, overlay: d, environment: prod}\n"
				overlay(f, "a", "", "a1")
				overlay(f, "b", "", "b1")
				overlay(f, "c", "", "x")
				overlay(f, "d", "", "x")
			},
			head:  func(f map[string]string) { overlay(f, "a", "", "a1", "x") },
			apart: []string{"a", "c", "d"},
			want: func(p jsonPlan) bool {
				d := p.overlay(t, "a").Dangerous
				return len(d) == 1 && strings.Contains(d[0], "also rendered by d,")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			files := map[string]string{}
			tc.base(files)
			write(t, dir, files)
			base := commitAll(t, dir, "base")
			files = map[string]string{}
			tc.head(files)
			write(t, dir, files)
			head := commitAll(t, dir, "head")
			parts := writeParts(t, dir, base, head, 3)
			shardOf := map[string]int{}
			for i, name := range parts {
				data, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				var part struct {
					Plan struct{ Overlays []struct{ Path string } }
				}
				if err := json.Unmarshal(data, &part); err != nil {
					t.Fatal(err)
				}
				for _, o := range part.Plan.Overlays {
					shardOf[o.Path] = i + 1
				}
			}
			for _, a := range tc.apart {
				for _, b := range tc.apart {
					if a < b && shardOf[a] == shardOf[b] {
						t.Fatalf("%s and %s are both planned by shard %d: the case needs them apart (%v)", a, b, shardOf[a], shardOf)
					}
				}
			}
			if p := diffJSON(t, "-C", dir, "--base", base, "--head", head); !tc.want(p) {
				t.Fatalf("the unsharded plan is not the case this test is for: %+v", p.Overlays)
			}
			for _, flags := range [][]string{{"-o", "json"}, {"-o", "json", "--fail-on-error=false", "--exit-code"}} {
				want, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", base, "--head", head}, flags...)...)
				wantExit := exitOf(t, err, stderr)
				got, stderr, err := kplan(t, nil, append(append([]string{"merge"}, parts...), flags...)...)
				gotExit := exitOf(t, err, stderr)
				if got, want := withoutWork(t, got), withoutWork(t, want); got != want {
					t.Errorf("merge %q printed\n%s\nwant, as kplan diff unsharded:\n%s", flags, got, want)
				}
				if gotExit != wantExit {
					t.Errorf("merge %q exits %d, kplan diff unsharded %d", flags, gotExit, wantExit)
				}
			}
		})
	}
}
