package report

import (
	"bytes"
	"errors"
	"html"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// richPlan has an overlay of every kind the reports tell apart: changed
// (an image bump, a Secret, a scale), unchanged, new, removed, failing on
// base and head alike, and broken by the change.
func richPlan(t *testing.T) *inventorydiff.Plan {
	dep := func(image, replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: a}\nspec:\n  replicas: " + replicas +
			"\n  template: {spec: {containers: [{name: web, image: '" + image + "'}]}}"
	}
	missing := errors.New("accumulating resources: missing.yaml: no such file or directory")
	base := map[string]inventorydiff.Side{
		"apps/a": side(t,
			"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: a}\ndata: {password: c2VjcmV0}",
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}",
			dep("registry.example/web:1.0", "1")),
		"apps/b":      side(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: b}"),
		"apps/gone":   side(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: gone}\ndata: {k: v}"),
		"apps/breaks": side(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y, namespace: breaks}"),
		"broken/old":  {Err: missing},
	}
	head := map[string]inventorydiff.Side{
		"apps/a": side(t,
			"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: a}\ndata: {password: "+secretB64+"}",
			dep("registry.example/web:1.1", "0"),
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: a}\ndata: {mode: \"line one\\nline two\\n\"}"),
		"apps/b":      side(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: b}"),
		"apps/new":    side(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh, namespace: new}\ndata: {k: v}"),
		"apps/breaks": {Err: errors.New("accumulating resources: patch.yaml: no such file or directory")},
		"broken/old":  {Err: missing},
	}
	return inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, head)
}

// inventoryRenamedPlan's only overlay changes no object but renames the
// inventory its objects are recorded in: a dangerous finding and nothing
// to add, change or prune.
func inventoryRenamedPlan(t *testing.T) *inventorydiff.Plan {
	inv := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: shop, labels: {cli-utils.sigs.k8s.io/inventory-id: shop}}"
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}"
	base := map[string]inventorydiff.Side{"apps/shop": side(t, inv("inventory"), svc), "apps/other": side(t, svc)}
	head := map[string]inventorydiff.Side{"apps/shop": side(t, inv("inventory-v2"), svc), "apps/other": side(t, svc)}
	return inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, head)
}

// TestGoldenReports pins whole reports, as a reader sees them, in every
// format and diff style: testdata/<plan>.<style>.<md|txt|json>.golden.
// After a deliberate change, go test ./internal/report -update rewrites
// them; review the diff as the change's user-visible part.
// goldenFormats compares p's Markdown, text, JSON and HTML reports with
// opts to testdata/<name>.{md,txt,json,html}.golden.
func goldenFormats(t *testing.T, p *inventorydiff.Plan, opts Options, name string) {
	t.Helper()
	var text bytes.Buffer
	if err := TextWith(&text, p, opts); err != nil {
		t.Fatal(err)
	}
	js, err := JSONWith(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := writeHTML(&page, p, opts); err != nil {
		t.Fatal(err)
	}
	for ext, got := range map[string]string{
		"html": page.String(),
		"md":   MarkdownWith(p, "<!-- kplan:plan -->\n", github.MaxCommentChars, opts),
		"txt":  text.String(),
		"json": string(js),
	} {
		testkit.Golden(t, filepath.Join("testdata", name+"."+ext+".golden"), got)
	}
}

func TestGoldenReports(t *testing.T) {
	for name, plan := range map[string]func(*testing.T) *inventorydiff.Plan{"sample": samplePlan, "rich": richPlan, "inventory-renamed": inventoryRenamedPlan} {
		for _, style := range []string{DiffFields, DiffUnified} {
			opts := Options{DiffStyle: style}
			goldenFormats(t, plan(t), opts, name+"."+style)
		}
	}
}

// A dangerous finding on an overlay that changes no object is named, with
// its rule and reason, in every format that counts it: the text report
// said "0 to add, 0 to change, 0 to prune" and the Markdown "1 dangerous
// change" without saying where or why.
func TestDangerOnUnchangedOverlayIsNamedInEveryFormat(t *testing.T) {
	p := inventoryRenamedPlan(t)
	if p.Totals.Dangerous != 1 || p.Totals.ChangedOverlays != 0 {
		t.Fatalf("the plan is not a danger without a change: %+v", p.Totals)
	}
	reason := p.Overlays[slices.IndexFunc(p.Overlays, func(o inventorydiff.Overlay) bool { return o.Path == "apps/shop" })].Dangerous[0].Reason
	for _, f := range Formats {
		var out bytes.Buffer
		if err := f.Write(&out, p, Options{}); err != nil {
			t.Fatal(err)
		}
		if f.Name == "html" {
			text := html.UnescapeString(out.String()) // as a browser shows it
			out.Reset()
			out.WriteString(text)
		}
		for _, want := range []string{"apps/shop", string(danger.InventoryChange), reason} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s report does not name %q:\n%s", f.Name, want, out.String())
			}
		}
		if f.Name != "json" && strings.Contains(out.String(), "apps/other") {
			t.Errorf("%s report lists the overlay with nothing to say:\n%s", f.Name, out.String())
		}
	}
}

// Targets whose cluster runs another commit than the plan's base are
// noted once each, near the top of the Markdown and the text, and not in
// the JSON (the forge's record, not the plan):
// testdata/running.{md,txt}.golden.
func TestRunningIsNotedNearTheTop(t *testing.T) {
	runs := []Running{
		{Target: "prod-eu", SHA: strings.Repeat("c", 40), Branch: "main", History: Behind, Commits: 3},
		{Target: "prod-us", SHA: strings.Repeat("d", 40), Branch: "main", History: Apart},
	}
	p := samplePlan(t)
	var text bytes.Buffer
	if err := TextWith(&text, p, Options{Running: runs}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "testdata/running.txt.golden", text.String())
	testkit.Golden(t, "testdata/running.md.golden", MarkdownWith(p, "<!-- kplan:plan -->\n", github.MaxCommentChars, Options{Running: runs}))
	plain, _ := JSONWith(p, Options{})
	noted, _ := JSONWith(p, Options{Running: runs})
	if !bytes.Equal(plain, noted) {
		t.Error("the JSON report changed with Running")
	}
	// A comment cut to the forge's limit keeps the notes, above the
	// table.
	md := MarkdownWith(p, "", 600, Options{Running: runs, Complete: "the artifact"})
	for _, r := range runs {
		if strings.Count(md, "`"+r.Target+"`") != 1 {
			t.Errorf("target %s is not noted once in the cut comment:\n%s", r.Target, md)
		}
	}
	if i, j := strings.Index(md, "prod-eu"), strings.Index(md, "| Overlay |"); i < 0 || (j >= 0 && j < i) {
		t.Errorf("the note is not above the table:\n%s", md)
	}
}

func TestRunningSentence(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for _, c := range []struct {
		r    Running
		want string
	}{
		{Running{Target: "prod", SHA: sha, Branch: "main", History: Behind, Commits: 1},
			"target `prod`: the cluster runs `aaaaaaa`, 1 commit behind `main`: the deploy needs it approved too"},
		{Running{Target: "prod", SHA: sha, Branch: "main", History: Behind, Commits: 12},
			"target `prod`: the cluster runs `aaaaaaa`, 12 commits behind `main`: the deploy needs those approved too"},
		{Running{Target: "prod", SHA: sha, Branch: "release/1", History: Apart},
			"target `prod`: the cluster runs `aaaaaaa`, which is not in `release/1`'s history: the deploy will be refused where the two differ, unless a user with write access overrides it"},
		{Running{Target: "prod", SHA: sha, Branch: "main", History: Merged},
			"target `prod`: the cluster runs `aaaaaaa`, which `main`'s first-parent history reaches only through a merge: the deploy will be refused where the two differ, unless a user with write access overrides it"},
		// A name holding a backtick stays one code span.
		{Running{Target: "a`b", SHA: sha, Branch: "main", History: Behind, Commits: 2},
			"target ``a`b``: the cluster runs `aaaaaaa`, 2 commits behind `main`: the deploy needs those approved too"},
	} {
		if got := c.r.sentence(inline); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.r, got, c.want)
		}
	}
}
