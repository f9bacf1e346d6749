package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/demo"
)

// A plan read at a glance, end to end: kplan diff on a real repository
// where one base change reaches three overlays.

func glanceRepo(t *testing.T) string {
	t.Helper()
	files := func(image, checksum, maxReplicas, password string) map[string]string {
		f := map[string]string{
			"base/kustomization.yaml": "resources: [deployment.yaml, hpa.yaml, secret.yaml]\n",
			"base/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    metadata:\n      annotations:\n        checksum/config: \"" + checksum + "\"\n" +
				"    spec:\n      containers:\n      - name: web\n        image: " + image + "\n",
			"base/hpa.yaml":    "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: " + maxReplicas + "\n",
			"base/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: " + password + "\n",
		}
		for _, o := range []string{"a", "b", "c"} {
			f["overlays/"+o+"/kustomization.yaml"] = "namespace: " + o + "\nresources: [../../base]\n"
		}
		return f
	}
	base := files("web:1", "111", "3", "pw-before-1")
	base["overlays/c/kustomization.yaml"] = "namespace: c\nresources: [../../base, pvc.yaml]\n"
	base["overlays/c/pvc.yaml"] = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  resources: {requests: {storage: 1Gi}}\n"
	head := files("web:2", "222", "5", "pw-after-2")
	head["overlays/c/pvc.yaml"] = ""
	return commitRepo(t, base, head)
}

func TestDiffAtAGlance(t *testing.T) {
	dir := glanceRepo(t)
	md, text := glanceDiff(t, dir, "markdown"), glanceDiff(t, dir, "text")
	checkGlanceMarkdown(t, md)
	checkGlanceText(t, text)
	checkNoSeedKeys(t, md, text)
	checkGlanceJSON(t, glanceDiff(t, dir, "json"))

	// In this order: the second commits .kplan.yaml, the third plans it.
	for _, tc := range []struct {
		name  string
		check func(t *testing.T, dir string)
	}{
		{"ignore rules hide noise and say what they hid", checkIgnoreRulesSayWhatTheyHid},
		{"rules from .kplan.yaml", checkIgnoreRulesFromFile},
		{"a Secret cannot be ignored", checkSecretCannotBeIgnored},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, dir) })
	}
}

// glanceDiff is kplan diff's output in format on dir's last commit,
// with extra flags.
func glanceDiff(t *testing.T, dir, format string, extra ...string) string {
	t.Helper()
	out, stderr, err := kplan(t, nil, append([]string{"diff", "-C", dir, "--base", "main~1", "--head", "main", "-o", format}, extra...)...)
	if err != nil {
		t.Fatalf("diff -o %s %q: %v\n%s", format, extra, err, stderr)
	}
	return out
}

// checkGlanceMarkdown: the Markdown report sums the plan in a table,
// lists the image change, shows the change once for the objects that
// have it alike, and says what kplan did.
func checkGlanceMarkdown(t *testing.T, md string) {
	t.Helper()
	for _, want := range []string{
		"### kplan: 0 to add, 9 to change, 1 to prune in 3 of 3 overlays",
		"| Overlay | Add | Change | Prune | |\n|---|---:|---:|---:|---|\n| `overlays/a` | 0 | 3 | 0 |  |\n| `overlays/b` | 0 | 3 | 0 |  |\n| `overlays/c` | 0 | 3 | 1 | ⚠️ 1 dangerous |\n",
		"**Images** (1 change)\n\n- `web:1` → `web:2`: Deployment web (a) in `overlays/a`; Deployment web (b) in `overlays/b`; Deployment web (c) in `overlays/c`\n",
		"@@ Deployment web (a) @@\n  same change in 2 other Deployments: web (b) in overlays/b, web (c) in overlays/c\n",
		"! Deployment web (b): same change as Deployment web (a) in overlays/a\n",
		"- PersistentVolumeClaim data (c)\n",
		"<details open><summary><b><code>overlays/c</code></b>",
		"<sub>kplan planned 3 overlays: 6 kustomize builds",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The change is shown once, however many objects have it.
	if n := strings.Count(md, `"web:1" → "web:2"`); n != 1 {
		t.Errorf("markdown shows the image change %d times, want once:\n%s", n, md)
	}
}

// checkGlanceText: the text report shows the change once too.
func checkGlanceText(t *testing.T, text string) {
	t.Helper()
	for _, want := range []string{
		"  ~ Deployment web (a)\n    same change in 2 other Deployments: web (b) in overlays/b, web (c) in overlays/c\n",
		"  ~ Deployment web (c): same change as Deployment web (a) in overlays/a\n",
		"  - PersistentVolumeClaim data (c)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// checkNoSeedKeys: neither report shows seed keys or unchanged
// inventory hashes.
func checkNoSeedKeys(t *testing.T, md, text string) {
	t.Helper()
	for form, out := range map[string]string{"markdown": md, "text": text} {
		// Seed keys are for machines; inventory hashes that did not move say nothing.
		if strings.Contains(out, "apps_v1_Deployment|") || strings.Contains(out, "inventory ") {
			t.Errorf("%s shows seed keys or unchanged inventory hashes:\n%s", form, out)
		}
	}
}

// checkGlanceJSON: the JSON plan lists the image change with the
// objects it reaches, and names objects by seed key.
func checkGlanceJSON(t *testing.T, out string) {
	t.Helper()
	var js struct {
		Images []struct {
			Old, New string
			Objects  []struct{ Overlay, Key string }
		}
		Overlays []struct{ Changed []string }
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Images) != 1 || js.Images[0].Old != "web:1" || js.Images[0].New != "web:2" || len(js.Images[0].Objects) != 3 ||
		js.Images[0].Objects[2].Key != "apps_v1_Deployment|c|web" || !slices.Contains(js.Overlays[0].Changed, "apps_v1_Deployment|a|web") {
		t.Errorf("JSON images and keys: %+v", js)
	}
}

// checkIgnoreRulesSayWhatTheyHid: ignore rules hide noise and say what
// they hid.
func checkIgnoreRulesSayWhatTheyHid(t *testing.T, dir string) {
	// The default noise set off: these rules would count nothing
	// it hides first.
	rules := []string{"--no-default-ignore", "--ignore-field", "metadata.annotations.checksum/*,metadata.labels.helm.sh/chart",
		"--ignore-kind", "HorizontalPodAutoscaler", "--ignore-kind", "PersistentVolumeClaim", "--ignore-field", "stringData"}
	md, text := glanceDiff(t, dir, "markdown", rules...), glanceDiff(t, dir, "text", rules...)
	for _, want := range []string{
		"### kplan: 0 to add, 6 to change, 1 to prune in 3 of 3 overlays",
		"- `field metadata.annotations.checksum/*` (command line): hid 3 field changes\n",
		"- `field metadata.labels.helm.sh/chart` (command line): hid 0 field changes\n",
		"- `kind HorizontalPodAutoscaler` (command line): hid 3 field changes (3 objects left with no change)\n",
		"- `kind PersistentVolumeClaim` (command line): hid 0 field changes; 1 matching change still shown",
		"- `field stringData` (command line): hid 0 field changes; 3 matching changes still shown",
		"- PersistentVolumeClaim data (c)\n",
		"@@ Secret creds (a) @@\n  same change in 2 other Secrets",
		"! stringData.password (value hidden)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "checksum/config:") || strings.Contains(md, "HorizontalPodAutoscaler web") || strings.Contains(md, "maxReplicas") {
		t.Errorf("an ignored change is shown:\n%s", md)
	}
	if !strings.Contains(text, "Ignored kind HorizontalPodAutoscaler (command line): hid 3 field changes (3 objects left with no change).\n") {
		t.Errorf("text does not say what was ignored:\n%s", text)
	}
	var js struct {
		Ignored []struct {
			Rule                  string
			Fields, Objects, Kept int
		}
		Totals struct{ Changed int }
	}
	if err := json.Unmarshal([]byte(glanceDiff(t, dir, "json", rules...)), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Ignored) != 5 || js.Ignored[3].Rule != "kind HorizontalPodAutoscaler" || js.Ignored[3].Objects != 3 || js.Totals.Changed != 6 {
		t.Errorf("JSON ignored: %+v", js)
	}
}

// checkIgnoreRulesFromFile: rules from .kplan.yaml, committed on top,
// are applied and reported.
func checkIgnoreRulesFromFile(t *testing.T, dir string) {
	write(t, dir, map[string]string{".kplan.yaml": "ignore:\n  kinds: [HorizontalPodAutoscaler]\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "ignore HPAs")
	out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~2", "--head", "main", "-o", "markdown")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "- `kind HorizontalPodAutoscaler` (.kplan.yaml): hid 3 field changes (3 objects left with no change)") ||
		!strings.Contains(out, "6 to change, 1 to prune in 3 of 3 overlays") {
		t.Errorf("the file's rules are not applied and reported:\n%s", out)
	}
}

// checkSecretCannotBeIgnored: --ignore-kind Secret is refused.
func checkSecretCannotBeIgnored(t *testing.T, dir string) {
	_, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--ignore-kind", "Secret")
	if err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Errorf("err = %v, want --ignore-kind Secret refused", err)
	}
}

// kustomize's deprecation warnings are notes on the overlays whose files
// have them, naming the file, once; the kplan binary's stderr holds no
// raw "# Warning:" line (krusty prints one per overlay and side).
func TestKustomizeWarningsAreNotesNotStderr(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kplan")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build kplan: %v\n%s", err, out)
	}
	repo, err := demo.NewRepo(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, stderr, err := run("diff", "-C", repo.Dir, "--base", repo.Base, "--head", repo.Head, "--full")
	if err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "Warning") || strings.Contains(stderr, "deprecated") {
		t.Errorf("kustomize's warnings reached stderr:\n%s", stderr)
	}
	const note = "note: kustomize warns: components/external_db/kustomization.yaml: 'patchesStrategicMerge' is deprecated. Please use 'patches' instead."
	// community and dev use the component on head; enterprise is gone.
	if n := strings.Count(out, note); n != 2 {
		t.Errorf("the note shows %d times, want once for each of the 2 overlays:\n%s", n, out)
	}
	js, _, err := run("diff", "-C", repo.Dir, "--base", repo.Base, "--head", repo.Head, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Overlays []struct {
			Path  string
			Notes []string
		}
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Overlays {
		if o.Path == "overlays/dev" && (len(o.Notes) == 0 || len(slices.Compact(slices.Clone(o.Notes))) != len(o.Notes)) {
			t.Errorf("dev's notes: %q, want each warning once", o.Notes)
		}
	}
	// kplan's own messages still reach stderr.
	if _, stderr, err := run("diff", "--base"); err == nil || !strings.Contains(stderr, "--base") {
		t.Errorf("a usage error: %v, stderr %q", err, stderr)
	}
	// render is kustomize build: its warnings stay, as kustomize prints them.
	if _, stderr, err := run("render", filepath.Join(repo.Dir, "overlays/dev")); err != nil || !strings.Contains(stderr, "# Warning: 'patchesStrategicMerge' is deprecated") {
		t.Errorf("render: %v, stderr %q", err, stderr)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []time.Duration // time of each call, from the start
		want  string
	}{
		{"a short plan prints nothing", []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, ""},
		{"a long plan shows N of M and clears the line", []time.Duration{time.Second, 1050 * time.Millisecond, 2 * time.Second, 3 * time.Second},
			"\r\033[Kkplan: rendered 1 of 4 overlay builds\r\033[Kkplan: rendered 3 of 4 overlay builds\r\033[K"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(0, 0)
			now := start
			var b bytes.Buffer
			f := progressLine(&b, func() time.Time { return now })
			for i, d := range tc.steps {
				now = start.Add(d)
				f(i+1, len(tc.steps))
			}
			if b.String() != tc.want {
				t.Errorf("wrote %q, want %q", b.String(), tc.want)
			}
		})
	}
	// Not a terminal: no progress at all.
	if progress(&bytes.Buffer{}) != nil {
		t.Error("progress on a buffer")
	}
}
