package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

func side(t *testing.T, docs ...string) inventorydiff.Side {
	t.Helper()
	var nodes []*yaml.RNode
	for _, d := range docs {
		nodes = append(nodes, yaml.MustParse(d))
	}
	inv, err := inventory.New(nodes, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return inventorydiff.Side{Inventory: inv}
}

const (
	secretPlain = "hunter2-plaintext"
	secretB64   = "aHVudGVyMi1wbGFpbnRleHQ="
)

func samplePlan(t *testing.T) *inventorydiff.Plan {
	base := map[string]inventorydiff.Side{
		"apps/a": side(t,
			"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: a}\ndata: {password: c2VjcmV0}",
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: a}\nspec: {replicas: 1}"),
		"apps/b": side(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: b}"),
	}
	head := map[string]inventorydiff.Side{
		"apps/a": side(t,
			"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: a}\ndata: {password: "+secretB64+"}\nstringData: {plain: "+secretPlain+"}",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: a}\nspec: {replicas: 3}",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: a}"),
		"apps/b": side(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: b}"),
	}
	return inventorydiff.Compare(strings.Repeat("a", 40), strings.Repeat("b", 40), base, head)
}

func TestSummaryLine(t *testing.T) {
	got := Summary(samplePlan(t))
	if want := "1 to add, 2 to change, 1 to prune in 1 of 2 overlays"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}

func TestNoSecretValueInAnyForm(t *testing.T) {
	p := samplePlan(t)
	var text bytes.Buffer
	if err := Text(&text, p); err != nil {
		t.Fatal(err)
	}
	js, err := JSON(p)
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(p, "", github.MaxCommentChars)
	unified := Options{DiffStyle: DiffUnified}
	var utext bytes.Buffer
	if err := TextWith(&utext, p, unified); err != nil {
		t.Fatal(err)
	}
	ujs, err := JSONWith(p, unified)
	if err != nil {
		t.Fatal(err)
	}
	umd := MarkdownWith(p, "", github.MaxCommentChars, unified)
	var page, upage bytes.Buffer
	if err := writeHTML(&page, p, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&upage, p, unified); err != nil {
		t.Fatal(err)
	}
	for form, out := range map[string]string{"text": text.String(), "json": string(js), "markdown": md, "html": page.String(),
		"unified text": utext.String(), "unified json": string(ujs), "unified markdown": umd, "unified html": upage.String()} {
		if strings.HasSuffix(form, "html") {
			out = html.UnescapeString(out) // the text a browser shows
		}
		for _, v := range []string{secretPlain, secretB64, "c2VjcmV0"} {
			if strings.Contains(out, v) {
				t.Errorf("%s report shows the secret value %q", form, v)
			}
		}
		want := []string{"data.password", "stringData.plain"}
		if strings.HasPrefix(form, "unified") {
			// Keys stay, values are masks; a changed value's mask differs.
			want = []string{"-  password: (hidden)\n", "+  password: (hidden, changed)\n", "+  plain: (hidden)\n"}
		}
		for _, w := range want {
			if strings.Contains(form, "json") {
				w = strings.ReplaceAll(w, "\n", `\n`)
			}
			if !strings.Contains(out, w) {
				t.Errorf("%s report does not say which Secret keys changed (%q):\n%s", form, w, out)
			}
		}
	}
}

// The comment says what the findings mean for the check: nothing, that
// it fails until a label acknowledges them, or that the label did.
func TestMarkdownDangerGate(t *testing.T) {
	for _, tc := range []struct {
		gate DangerGate
		want string
	}{
		{DangerGate{}, "⚠️ **1 dangerous change**.\n"},
		{DangerGate{Fails: true, Label: "kplan/allow-dangerous"}, "⚠️ **1 dangerous change**: this check fails until they are fixed or the label `kplan/allow-dangerous` acknowledges them.\n"},
		{DangerGate{Fails: true, Label: "kplan/allow-dangerous", Acknowledged: true}, "⚠️ **1 dangerous change**: acknowledged by the label `kplan/allow-dangerous`.\n"},
	} {
		md := MarkdownWith(samplePlan(t), "", github.MaxCommentChars, Options{DangerGate: tc.gate})
		if !strings.Contains(md, tc.want) || !strings.Contains(md, "> ⚠️ **Dangerous:** prunes Namespace a: deletes every object in the namespace (`prune-stateful`)\n") {
			t.Errorf("gate %+v: markdown lacks %q:\n%s", tc.gate, tc.want, md)
		}
	}
}

// A plan too big for one comment degrades and never exceeds the limit.
func TestOversizedReport(t *testing.T) {
	base, head := map[string]inventorydiff.Side{}, map[string]inventorydiff.Side{}
	for i := range 400 {
		path := fmt.Sprintf("clusters/region-%03d/overlay", i)
		var b, h []string
		for j := range 20 {
			b = append(b, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: ns-%d}\ndata: {v: '%s'}", j, i, strings.Repeat("x", 50)))
			h = append(h, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: ns-%d}\ndata: {v: '%s'}", j+5, i, strings.Repeat("y", 50)))
		}
		base[path], head[path] = side(t, b...), side(t, h...)
	}
	p := inventorydiff.Compare("base", "head", base, head)
	for _, limit := range []int{github.MaxCommentChars, 20000, 2000} {
		md := Markdown(p, "<!-- m -->\n", limit)
		if len(md) > limit {
			t.Errorf("limit %d: %d characters", limit, len(md))
		}
		if !strings.HasPrefix(md, "<!-- m -->\n### kplan: 2000 to add, 6000 to change, 2000 to prune in 400 of 400 overlays") {
			t.Errorf("limit %d: summary line lost:\n%.300s", limit, md)
		}
		if !strings.Contains(md, "size limit") {
			t.Errorf("limit %d: does not say details were dropped", limit)
		}
	}
	// Objects' YAML goes first, then the later overlays' field changes:
	// the first overlays' stay.
	if md := Markdown(p, "", github.MaxCommentChars); strings.Contains(md, "```yaml") || !strings.Contains(md, "the changes of all but the first") ||
		!strings.Contains(md, "! data.v:") || !strings.Contains(md, "more overlays are in the table above only (size limit)") {
		t.Errorf("the comment does not keep the first overlays' field changes:\n%.3000s", md)
	}
	if md := MarkdownWith(p, "", github.MaxCommentChars, Options{DiffStyle: DiffUnified}); utf8.RuneCountInString(md) > github.MaxCommentChars || strings.Contains(md, "Unified diff") {
		t.Errorf("unified style: %d characters; unified diffs must be the first thing dropped", len(md))
	}
}

// Failures already on base come after what the change does, folded.
func TestMarkdownFoldsExistingFailures(t *testing.T) {
	p := &inventorydiff.Plan{Base: "a", Head: "b", Overlays: []inventorydiff.Overlay{
		{Path: "aaa-broken", Status: inventorydiff.Failed, BaseErr: "render aaa-broken: missing.yaml", HeadErr: "render aaa-broken: missing.yaml"},
		{Path: "zzz-app", Status: inventorydiff.Changed, Changed: []inventorydiff.Change{{Key: "~G_v1_ConfigMap|default|a"}}},
	}}
	p.Totals = inventorydiff.Sum(p.Overlays)
	md := Markdown(p, "", github.MaxCommentChars)
	app, fold := strings.Index(md, "<code>zzz-app</code>"), strings.Index(md, "<details><summary>1 overlay already failing on base (not caused by this change)</summary>")
	broken := strings.Index(md, "<code>aaa-broken</code>")
	if app < 0 || fold < app || broken < fold || !strings.Contains(md[broken:], "</details>") {
		t.Errorf("the existing failure is not folded after the change:\n%s", md)
	}
	if !strings.Contains(md, "1 overlay failed (1 already failing on base)") {
		t.Errorf("the headline does not say the failure is not the change's:\n%s", md)
	}
	// The glance table is what the change does: the old failure is one
	// summary row, not a row of its own (16 of them buried 3 changes on a
	// kubeflow release bump).
	table := md[:strings.Index(md, "<details>")]
	if strings.Contains(table, "aaa-broken") || !strings.Contains(table, "| `zzz-app` | 0 | 1 | 0 |") ||
		!strings.Contains(table, "| *1 overlay already failing on base* | | | | not caused by this change |") {
		t.Errorf("the table lists the old failure as a row of its own:\n%s", table)
	}
}

// Text holding a code fence cannot end the block it is shown in.
func TestMarkdownFencesHoldAnyText(t *testing.T) {
	readme := "Run:\n```sh\nmake\n```\n"
	p := inventorydiff.Compare("a", "b",
		map[string]inventorydiff.Side{"o": side(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata: {README.md: \"old\\n\"}")},
		map[string]inventorydiff.Side{"o": side(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata: {README.md: "+encodeString(readme)+"}",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: n}\ndata: {README.md: "+encodeString(readme)+"}")})
	for _, opts := range []Options{{}, {DiffStyle: DiffUnified}} {
		md := MarkdownWith(p, "", github.MaxCommentChars, opts)
		// Every block opens with four backticks and closes with them;
		// the three of the text stay inside.
		opens := strings.Count(md, "````diff\n") + strings.Count(md, "````yaml\n")
		if opens == 0 || strings.Count(md, "\n````\n") != opens || !strings.Contains(md, "```sh") {
			t.Errorf("style %q: fences do not hold the text:\n%s", opts.DiffStyle, md)
		}
	}
}

func encodeString(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// Objects' YAML goes before field changes when the comment is too big: a
// new overlay's hundreds of objects do not hide a changed image elsewhere.
func TestMarkdownDropsObjectsBeforeFields(t *testing.T) {
	var objs []string
	for i := range 300 {
		objs = append(objs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: n}\ndata: {v: '%s'}", i, strings.Repeat("x", 300)))
	}
	dep := func(image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: n}\nspec: {template: {spec: {containers: [{name: web, image: '" + image + "'}]}}}"
	}
	p := inventorydiff.Compare("a", "b",
		map[string]inventorydiff.Side{"app": side(t, dep("web:1"))},
		map[string]inventorydiff.Side{"app": side(t, dep("web:2")), "new": side(t, objs...)})
	for _, opts := range []Options{{}, {DiffStyle: DiffUnified}} {
		md := MarkdownWith(p, "", github.MaxCommentChars, opts)
		if utf8.RuneCountInString(md) > github.MaxCommentChars || !strings.Contains(md, `! spec.template.spec.containers[name=web].image: "web:1" → "web:2"`) ||
			!strings.Contains(md, "not in this report (--max-bytes 65536): print it without --max-bytes for them") || strings.Contains(md, "xxxxxxxxxx") {
			t.Errorf("style %q: %d characters:\n%.2000s", opts.DiffStyle, len(md), md)
		}
	}
	if md := MarkdownWith(p, "", 10*github.MaxCommentChars, Options{}); !strings.Contains(md, "```yaml\napiVersion: v1\ndata:\n  v: xxx") {
		t.Errorf("with room, the added objects' YAML is shown:\n%.2000s", md)
	}
}

// One long embedded file rewritten (a ConfigMap holding a catalog, as in
// a kubeflow model-registry bump) keeps its first lines, and does not
// push the image change beside it out of the comment.
func TestMarkdownCutsLongTextDiffsBeforeDroppingFields(t *testing.T) {
	catalog := func(v string) string {
		var b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&b, "- name: server-%d\\n  version: %s-%d\\n", i, v, i)
		}
		return b.String()
	}
	objs := func(image, v string) []string {
		return []string{
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: n}\nspec: {template: {spec: {containers: [{name: web, image: '" + image + "'}]}}}",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: catalog, namespace: n}\ndata: {servers.yaml: \"" + catalog(v) + "\"}",
		}
	}
	p := inventorydiff.Compare("a", "b",
		map[string]inventorydiff.Side{"app": side(t, objs("web:1", "old")...)},
		map[string]inventorydiff.Side{"app": side(t, objs("web:2", "new")...)})
	for _, opts := range []Options{{}, {DiffStyle: DiffUnified}} {
		md := MarkdownWith(p, "", github.MaxCommentChars, opts)
		if utf8.RuneCountInString(md) > github.MaxCommentChars || !strings.Contains(md, `! spec.template.spec.containers[name=web].image: "web:1" → "web:2"`) ||
			!strings.Contains(md, "! data.servers.yaml: text changed") || !strings.Contains(md, "+        version: new-0\n") ||
			!strings.Contains(md, "more lines of this text diff (size limit)") || strings.Contains(md, "version: new-2999") ||
			!strings.Contains(md, "text diffs past their first 30 lines are not in this report") {
			t.Errorf("style %q: %d characters:\n%.3000s", opts.DiffStyle, len(md), md)
		}
	}
	// With room, all of it.
	if md := MarkdownWith(p, "", 100*github.MaxCommentChars, Options{}); !strings.Contains(md, "version: new-2999") || strings.Contains(md, "more lines of this text diff") {
		t.Errorf("with room, the whole text diff is shown")
	}
}

// An overlay that failed on base and renders on head is mended by the
// change: the text says so, not "failed to render ()" (seen replaying
// argoproj/argocd-example-apps).
func TestTextSaysAMendedOverlayRendersAgain(t *testing.T) {
	p := inventorydiff.Compare("b", "h",
		map[string]inventorydiff.Side{"app": {Err: errors.New("missing.yaml: no such file")}},
		map[string]inventorydiff.Side{"app": {Inventory: &inventory.ObjectSet{Objects: map[string]*inventory.Object{}}}})
	var b strings.Builder
	if err := Text(&b, p); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "app: renders again (mended by this change; it failed on base)\n  base: missing.yaml: no such file") || strings.Contains(got, "()") {
		t.Errorf("the text of a mended overlay:\n%s", got)
	}
}

// A comment fills GitHub's limit with field changes before it drops them
// all: three overlays of 40 KB of changes each kept none (the table of
// keys was tried before the first overlays' changes), and the comment
// came out at a fraction of the size allowed. It points at the job
// summary and the artifact, never at running kplan diff.
func TestCommentFillsTheLimitBeforeDroppingFieldChanges(t *testing.T) {
	cms := func(v string) []string {
		var out []string
		for i := range 30 {
			var b strings.Builder
			for l := range 20 {
				fmt.Fprintf(&b, "setting-%02d %s-%02d-%02d\\n", l, v, i, l)
			}
			out = append(out, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf-%02d, namespace: n}\ndata: {app.conf: \"%s\"}", i, b.String()))
		}
		return out
	}
	base, head := map[string]inventorydiff.Side{}, map[string]inventorydiff.Side{}
	for _, o := range []string{"a", "b", "c"} {
		base[o], head[o] = side(t, cms(o+"-old")...), side(t, cms(o+"-new")...)
	}
	p := inventorydiff.Compare("a", "b", base, head)
	md, complete := MarkdownFit(p, "", github.MaxCommentChars, Options{Complete: "in the job summary and the artifact"})
	if complete || utf8.RuneCountInString(md) > github.MaxCommentChars {
		t.Fatalf("complete %v, %d bytes", complete, len(md))
	}
	if !strings.Contains(md, "+      setting-05 a-new-29-05") {
		t.Errorf("the comment (%d of %d bytes) keeps no field change:\n%.2000s", len(md), github.MaxCommentChars, md)
	}
	if !strings.Contains(md, "the complete report is in the job summary and the artifact") || strings.Contains(md, "kplan diff") {
		t.Errorf("the comment does not point at the complete report:\n%.2000s", md)
	}
}

// MarkdownFit counts characters, as forges count a comment's limit, and
// whatever it leaves out it never cuts a character in two: a plan of
// multi-byte text fitted in each forge's limit (and in limits so small
// that only a cut of the table is left) is valid UTF-8 within the limit.
// MarkdownFitBytes bounds bytes (a job summary, --max-bytes).
func TestMarkdownFitCountsCharacters(t *testing.T) {
	var base, head []string
	for i := range 1500 {
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 配置-%03d, namespace: n}\ndata: {v: \"%s\"}"
		base = append(base, fmt.Sprintf(doc, i, strings.Repeat("旧", 60)))
		head = append(head, fmt.Sprintf(doc, i, strings.Repeat("新", 60)))
	}
	p := inventorydiff.Compare("a", "b", map[string]inventorydiff.Side{"app": side(t, base...)}, map[string]inventorydiff.Side{"app": side(t, head...)})
	whole := MarkdownWith(p, "", math.MaxInt, Options{})
	if n := utf8.RuneCountInString(whole); n <= github.MaxCommentChars || len(whole) <= n {
		t.Fatalf("the test wants a long multi-byte plan: %d characters, %d bytes", n, len(whole))
	}
	for _, limit := range []int{github.MaxCommentChars, gitlab.MaxCommentChars, 20000, 300, 41} {
		md, complete := MarkdownFit(p, "<!-- kplan:plan -->\n", limit, Options{})
		if !utf8.ValidString(md) || utf8.RuneCountInString(md) > limit {
			t.Errorf("limit %d: %d characters, valid UTF-8 %v", limit, utf8.RuneCountInString(md), utf8.ValidString(md))
		}
		if fitsWhole := utf8.RuneCountInString(whole)+20 <= limit; complete != fitsWhole {
			t.Errorf("limit %d: complete %v, want %v", limit, complete, fitsWhole)
		}
		b, _ := MarkdownFitBytes(p, "", limit, Options{})
		if !utf8.ValidString(b) || len(b) > limit {
			t.Errorf("limit %d bytes: %d bytes, valid UTF-8 %v", limit, len(b), utf8.ValidString(b))
		}
	}
}
