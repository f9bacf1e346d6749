package flux

import (
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Result.Masked reads the value each mask of an object stands for from
// the Secrets of the target's cluster: a postBuild variable's, a Helm
// values leaf's, and for a mask no one Secret made, every Secret value
// the target reads; equal values give equal fingerprints, and none
// holds the value.
func TestMaskedFingerprints(t *testing.T) {
	secret := func(password, token string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: apps}\nstringData: {PASSWORD: " + password + ", values.yaml: 'auth: {token: " + token + "}'}\n"
	}
	obj := yaml.MustParse(`apiVersion: v1
kind: ConfigMap
metadata: {name: conf, namespace: apps}
data:
  url: postgres://app:(value from Secret apps/db key PASSWORD, hidden)@db
  token: (value from Secret apps/db key values.yaml path auth.token, hidden)
  cut: (value from a Secret, hidden)
  other: (value from Secret apps/absent key X, hidden)
`)
	target := &Target{Cluster: "prod", Kustomization: &Kustomization{Namespace: "apps", Name: "app",
		Object: map[string]any{"spec": map[string]any{"postBuild": map[string]any{"substituteFrom": []any{map[string]any{"kind": "Secret", "name": "db"}}}}}}}
	masked := func(password, token string) map[string]string {
		nodes, err := kio.FromBytes([]byte(secret(password, token)))
		if err != nil {
			t.Fatal(err)
		}
		pool := varPool{}
		pool.add("flux-system/apps", nodes)
		return (&Result{pools: map[string]varPool{"prod": pool}}).Masked(target)(obj)
	}
	const (
		password = "(value from Secret apps/db key PASSWORD, hidden)"
		token    = "(value from Secret apps/db key values.yaml path auth.token, hidden)"
		absent   = "(value from Secret apps/absent key X, hidden)"
	)
	a, b, c := masked("one", "t1"), masked("two", "t1"), masked("one", "t2")
	if len(a) != 4 || a[absent] != "" {
		t.Fatalf("masks %v, want the four, the absent Secret's without a value", a)
	}
	for _, tc := range []struct {
		name, mask string
		x, y       map[string]string
		same       bool
	}{
		{"the variable's value changed", password, a, b, false},
		{"another value changed", password, a, c, true},
		{"the leaf unchanged", token, a, b, true},
		{"the leaf changed", token, a, c, false},
		{"derived: any value changed", maskDerived, a, b, false},
		{"derived: the other value changed", maskDerived, a, c, false},
	} {
		if (tc.x[tc.mask] == tc.y[tc.mask]) != tc.same {
			t.Errorf("%s: %s vs %s, want same %v", tc.name, tc.x[tc.mask], tc.y[tc.mask], tc.same)
		}
	}
	for _, fp := range a {
		for _, v := range []string{"one", "t1"} {
			if fp == v {
				t.Errorf("a fingerprint is the value %q", v)
			}
		}
	}
}
