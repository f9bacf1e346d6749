package test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// The plan as a reviewer reads it from the Action: the comment at a
// glance, annotations on the files, outputs for gating, and a complete
// report one click away however large the plan.

// prRepo makes an upstream repository whose main holds base and whose
// branch feature holds head over it (a "" value deletes a file), and
// returns it with both commits.
func prRepo(t *testing.T, base, head map[string]string) (up, baseSHA, headSHA string) {
	t.Helper()
	up = t.TempDir()
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, up, files)
		git(t, up, "add", "-A")
		git(t, up, "commit", "-qm", msg)
		return git(t, up, "rev-parse", "HEAD")
	}
	git(t, up, "init", "-q", "-b", "main")
	baseSHA = commit(base, "base")
	git(t, up, "checkout", "-qb", "feature")
	headSHA = commit(head, "the pull request")
	git(t, up, "config", "uploadpack.allowReachableSHA1InWant", "true")
	return up, baseSHA, headSHA
}

func webApp(image, checksum string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    metadata:\n      annotations:\n        checksum/config: \"" + checksum + "\"\n" +
		"    spec:\n      containers:\n      - name: web\n        image: " + image + "\n"
}

func TestActionReportAtAGlance(t *testing.T) {
	base := map[string]string{
		"base/kustomization.yaml": "resources: [deployment.yaml]\n",
		"base/deployment.yaml":    webApp("registry.example/web:1.0", "aaa"),
		// A deprecated field: kustomize warns about it on every build.
		"overlays/prod/kustomization.yaml":    "namespace: prod\ncommonLabels: {tier: web}\nresources: [../../base, pvc.yaml]\n",
		"overlays/prod/pvc.yaml":              "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  resources: {requests: {storage: 1Gi}}\n",
		"overlays/staging/kustomization.yaml": "namespace: staging\nresources: [../../base]\n",
		"overlays/tools/kustomization.yaml":   "namespace: tools\nresources: [cm.yaml]\n",
		"overlays/tools/cm.yaml":              configMap("tools"),
	}
	head := map[string]string{
		"base/deployment.yaml":              webApp("registry.example/web:1.1", "bbb"),
		"overlays/prod/kustomization.yaml":  "namespace: prod\ncommonLabels: {tier: web}\nresources: [../../base]\n",
		"overlays/prod/pvc.yaml":            "",
		"overlays/tools/kustomization.yaml": "namespace: tools\nresources: [cm.yaml, missing.yaml]\n",
	}
	up, baseSHA, headSHA := prRepo(t, base, head)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), gh.URL(), "ghs_test")
	r.env["INPUT_FAIL-ON-ERROR"] = "false"
	// The checksum annotation the release rewrites is hidden by the
	// default noise set, and counted.
	body := planComment(t, r, gh, ws)

	t.Run("the comment at a glance", func(t *testing.T) {
		for _, want := range []string{
			"### kplan: 0 to add, 2 to change, 1 to prune in 2 of 3 overlays; 1 overlay failed\n",
			"⚠️ **1 dangerous change**. ❌ **1 overlay broken by this change**.",
			"| `overlays/prod` | 0 | 1 | 1 | ⚠️ 1 dangerous |\n| `overlays/staging` | 0 | 1 | 0 |  |\n| `overlays/tools` | | | | ❌ broken by this change |\n",
			"**Images** (1 change)\n\n- `registry.example/web:1.0` → `registry.example/web:1.1`: Deployment web (prod) in `overlays/prod`; Deployment web (staging) in `overlays/staging`\n",
			"@@ Deployment web (prod) @@\n  same change in 1 other Deployment: web (staging) in overlays/staging\n",
			"! Deployment web (staging): same change as Deployment web (prod) in overlays/prod\n",
			"- PersistentVolumeClaim data (prod)\n",
			"> ⚠️ **Dangerous:** prunes PersistentVolumeClaim prod/data",
			"- Hidden by default: 2 fields in 2 objects (`metadata.annotations.checksum/*`); shown with `default-ignore: false` (Action)",
			"> - `overlays/prod/kustomization.yaml`: 'commonLabels' is deprecated. Please use 'labels' instead.",
			"<details open><summary><b><code>overlays/prod</code></b>",
			"<sub>kplan planned 3 overlays: ",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("comment lacks %q:\n%s", want, body)
			}
		}
		for _, no := range []string{"apps_v1_Deployment|", "checksum/config", "Inventory hash"} {
			if strings.Contains(body, no) {
				t.Errorf("comment shows %q:\n%s", no, body)
			}
		}
		if n := strings.Count(body, "'commonLabels' is deprecated"); n != 1 {
			t.Errorf("the kustomize warning shows %d times, want once", n)
		}
	})

	t.Run("annotations on the files and outputs for gating", func(t *testing.T) {
		log := r.stdout.String()
		for _, want := range []string{
			"::error file=overlays/tools/kustomization.yaml,title=kplan%3A this change breaks overlays/tools::render overlays/tools: ",
			"::warning file=overlays/prod/kustomization.yaml,title=kplan%3A dangerous change in overlays/prod::prunes PersistentVolumeClaim prod/data",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
		out := r.outputs(t)
		if out["dangerous"] != "true" || out["failed"] != "true" {
			t.Errorf("outputs dangerous=%q failed=%q, want true and true", out["dangerous"], out["failed"])
		}
		full, err := os.ReadFile(out["report-file"])
		if err != nil || !strings.Contains(string(full), "same change in 1 other Deployment:") {
			t.Errorf("report-file %q: %v\n%s", out["report-file"], err, full)
		}
	})

	t.Run("a quiet plan says false", func(t *testing.T) {
		ws := checkout(t, up, "main")
		r := newRunner(t, ws, pullRequestEvent(t, "synchronize.payload.json", baseSHA, baseSHA), gh.URL(), "ghs_test")
		r.env["INPUT_COMMENT"] = "false"
		if err := r.run(t); err != nil {
			t.Fatal(err)
		}
		if out := r.outputs(t); out["dangerous"] != "false" || out["failed"] != "false" || strings.Contains(r.stdout.String(), "::error") {
			t.Errorf("outputs %v\n%s", out, r.stdout.String())
		}
	})
}

// A plan of 400 overlays, each changing its own image and a line of its
// configuration: the comment fits GitHub's limit and says where the
// complete report is; the job summary keeps every field change.
func TestActionLargePlanKeepsEveryChange(t *testing.T) {
	const n = 400
	app := func(i int, tag, line string) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-%03d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app-%03d:%s\n", i, i, tag) +
			fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-%03d\ndata:\n  app.conf: |\n    listen 8080\n    workers 4\n    %s\n    timeout 30\n    log info\n", i, line)
	}
	base, head := map[string]string{}, map[string]string{}
	for i := range n {
		dir := fmt.Sprintf("clusters/c%03d", i)
		base[dir+"/kustomization.yaml"] = fmt.Sprintf("namespace: ns-%03d\nresources: [app.yaml]\n", i)
		base[dir+"/app.yaml"] = app(i, "1.0", fmt.Sprintf("upstream old-%03d.internal", i))
		head[dir+"/app.yaml"] = app(i, "2.0", fmt.Sprintf("upstream new-%03d.internal", i))
	}
	up, baseSHA, headSHA := prRepo(t, base, head)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), gh.URL(), "ghs_test")
	r.env["GITHUB_SERVER_URL"] = "https://github.com"
	r.env["GITHUB_RUN_ID"] = "4242"
	start := time.Now()
	body := planComment(t, r, gh, ws)
	t.Logf("400 overlays planned in %s", time.Since(start).Round(time.Millisecond))

	summary, err := os.ReadFile(r.summary)
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(r.outputs(t)["report-file"])
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(r.outputs(t)["report-html"])
	if err != nil || !strings.Contains(string(page), "app-399") {
		t.Errorf("report-html %q: %v", r.outputs(t)["report-html"], err)
	}
	t.Logf("comment %d characters, job summary %d bytes, report file %d bytes, HTML report %d bytes", utf8.RuneCountInString(body), len(summary), len(full), len(page))
	if c := utf8.RuneCountInString(body); c > 65536 {
		t.Errorf("comment: %d characters, over GitHub's 65,536", c)
	}
	for _, want := range []string{
		"### kplan: 0 to add, 800 to change, 0 to prune in 400 of 400 overlays",
		"the complete report is [in the job summary](https://github.com/Codertocat/Hello-World/actions/runs/4242) and in the file `kplan-report.md`, and `kplan-report.html` to browse",
		"| `clusters/c399` | 0 | 2 | 0 |",
		// The first overlays' changes stay in the comment.
		`! spec.template.spec.containers[name=app].image: "registry.example/app-000:1.0" → "registry.example/app-000:2.0"`,
		"more overlays are in the table above only (size limit)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%.3000s", want, body)
		}
	}
	if len(summary) > 1<<20 {
		t.Errorf("job summary: %d bytes, over GitHub's 1 MiB", len(summary))
	}
	for i := range n {
		for _, want := range []string{
			fmt.Sprintf(`! spec.template.spec.containers[name=app].image: "registry.example/app-%03d:1.0" → "registry.example/app-%03d:2.0"`, i, i),
			fmt.Sprintf("-      upstream old-%03d.internal\n+      upstream new-%03d.internal\n", i, i),
		} {
			for name, doc := range map[string][]byte{"job summary": summary, "report file": full} {
				if !strings.Contains(string(doc), want) {
					t.Fatalf("%s lacks overlay %d's change %q", name, i, want)
				}
			}
		}
	}
}
