package argocd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func ignoreApp(t testing.TB, entries string) *Application {
	t.Helper()
	d := ParseFile([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  source: {repoURL: r}\n  ignoreDifferences:\n"+indent(entries)), "a.yaml")
	if len(d.Applications) != 1 {
		t.Fatalf("%q: %+v", entries, d)
	}
	return d.Applications[0]
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

func TestIgnoreRulesNormalize(t *testing.T) {
	obj := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"a/b":"1","x":"2"}},
		"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"ui","image":"ui:1"},{"name":"cache","image":"redis:7"}]}}}}`
	for _, c := range []struct {
		name, entry, want string
		notes             string
	}{
		{"pointer", "- {group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}\n", `"spec":{"template"`, ""},
		{"escaped pointer", "- {group: apps, kind: Deployment, jsonPointers: [/metadata/labels/a~1b]}\n", `"labels":{"x":"2"}`, ""},
		{"list item pointer", "- {group: apps, kind: Deployment, jsonPointers: [/spec/template/spec/containers/0]}\n", `"containers":[{"image":"redis:7","name":"cache"}]`, ""},
		{"absent pointer", "- {group: apps, kind: Deployment, jsonPointers: [/spec/nothing/here, /spec/template/spec/containers/9/image]}\n", `"replicas":3`, ""},
		{"jq select", "- {group: '*', kind: Deployment, jqPathExpressions: ['.spec.template.spec.containers[] | select(.name == \"ui\") | .image']}\n", `{"name":"ui"}`, ""},
		{"jq does not compile", "- {kind: Deployment, jqPathExpressions: ['.spec | (']}\n", "", "cannot be evaluated"},
		{"relative pointer", "- {kind: Deployment, jsonPointers: [spec/replicas]}\n", "", "a JSON pointer starts with /"},
		{"managed fields", "- {kind: Deployment, managedFieldsManagers: [hpa]}\n", "", "known only in the cluster"},
	} {
		rules, notes := ignoreApp(t, c.entry).IgnoreRules()
		if c.notes != "" {
			if len(rules) != 0 || len(notes) != 1 || !strings.Contains(notes[0], c.notes) {
				t.Errorf("%s: rules %d, notes %q; want none and a note %q", c.name, len(rules), notes, c.notes)
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if !r.Matches("apps", "Deployment", "shop", "web") || r.Matches("apps", "StatefulSet", "shop", "web") {
				t.Errorf("%s: %s matches the wrong objects", c.name, r.Text)
			}
			var err error
			if m, err = r.Normalize(context.Background(), m); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		got, _ := json.Marshal(m)
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s: %s, want %s in it", c.name, got, c.want)
		}
	}
}

func TestIgnoreRulesScope(t *testing.T) {
	rules, _ := ignoreApp(t, "- {kind: ConfigMap, name: c, namespace: ns, jsonPointers: [/data]}\n").IgnoreRules()
	if len(rules) != 1 {
		t.Fatal(rules)
	}
	r := rules[0]
	if !r.Matches("", "ConfigMap", "ns", "c") || r.Matches("", "ConfigMap", "m", "c") || r.Matches("", "ConfigMap", "ns", "d") || r.Matches("apps", "ConfigMap", "ns", "c") {
		t.Errorf("%s: wrong scope", r.Text)
	}
	if r.Text != "jsonPointers /data of ConfigMap c (ns)" {
		t.Errorf("text %q", r.Text)
	}
}

// A repository's ignoreDifferences, whatever they hold, compile to rules
// and notes, and normalize an object or fail with an error, never a
// panic or a hang (jq is bounded as Argo CD bounds it).
func FuzzIgnoreRules(f *testing.F) {
	for _, s := range []string{
		"- {group: apps, kind: Deployment, jsonPointers: [/spec/replicas, /a~1b/0, '']}\n",
		"- {kind: '*', jqPathExpressions: ['.spec.template.spec.containers[] | select(.name == \"x\") | .image', '.a | (', 'def f: f; f']}\n",
		"- {kind: '[', name: x, managedFieldsManagers: [m]}\n",
	} {
		f.Add(s)
	}
	obj := map[string]any{"spec": map[string]any{"replicas": 1.0, "l": []any{"a", map[string]any{"b": "c"}}}}
	f.Fuzz(func(t *testing.T, entries string) {
		d := ParseFile([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a}\nspec:\n  source: {repoURL: r}\n  ignoreDifferences:\n"+indent(entries)), "a.yaml")
		for _, a := range d.Applications {
			rules, _ := a.IgnoreRules()
			for _, r := range rules {
				r.Matches("apps", "Deployment", "n", "x")
				r.Normalize(context.Background(), obj)
			}
		}
	})
}
