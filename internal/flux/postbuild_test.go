package flux

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/envsubst"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

func nodes(t *testing.T, docs string) []*yaml.RNode {
	t.Helper()
	ns, err := kio.FromBytes([]byte(docs))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestPostBuildSubstitution(t *testing.T) {
	// What the repository's Flux Kustomizations apply, as substituteFrom
	// finds it.
	pool := varPool{}
	pool.add("flux-system/flux-system", nodes(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {DOMAIN: example.test, APP: from-configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: secrets, namespace: apps}
stringData: {TOKEN: s3cr3t-token}
data: {PASSWORD: aHVudGVyMg==}
---
apiVersion: v1
kind: Secret
metadata: {name: encrypted, namespace: apps}
data: {KEY: "RU5DW0FFUzI1Nl9HQ00sZGF0YTp4eXpd"}
sops: {mac: "ENC[...]"}
`))
	const objs = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${APP}
  annotations: {url: "https://${APP}.${DOMAIN}", token: "Bearer ${TOKEN}", password: "${PASSWORD}", key: "${KEY:=none}"}
data: {undefined: "[${UNDEFINED}]"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${APP}-raw
  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}
`
	tests := []struct {
		name      string
		postBuild string
		want      map[string]string // ConfigMap name -> its YAML must contain each "|"-separated part
		notes     string
	}{
		{"inline overrides substituteFrom; Secret values masked; undefined empty as Flux does",
			`{substitute: {APP: web}, substituteFrom: [{kind: ConfigMap, name: settings}, {kind: Secret, name: secrets}]}`,
			map[string]string{
				"web":        "url: https://web.example.test|token: Bearer (value from Secret apps/secrets key TOKEN, hidden)|password: (value from Secret apps/secrets key PASSWORD, hidden)|undefined: '[]'|key: none",
				"${APP}-raw": "name: ${APP}-raw",
			}, ""},
		{"a missing optional source is skipped",
			`{substituteFrom: [{kind: ConfigMap, name: settings}, {kind: Secret, name: absent, optional: true}]}`,
			map[string]string{"from-configmap": "url: https://from-configmap.example.test|undefined: '[]'"}, ""},
		{"a missing required source leaves its variables as written",
			`{substitute: {APP: web}, substituteFrom: [{kind: Secret, name: absent}]}`,
			// ${KEY:=none} whole: the missing Secret may set KEY
			// (onedr0p-style components' ${X:=default} lost their
			// defaults, as neither the file nor Flux has them).
			map[string]string{"web": "url: https://web.${DOMAIN}|token: Bearer ${TOKEN}|undefined: '[${UNDEFINED}]'|key: ${KEY:=none}"},
			"substituteFrom Secret apps/absent is not in the repository: its variables are left as written"},
		{"an encrypted Secret cannot be known",
			`{substitute: {APP: web}, substituteFrom: [{kind: Secret, name: encrypted}]}`,
			map[string]string{"web": "url: https://web.${DOMAIN}"},
			"Secret apps/encrypted: it is SOPS-encrypted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := sigsyaml.Unmarshal([]byte(`{apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, metadata: {name: web, namespace: apps}, spec: {commonMetadata: {labels: {team: a}}, postBuild: `+tc.postBuild+`}}`), &obj); err != nil {
				t.Fatal(err)
			}
			k := &Kustomization{Namespace: "apps", Name: "web", Object: obj}
			out, err := postBuild(context.Background(), k, nodes(t, objs), pool)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(out.notes, "\n"); !strings.Contains(got, tc.notes) || (tc.notes == "" && got != "") {
				t.Errorf("notes %q, want %q", got, tc.notes)
			}
			for name, parts := range tc.want {
				o := find(out.objects, "ConfigMap", name)
				if o == nil {
					t.Errorf("no ConfigMap %s", name)
					continue
				}
				s := o.MustString()
				for _, p := range append(strings.Split(parts, "|"), "team: a", LabelName+": web", LabelNamespace+": apps") {
					if !strings.Contains(s, p) {
						t.Errorf("ConfigMap %s lacks %q:\n%s", name, p, s)
					}
				}
				for _, secret := range []string{"s3cr3t-token", "hunter2"} {
					if strings.Contains(s, secret) {
						t.Errorf("ConfigMap %s prints a Secret's value:\n%s", name, s)
					}
				}
			}
		})
	}
}

// Substitution with some variables unknown reads any repository text: it
// never panics, keeps each expression of an unknown variable as written
// (escaped dollars and all), and replaces the known ones.
func FuzzSubstituteKnown(f *testing.F) {
	for _, s := range []string{"${A} ${B:=def} $${B} $$${B^^} ${A:-x}", "${", "$${", "${B", "}${B}{", "${B:=${A}}", "kplanunknownvariable1x ${B}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		vars := map[string]string{"A": "alpha"}
		protected, unknown := protectUnknown(text, vars)
		if got := unknown.Replace(protected); got != text {
			t.Fatalf("protected %q restores to %q, want the text %q", protected, got, text)
		}
		_, _ = envsubst.Eval(protected, func(name string) (string, bool) {
			if _, ok := vars[name]; !ok {
				t.Fatalf("%q: envsubst reads the unknown variable %s in %q", text, name, protected)
			}
			return vars[name], true
		})
		res := &resource.Resource{}
		n, err := yaml.FromMap(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "data": map[string]any{"k": text}})
		if err != nil {
			t.Fatal(err)
		}
		res.RNode = *n
		_ = substituteKnown(res, vars) // an error is the target's, never a panic
	})
}
