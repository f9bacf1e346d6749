package flux

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	sigsyaml "sigs.k8s.io/yaml"
)

// substituted is the printed result of substituting S, with value,
// into field (one line under spec:) of an object, S coming from a
// Secret (or a ConfigMap), and the error text.
func substituted(t testing.TB, field, value string, secret bool) (string, bool) {
	t.Helper()
	kind := "ConfigMap"
	if secret {
		kind = "Secret"
	}
	// A Secret's value in data, base64: any bytes.
	data := map[string]string{"S": value}
	if secret {
		data["S"] = base64.StdEncoding.EncodeToString([]byte(value))
	}
	source, err := sigsyaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": "vars", "namespace": "apps"}, "data": data,
	})
	if err != nil {
		t.Fatal(err)
	}
	srcNodes, err := kio.FromBytes(source)
	if err != nil {
		return "", false // a value YAML cannot hold
	}
	pool := varPool{}
	pool.add("flux-system/flux-system", srcNodes)
	objs, err := kio.FromBytes([]byte("apiVersion: example.test/v1\nkind: Thing\nmetadata:\n  name: thing\nspec:\n  " + field + "\n"))
	if err != nil || len(objs) != 1 {
		return "", false // not YAML: no build has it
	}
	var ks map[string]any
	if err := sigsyaml.Unmarshal([]byte(`{apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, metadata: {name: web, namespace: apps}, spec: {postBuild: {substituteFrom: [{kind: `+kind+`, name: vars}]}}}`), &ks); err != nil {
		t.Fatal(err)
	}
	out, err := postBuild(context.Background(), &Kustomization{Namespace: "apps", Name: "web", Object: ks}, objs, pool)
	if err != nil {
		return "error\n" + err.Error(), true
	}
	var b strings.Builder
	for _, o := range out.objects {
		b.WriteString(o.MustString())
	}
	return b.String(), true
}

// secretForms are what Flux's substitution and YAML re-parse can make of
// a Secret's value: joined lines, cut at " #", trimmed, unquoted.
func secretForms(v string) []string {
	joined := strings.ReplaceAll(v, "\n", "")
	forms := []string{v, joined, strings.TrimSpace(joined)}
	if cut, _, ok := strings.Cut(joined, " #"); ok {
		forms = append(forms, cut, strings.TrimSpace(cut))
	}
	forms = append(forms, strings.NewReplacer(`"`, "", `'`, "", `\`, "").Replace(joined))
	if u, err := sigsyaml.YAMLToJSON([]byte("v: \"" + joined + "\"")); err == nil {
		var m map[string]any
		if json.Unmarshal(u, &m) == nil {
			if s, ok := m["v"].(string); ok {
				forms = append(forms, s)
			}
		}
	}
	return forms
}

// leaked returns a substring of at least 4 characters of a form of
// value that out holds and allowed (text no Secret made) does not.
func leaked(out, allowed, value string) string {
	for _, f := range secretForms(value) {
		r := []rune(f)
		for i := 0; i+4 <= len(r); i++ {
			g := string(r[i : i+4])
			if strings.Contains(out, g) && !strings.Contains(allowed, g) {
				return g
			}
		}
	}
	return ""
}

// checkMasked fails if what substituting value from a Secret into field
// prints holds a Secret-made substring: one that neither the field as
// written, nor the substitution of a harmless ConfigMap value, nor the
// masks and kplan's errors hold.
func checkMasked(t testing.TB, field, value string) string {
	t.Helper()
	out, ok := substituted(t, field, value, true)
	if !ok {
		return ""
	}
	control, _ := substituted(t, field, "0", false)
	allowed := strings.Join([]string{field, control, "(value from Secret apps/vars key S, hidden)", maskDerived, errHidden, errCannotTell}, "\n")
	if g := leaked(out, allowed, value); g != "" {
		t.Errorf("field %q with Secret value %q prints %q of it:\n%s", field, value, g, out)
	}
	return out
}

// The forms Flux's re-parse makes of a Secret's value (cut at " #",
// trimmed, unquoted, unescaped, split, turned into keys or numbers) are
// masked where they land, and the field shows the variable instead.
func TestSecretMaskingForms(t *testing.T) {
	tests := []struct{ field, value, want string }{
		{"v: ${S}", "abc #tail", "v: (value from Secret apps/vars key S, hidden)"},
		{"v: ${S}", " leading", "v: (value from Secret apps/vars key S, hidden)"},
		{`v: "${S}"`, `a\"b\\c`, "v: (value from Secret apps/vars key S, hidden)"},
		{"v: ${S}", "line one\nline two", "v: (value from Secret apps/vars key S, hidden)"},
		{"v: Bearer ${S}", "tok #en", "v: Bearer (value from Secret apps/vars key S, hidden)"},
		{"v: ${S}", "[left, right]", "v: (value from Secret apps/vars key S, hidden)"},
		{"v: ${S}", "{user: pass}", "v: (value from Secret apps/vars key S, hidden)"},
		{"${S}: key", "admin-user", "(value from Secret apps/vars key S, hidden): key"},
		{`v: "${S}"`, `\x41\x42\x43\x44`, "v: (value from Secret apps/vars key S, hidden)"},
		{"v: ${S:0:6}", "prefix-of-it", "v: " + maskDerived},
		{"v: ${S^^}", "lowercase", "v: " + maskDerived},
		{"v: ${S}", "123456", "v: (value from Secret apps/vars key S, hidden)"},
		// kustomize prints the sequence in block style: the value cannot
		// end it and move "other" where the twin has "fixed".
		{`v: ["${S}", "fixed"]`, `moved", "other"] #`, "- (value from Secret apps/vars key S, hidden)\n  - fixed"},
		// A value that breaks the YAML fails the parse with Flux: the
		// error says so, without the parser's text (which may quote it).
		{"v: pre-${S}-post", "user: pass", "error\nFlux Kustomization apps/web: postBuild substitution fails with the values of its Secret variables"},
	}
	for _, tc := range tests {
		t.Run(tc.field+" "+tc.value, func(t *testing.T) {
			out := checkMasked(t, tc.field, tc.value)
			if !strings.Contains(out, tc.want) {
				t.Errorf("prints\n%s\nwant it to hold %q", out, tc.want)
			}
		})
	}
}

// Random printable values, YAML's significant characters included, in
// the fields a template puts a variable in: none prints a Secret-made
// substring.
func TestSecretMaskingGenerated(t *testing.T) {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 #:\"'\\{}[],&*!|>%@`-?\n\t"
	fields := []string{"v: ${S}", `v: "${S}"`, "v: '${S}'", "v: x-${S}-y", "v: [${S}]", "v: {k: ${S}}", "${S}: v", "v: |\n    ${S}"}
	rng := rand.New(rand.NewPCG(22, 6))
	for i := range 300 {
		n := 4 + rng.IntN(24)
		b := make([]byte, n)
		for j := range b {
			b[j] = chars[rng.IntN(len(chars))]
		}
		checkMasked(t, fields[i%len(fields)], string(b))
	}
}

// seedFile is testdata's list of fields and Secret values.
func seedFile(t testing.TB) []struct{ Field, Value string } {
	data, err := os.ReadFile("testdata/secret-masking.json")
	if err != nil {
		t.Fatal(err)
	}
	var seeds []struct{ Field, Value string }
	if err := json.Unmarshal(data, &seeds); err != nil {
		t.Fatal(err)
	}
	return seeds
}

func FuzzSecretMasking(f *testing.F) {
	for _, s := range seedFile(f) {
		f.Add(s.Field, s.Value)
	}
	f.Fuzz(func(t *testing.T, field, value string) {
		if !strings.Contains(field, "${S") || strings.ContainsAny(field, "\r\x00") {
			t.Skip()
		}
		checkMasked(t, field, value)
	})
}
