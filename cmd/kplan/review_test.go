package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// What a reviewer must see, end to end: kplan diff on a real repository,
// read as text, Markdown and JSON, in both diff styles.

// promYML is a 30-line prometheus.yml whose line 25, past byte 200,
// names target.
func promYML(target string) string {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 30s\nscrape_configs:\n")
	for i := 4; i <= 30; i++ {
		if i == 25 {
			fmt.Fprintf(&b, "  - targets: ['%s']\n", target)
		} else {
			fmt.Fprintf(&b, "  - job_name: job-%02d\n", i)
		}
	}
	return b.String()
}

// block indents text as a YAML literal block under a key.
func block(text, indent string) string {
	return "|\n" + indent + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n"+indent) + "\n"
}

const (
	secretOld = "user: reviewer-bot\npassword: s3cret-before-42\nendpoint: db.internal\n"
	secretNew = "user: reviewer-bot\npassword: s3cret-after-43\nendpoint: db.internal\n"
)

func reviewRepo(t *testing.T) string {
	t.Helper()
	deployment := func(initOrder, args string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers: ` + initOrder + `
      containers:
      - name: web
        image: web:1
        args: ` + args + `
`
	}
	// Non-ASCII text long enough to be cut, changed in its middle.
	greeting := func(word string) string {
		return strings.Repeat("Grüße aus Köln, 日本語 ", 15) + word + strings.Repeat(" café ☕", 40)
	}
	files := func(target, secret, initOrder, args, word string) map[string]string {
		return map[string]string{
			"app/kustomization.yaml": "resources: [config.yaml, deployment.yaml, secret.yaml, service.yaml]\n",
			"app/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: prom\ndata:\n  prometheus.yml: " + block(promYML(target), "    ") +
				"  greeting: " + encodeJSON(greeting(word)) + "\n",
			"app/deployment.yaml": deployment(initOrder, args),
			"app/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  config.yaml: " + block(secret, "    ") +
				"data:\n  token: " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n",
			"app/service.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: old-svc\nspec:\n  ports: [{port: 80}]\n",
		}
	}
	base := files("old:9090", secretOld, "[{name: migrate, image: m:1}, {name: seed, image: s:1}]", "[--a, --b, --c, --d, --e, --f]", "gestern")
	head := files("new:9090", secretNew, "[{name: seed, image: s:1}, {name: migrate, image: m:1}]", "[--verbose, --a, --b, --c, --d, --e, --f]", "heute")
	head["app/kustomization.yaml"] = "resources: [config.yaml, deployment.yaml, secret.yaml, api.yaml]\n"
	head["app/service.yaml"] = ""
	head["app/api.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  template:\n    spec:\n      containers:\n      - name: api\n        image: registry.example/api:1.2.3\n"
	return commitRepo(t, base, head)
}

type fieldChange struct {
	Path, Op, Diff string
	Old, New       rawJSON
	Hidden         bool
}

func encodeJSON(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// The keys of reviewRepo's objects, as the JSON plan names them.
const (
	promKey   = "~G_v1_ConfigMap|default|prom"
	webKey    = "apps_v1_Deployment|default|web"
	apiKey    = "apps_v1_Deployment|default|api"
	credsKey  = "~G_v1_Secret|default|creds"
	oldSvcKey = "~G_v1_Service|default|old-svc"
)

// reviewOverlay is an overlay of kplan diff's JSON plan, as the review
// test reads it.
type reviewOverlay struct {
	Path      string
	Fields    map[string][]fieldChange
	AddedYaml map[string]string
	Unified   map[string]string
}

// reviewed is what kplan diff showed of reviewRepo: its outputs by
// "style format" (fields text, unified json), and the one overlay of
// the fields style's JSON plan.
type reviewed struct {
	outputs map[string]string
	o       reviewOverlay
}

func TestDiffShowsWhatAReviewerMustSee(t *testing.T) {
	r := reviewDiffs(t, reviewRepo(t))
	for _, tc := range []struct {
		name  string
		check func(*testing.T, reviewed)
	}{
		{"a ConfigMap file changed past byte 200 shows the changed line with context", checkFileChangeInContext},
		{"an arg inserted first is one insertion", checkArgInsertedFirst},
		{"a reordered initContainers list is a reorder", checkInitContainersReordered},
		{"an added Deployment's image appears in its YAML", checkAddedDeploymentImage},
		{"a pruned object is named with kind and namespace", checkPrunedObjectNamed},
		{"a multi-line Secret value changed shows no line of it anywhere", checkSecretValueHidden},
		{"non-ASCII text is cut on character boundaries", checkNonASCIICut},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, r) })
	}
}

// reviewDiffs runs kplan diff on dir's last commit in each diff style
// and format, and reads the JSON plan of the fields style, which must
// hold one overlay.
func reviewDiffs(t *testing.T, dir string) reviewed {
	t.Helper()
	outputs := map[string]string{}
	for _, style := range []string{"fields", "unified"} {
		for _, format := range []string{"text", "markdown", "json"} {
			out, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main", "-o", format, "--diff-style", style)
			if err != nil {
				t.Fatalf("diff -o %s --diff-style %s: %v\n%s", format, style, err, stderr)
			}
			outputs[style+" "+format] = out
		}
	}
	var plan struct{ Overlays []reviewOverlay }
	if err := json.Unmarshal([]byte(outputs["fields json"]), &plan); err != nil || len(plan.Overlays) != 1 {
		t.Fatalf("json plan: %v\n%s", err, outputs["fields json"])
	}
	return reviewed{outputs: outputs, o: plan.Overlays[0]}
}

// field is the JSON plan's change of field path of the object key; a
// missing one is an error.
func (r reviewed) field(t *testing.T, key, path string) (f fieldChange) {
	t.Helper()
	for _, f := range r.o.Fields[key] {
		if f.Path == path {
			return f
		}
	}
	t.Errorf("no field change %s of %s in %+v", path, key, r.o.Fields[key])
	return f
}

// checkFileChangeInContext: a ConfigMap file changed past byte 200
// shows the changed line with context.
func checkFileChangeInContext(t *testing.T, r reviewed) {
	d := r.field(t, promKey, "data.prometheus.yml").Diff
	want := "@@ -22,7 +22,7 @@\n   - job_name: job-22\n   - job_name: job-23\n   - job_name: job-24\n" +
		"-  - targets: ['old:9090']\n+  - targets: ['new:9090']\n   - job_name: job-26\n   - job_name: job-27\n   - job_name: job-28\n"
	if d != want {
		t.Errorf("json diff =\n%s\nwant\n%s", d, want)
	}
	for form, want := range map[string][]string{
		"fields text":     {"~ data.prometheus.yml: text changed\n        @@ -22,7 +22,7 @@\n", "        -  - targets: ['old:9090']\n        +  - targets: ['new:9090']\n", "           - job_name: job-28\n"},
		"fields markdown": {"! data.prometheus.yml: text changed\n       @@ -22,7 +22,7 @@\n", "-        - targets: ['old:9090']\n+        - targets: ['new:9090']\n", "         - job_name: job-24\n"},
		"unified text":    {"--- base/" + promKey + "\n+++ head/" + promKey + "\n", "-      - targets: ['old:9090']\n+      - targets: ['new:9090']\n"},
	} {
		for _, w := range want {
			if !strings.Contains(r.outputs[form], w) {
				t.Errorf("%s lacks %q:\n%s", form, w, r.outputs[form])
			}
		}
	}
}

// checkArgInsertedFirst: an arg inserted first is one insertion.
func checkArgInsertedFirst(t *testing.T, r reviewed) {
	var args []string
	for _, f := range r.o.Fields[webKey] {
		if strings.Contains(f.Path, ".args") {
			args = append(args, f.Op+" "+f.Path+" "+string(f.New))
		}
	}
	if want := []string{`+ spec.template.spec.containers[name=web].args[0] "--verbose"`}; !slices.Equal(args, want) {
		t.Errorf("args changes = %q, want %q", args, want)
	}
	for _, form := range []string{"fields text", "fields markdown"} {
		if n := strings.Count(r.outputs[form], ".args["); n != 1 {
			t.Errorf("%s shows %d arg changes, want 1:\n%s", form, n, r.outputs[form])
		}
	}
	if !strings.Contains(r.outputs["unified text"], "+        - --verbose\n") {
		t.Errorf("unified text lacks the inserted arg:\n%s", r.outputs["unified text"])
	}
}

// checkInitContainersReordered: a reordered initContainers list is a
// reorder.
func checkInitContainersReordered(t *testing.T, r reviewed) {
	f := r.field(t, webKey, "spec.template.spec.initContainers")
	if f.Op != "order" || f.Old != `["migrate","seed"]` || f.New != `["seed","migrate"]` {
		t.Errorf("initContainers change = %+v, want order migrate, seed → seed, migrate", f)
	}
	for _, form := range []string{"fields text", "fields markdown"} {
		if !strings.Contains(r.outputs[form], "↕ spec.template.spec.initContainers: order migrate, seed → seed, migrate") {
			t.Errorf("%s does not report the reorder:\n%s", form, r.outputs[form])
		}
	}
}

// checkAddedDeploymentImage: an added Deployment's image appears in its
// YAML.
func checkAddedDeploymentImage(t *testing.T, r reviewed) {
	if y := r.o.AddedYaml[apiKey]; !strings.Contains(y, "image: registry.example/api:1.2.3\n") || !strings.Contains(y, "kind: Deployment\n") {
		t.Errorf("json addedYaml[%s] = %q", apiKey, y)
	}
	for _, form := range []string{"fields text", "fields markdown", "unified text", "unified markdown", "unified json"} {
		if !strings.Contains(r.outputs[form], "image: registry.example/api:1.2.3") {
			t.Errorf("%s does not show the added Deployment's image:\n%s", form, r.outputs[form])
		}
	}
	if !strings.Contains(r.outputs["fields markdown"], "<details><summary>+ Deployment api (default): YAML</summary>\n\n```yaml\n") {
		t.Errorf("markdown does not fold the added Deployment's YAML:\n%s", r.outputs["fields markdown"])
	}
}

// checkPrunedObjectNamed: a pruned object is named with kind and
// namespace.
func checkPrunedObjectNamed(t *testing.T, r reviewed) {
	for form, want := range map[string]string{
		"fields text":     "  - Service old-svc (default)\n",
		"fields markdown": "```diff\n+ Deployment api (default)\n- Service old-svc (default)\n",
		"unified text":    "--- base/" + oldSvcKey + "\n+++ /dev/null\n",
	} {
		if !strings.Contains(r.outputs[form], want) {
			t.Errorf("%s lacks %q:\n%s", form, want, r.outputs[form])
		}
	}
}

// checkSecretValueHidden: a multi-line Secret value changed shows no
// line of it anywhere, and every output names the changed key.
func checkSecretValueHidden(t *testing.T, r reviewed) {
	f := r.field(t, credsKey, "stringData.config.yaml")
	if f.Op != "~" || !f.Hidden || string(f.Old+f.New)+f.Diff != "" {
		t.Errorf("secret field = %+v", f)
	}
	for form, out := range r.outputs {
		for _, v := range []string{"reviewer-bot", "s3cret-before-42", "s3cret-after-43", "db.internal",
			base64.StdEncoding.EncodeToString([]byte(secretOld)), base64.StdEncoding.EncodeToString([]byte(secretNew))} {
			if strings.Contains(out, v) {
				t.Errorf("%s shows the Secret value %q", form, v)
			}
		}
		want := "stringData.config.yaml (value hidden)"
		switch {
		case form == "fields json":
			want = `"path": "stringData.config.yaml"`
		case strings.HasPrefix(form, "unified"):
			want = "config.yaml: (hidden, changed)"
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s does not name the changed Secret key (%q):\n%s", form, want, out)
		}
	}
}

// checkNonASCIICut: non-ASCII text is cut on character boundaries.
func checkNonASCIICut(t *testing.T, r reviewed) {
	f := r.field(t, promKey, "data.greeting")
	if !strings.Contains(string(f.Old), "gestern") || !strings.Contains(string(f.New), "heute") ||
		!strings.HasPrefix(string(f.Old), `"…`) || !strings.HasSuffix(string(f.New), `…"`) || utf8.RuneCountInString(string(f.Old)) > 250 {
		t.Errorf("greeting change %s → %s does not show the window where it differs", f.Old, f.New)
	}
	for form, out := range r.outputs {
		if !utf8.ValidString(out) {
			t.Errorf("%s is not valid UTF-8", form)
		}
	}
	for _, s := range []string{string(f.Old), string(f.New)} {
		if strings.ContainsRune(s, utf8.RuneError) {
			t.Errorf("%q holds a broken character", s)
		}
	}
}

func TestDiffStyleRefused(t *testing.T) {
	_, _, err := kplan(t, nil, "diff", "-C", t.TempDir(), "--base", "main", "--diff-style", "side-by-side")
	if err == nil || !strings.Contains(err.Error(), "--diff-style") || !strings.Contains(err.Error(), "unified") {
		t.Errorf("err = %v, want the flag and its values named", err)
	}
}
