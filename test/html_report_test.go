package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/browsertest"
	"github.com/kplan-dev/kplan/test/gittest"
)

// EnvReportScreenshot, set to a file, has TestHTMLReportInBrowser save
// the page it checked there as a PNG (`make screenshots` writes
// docs/html-report.png so).
const EnvReportScreenshot = "KPLAN_REPORT_SCREENSHOT"

// A reviewer opens `kplan diff -o html` of a change to two overlays in
// a browser (headless Chromium, scripts off): apps/web bumps its image
// and replicas, rotates a Secret, adds a ConfigMap and changes a chart
// label the default noise set hides; apps/db prunes its
// PersistentVolumeClaim, a dangerous change. The page loads nothing; the
// danger and the image come first; a target opens on a click and shows
// its field changes, the Secret's value masked; the hidden label change
// is behind its count; the kind and danger filters hide what they
// should.
func TestHTMLReportInBrowser(t *testing.T) {
	t.Parallel()
	kplan := program(t, "../cmd/kplan")
	repo := gittest.NewFixture(t, "testdata/htmlreport")
	base := gittest.Git(t, repo.Dir, "rev-parse", "HEAD")
	repo.Replace("apps/web/deploy.yaml", "image: registry.example/web:1.0", "image: registry.example/web:1.1")
	repo.Replace("apps/web/deploy.yaml", "replicas: 1", "replicas: 2")
	repo.Replace("apps/web/deploy.yaml", "helm.sh/chart: web-1.0", "helm.sh/chart: web-1.1")
	repo.Replace("apps/web/secret.yaml", "b2xkLXNlY3JldC12YWx1ZQ==", "bmV3LXNlY3JldC12YWx1ZQ==")
	repo.Replace("apps/web/kustomization.yaml", "  - secret.yaml", "  - secret.yaml\n  - settings.yaml")
	repo.Replace("apps/db/kustomization.yaml", "  - pvc.yaml\n", "")
	repo.Commit("web 1.1, drop the database's volume")

	cmd := exec.Command(kplan, "diff", "-C", repo.Dir, "--base", strings.TrimSpace(base), "--head", "HEAD", "--format", "html", "--fail-on-error=false")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	page, err := cmd.Output()
	if err != nil {
		t.Fatalf("kplan diff -o html: %v\n%s", err, stderr.String())
	}
	for _, secret := range []string{"new-secret-value", "bmV3LXNlY3JldC12YWx1ZQ==", "old-secret-value", "b2xkLXNlY3JldC12YWx1ZQ=="} {
		if strings.Contains(string(page), secret) {
			t.Errorf("the page holds the Secret's value %q", secret)
		}
	}
	file := filepath.Join(t.TempDir(), "kplan-report.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}

	b := browsertest.Start(t)
	p := b.Open(t, "file://"+file, nil)
	if reqs := p.Elsewhere(); len(reqs) > 0 {
		t.Errorf("the page loaded %d things from elsewhere: %+v", len(reqs), reqs)
	}
	if got := p.Text("h1"); !strings.Contains(got, "1 to add, 2 to change, 1 to prune in 2 of 2 overlays") {
		t.Errorf("headline: %q", got)
	}
	// Dangers and images before the targets.
	body := p.Text("body")
	danger, image, targets := strings.Index(body, "prunes PersistentVolumeClaim db/data"), strings.Index(body, "registry.example/web:1.0 → registry.example/web:1.1"), strings.Index(body, "Targets (2)")
	if danger < 0 || image < 0 || targets < 0 || danger > targets || image > targets {
		t.Errorf("the danger (at %d) and the image (at %d) are not before the targets (at %d):\n%s", danger, image, targets, body)
	}
	// The target with the danger comes first; both are closed.
	if got := p.Shown("details.target > summary"); len(got) != 2 || !strings.Contains(got[0], "apps/db") || !strings.Contains(got[1], "apps/web") {
		t.Errorf("targets: %q, want apps/db (dangerous) then apps/web", got)
	}
	if got := p.Shown(".field"); len(got) != 0 {
		t.Errorf("closed targets show fields: %q", got)
	}

	// The reviewer opens apps/web.
	p.Click(`details.target[data-target="apps/web"] > summary`)
	fields := strings.Join(p.Shown(".target .obj > .field"), "\n")
	for _, want := range []string{
		`~ spec.replicas: 1 → 2`,
		`~ spec.template.spec.containers[name=web].image: "registry.example/web:1.0" → "registry.example/web:1.1"`,
		`~ data.password (value hidden)`,
	} {
		if !strings.Contains(fields, want) {
			t.Errorf("apps/web opened does not show %q:\n%s", want, fields)
		}
	}
	if strings.Contains(fields, "helm.sh/chart") {
		t.Errorf("the hidden label change shows among the changes:\n%s", fields)
	}
	objects := strings.Join(p.Shown(".target .obj-name"), "\n")
	for _, want := range []string{"+ ConfigMap settings (web)", "~ Deployment web (web)", "~ Secret db (web)"} {
		if !strings.Contains(objects, want) {
			t.Errorf("apps/web opened does not show %q:\n%s", want, objects)
		}
	}
	// The noise the default set hid is behind its count.
	noise := p.Shown(".target .noise > summary")
	if len(noise) != 1 || !strings.HasPrefix(noise[0], "1 field change hidden by the noise filters in 1 object") {
		t.Errorf("noise: %q", noise)
	}
	p.Click(`.target .noise > summary`)
	if got := strings.Join(p.Shown(".noise .field"), "\n"); !strings.Contains(got, `~ metadata.labels.helm.sh/chart: "web-1.0" → "web-1.1"`) {
		t.Errorf("the opened noise shows %q", got)
	}

	if path := os.Getenv(EnvReportScreenshot); path != "" {
		// apps/web open, its hidden noise too, no filter on.
		p.Screenshot(path)
		t.Logf("wrote %s", path)
	}

	// Filter: no Deployments.
	p.Click(`input[data-kind="Deployment"]`)
	objects = strings.Join(p.Shown(".target .obj-name"), "\n")
	if strings.Contains(objects, "Deployment web") || !strings.Contains(objects, "ConfigMap settings") {
		t.Errorf("with Deployments filtered out, the page shows:\n%s", objects)
	}

	// Filter: only the targets with a dangerous change; then one target.
	p.Click(`#f-dangerous`)
	if got := p.Shown("details.target > summary"); len(got) != 1 || !strings.Contains(got[0], "apps/db") {
		t.Errorf("only dangerous: the page shows the targets %q", got)
	}
	p.Click(`#f-dangerous`)
	p.Click(`input[data-target="apps/web"]`)
	if got := p.Shown("details.target > summary"); len(got) != 1 || !strings.Contains(got[0], "apps/web") {
		t.Errorf("target apps/web: the page shows the targets %q", got)
	}
}
