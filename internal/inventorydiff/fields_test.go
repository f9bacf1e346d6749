package inventorydiff

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// prometheusYML is a 30-line file whose line 25 is well past byte 200.
func prometheusYML(target string) string {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 30s\nscrape_configs:\n")
	for i := 4; i <= 30; i++ {
		if i == 25 {
			fmt.Fprintf(&b, "  - targets: ['%s']\n", target)
			continue
		}
		fmt.Fprintf(&b, "  - job_name: job-%02d\n", i)
	}
	return b.String()
}

func decode(t *testing.T, doc string) map[string]any {
	t.Helper()
	m, err := yaml.MustParse(doc).Map()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pod(spec string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + spec
}

func TestFieldDiffs(t *testing.T) {
	long := func(c rune, n int) string { return strings.Repeat(string(c), n) }
	cm := func(data string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: " + data }
	quoted := func(s string) string { return encode(s) }
	cases := []struct {
		name       string
		base, head string
		hide       bool
		want       []string // FieldChange.String() of each change, in order
	}{
		{name: "a file in a ConfigMap changed past byte 200 shows the line with context",
			base: cm(`{prometheus.yml: ` + quoted(prometheusYML("old:9090")) + `}`),
			head: cm(`{prometheus.yml: ` + quoted(prometheusYML("new:9090")) + `}`),
			want: []string{"~ data.prometheus.yml: text changed\n" +
				"    @@ -22,7 +22,7 @@\n" +
				"       - job_name: job-22\n       - job_name: job-23\n       - job_name: job-24\n" +
				"    -  - targets: ['old:9090']\n    +  - targets: ['new:9090']\n" +
				"       - job_name: job-26\n       - job_name: job-27\n       - job_name: job-28"}},
		{name: "a file added to a ConfigMap shows every line",
			base: cm(`{a: b}`), head: cm(`{a: b, f.txt: "one\ntwo\n"}`),
			want: []string{"+ data.f.txt: text of 2 lines\n    @@ -0,0 +1,2 @@\n    +one\n    +two"}},
		{name: "an arg inserted first is one insertion",
			base: pod(`{containers: [{name: c, args: [--a, --b, --c, --d, --e, --f]}]}`),
			head: pod(`{containers: [{name: c, args: [--new, --a, --b, --c, --d, --e, --f]}]}`),
			want: []string{`+ spec.containers[name=c].args[0]: "--new"`}},
		{name: "an arg deleted and one changed",
			base: pod(`{containers: [{name: c, command: [run, --x, --y=1, --z]}]}`),
			head: pod(`{containers: [{name: c, command: [run, --y=2, --z]}]}`),
			want: []string{`~ spec.containers[name=c].command[1]: "--x" → "--y=2"`, `- spec.containers[name=c].command[2]: "--y=1"`}},
		{name: "reordered initContainers are a reorder",
			base: pod(`{initContainers: [{name: migrate, image: m}, {name: seed, image: s}], containers: [{name: c}]}`),
			head: pod(`{initContainers: [{name: seed, image: s}, {name: migrate, image: m}], containers: [{name: c}]}`),
			want: []string{"↕ spec.initContainers: order migrate, seed → seed, migrate"}},
		{name: "reordered env is a reorder ($(VAR) expansion), with a change",
			base: pod(`{containers: [{name: c, env: [{name: A, value: "1"}, {name: B, value: "$(A)"}]}]}`),
			head: pod(`{containers: [{name: c, env: [{name: B, value: "$(A)x"}, {name: A, value: "1"}]}]}`),
			want: []string{"↕ spec.containers[name=c].env: order A, B → B, A", `~ spec.containers[name=c].env[name=B].value: "$(A)" → "$(A)x"`}},
		{name: "reordered volumes are no change",
			base: pod(`{containers: [{name: c}], volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]}`),
			head: pod(`{containers: [{name: c}], volumes: [{name: b, emptyDir: {}}, {name: a, emptyDir: {}}]}`)},
		{name: "ports without names keyed by containerPort",
			base: pod(`{containers: [{name: c, ports: [{containerPort: 80}, {containerPort: 443}]}]}`),
			head: pod(`{containers: [{name: c, ports: [{containerPort: 8080}, {containerPort: 80, protocol: TCP}, {containerPort: 443}]}]}`),
			want: []string{`+ spec.containers[name=c].ports[containerPort=8080].containerPort: 8080`, `+ spec.containers[name=c].ports[containerPort=80].protocol: "TCP"`}},
		{name: "volume mounts keyed by mountPath",
			base: pod(`{containers: [{name: c, volumeMounts: [{name: v, mountPath: /a}, {name: v, mountPath: /b}]}]}`),
			head: pod(`{containers: [{name: c, volumeMounts: [{name: v, mountPath: /b, readOnly: true}, {name: v, mountPath: /a}]}]}`),
			want: []string{`+ spec.containers[name=c].volumeMounts[mountPath=/b].readOnly: true`}},
		{name: "a list item without a key changed in place",
			base: pod(`{containers: [{name: c}], tolerations: [{key: a, effect: NoSchedule}, {operator: Exists}]}`),
			head: pod(`{containers: [{name: c}], tolerations: [{key: a, effect: NoExecute}, {operator: Exists}]}`),
			want: []string{`~ spec.tolerations[0].effect: "NoSchedule" → "NoExecute"`}},
		{name: "a value that changes shape",
			base: cm(`{a: x}`), head: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: x}\nbinaryData: {b: eA==}",
			want: []string{`+ binaryData.b: "eA=="`}},
		{name: "a long single-line value shows where it differs",
			base: cm(`{k: "` + long('a', 300) + `OLD` + long('z', 300) + `"}`),
			head: cm(`{k: "` + long('a', 300) + `NEW` + long('z', 300) + `"}`),
			want: []string{`~ data.k: "…` + long('a', 40) + `OLD` + long('z', 40) + `…" → "…` + long('a', 40) + `NEW` + long('z', 40) + `…"`}},
		{name: "<, > and & are not escaped",
			base: cm(`{k: "a<b"}`), head: cm(`{k: "a>b&c"}`),
			want: []string{`~ data.k: "a<b" → "a>b&c"`}},
		{name: "a Secret's multi-line value names the key only", hide: true,
			base: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {config.yaml: \"user: admin\\npassword: hunter2\\n\"}",
			head: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {config.yaml: \"user: admin\\npassword: hunter3\\n\"}",
			want: []string{"~ stringData.config.yaml (value hidden)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hide func(string) bool
			if tc.hide {
				hide = secretPath
			}
			var got []string
			for _, f := range diffFields(decode(t, tc.base), decode(t, tc.head), hide, nil) {
				got = append(got, f.String())
				if f.Hidden && (f.Old != "" || f.New != "" || f.Diff != "") {
					t.Errorf("%s shows a hidden value: %+v", f.Path, f)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Long values are cut on character boundaries: never half a UTF-8
// sequence, and never more characters than the limits.
func TestCutsOnRuneBoundaries(t *testing.T) {
	for _, s := range []string{"é", "日本", "🙂"} {
		old := strings.Repeat(s, 250) + "x" + strings.Repeat(s, 250)
		new := strings.Repeat(s, 250) + "y" + strings.Repeat(s, 250)
		o, n := previewPair(old, new)
		p := preview(old)
		lo := textDiff(strings.Repeat(s, 500)+"x\nend\n", strings.Repeat(s, 500)+"y\nend\n")
		added := textDiff("", strings.Repeat(s, 1000)+"\nend\n")
		for what, v := range map[string]string{"old window": o, "new window": n, "preview": p, "changed line": lo, "added line": added} {
			if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
				t.Errorf("%s of %q: invalid UTF-8: %q", what, s, v)
			}
		}
		if !strings.Contains(o, "x") || !strings.Contains(n, "y") || utf8.RuneCountInString(o) > maxWindow+4 {
			t.Errorf("%q: window %s → %s does not show the difference in at most %d characters", s, o, n, maxWindow)
		}
		if want := fmt.Sprintf("(%d characters)", utf8.RuneCountInString(old)); !strings.HasSuffix(p, want) || utf8.RuneCountInString(p) > maxValue+len(want)+4 {
			t.Errorf("%q: preview %s", s, p)
		}
		if !strings.Contains(lo, "x\n") || !strings.Contains(lo, "y\n") || !strings.Contains(lo, "…") {
			t.Errorf("%q: long changed line does not show where it changed:\n%s", s, lo)
		}
		if !strings.Contains(added, fmt.Sprintf("… (%d characters)", 1000*utf8.RuneCountInString(s))) {
			t.Errorf("%q: long added line is not cut:\n%s", s, added)
		}
	}
}

func TestUnified(t *testing.T) {
	got := Unified("base/k", "head/k", "a: 1\nb: 2\n", "a: 1\nb: 3\n")
	want := "--- base/k\n+++ head/k\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"
	if got != want {
		t.Errorf("Unified =\n%s\nwant\n%s", got, want)
	}
	if got := Unified("a", "b", "x\n", "x\n"); got != "" {
		t.Errorf("Unified of equal texts = %q", got)
	}
	if got := textDiff("a\nb", "a\nb\n"); !strings.Contains(got, "\\ No newline at end of file") {
		t.Errorf("a change of the final newline alone does not say so:\n%s", got)
	}
}
