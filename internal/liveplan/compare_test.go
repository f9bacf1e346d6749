package liveplan

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const liveCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: prod
  uid: 1234
  resourceVersion: "41"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields: [{manager: kplan, operation: Apply}]
  labels: {app: web}
  annotations:
    config.k8s.io/owning-inventory: inv
    kubectl.kubernetes.io/last-applied-configuration: '{"data":{"k":"secret"}}'
data:
  k: v
`

func TestDiffComparisonRules(t *testing.T) {
	tests := []struct {
		name   string
		live   string
		dryRun string
		want   []string // FieldChange.Header()s
	}{
		{"server-set metadata and status are noise", liveCM, strings.NewReplacer(`"41"`, `"42"`, "generation: 3", "generation: 4", "uid: 1234", "uid: 999",
			"manager: kplan", "manager: other", `"2026-01-01T00:00:00Z"`, `"2026-02-02T00:00:00Z"`).Replace(liveCM) + "status: {phase: Active}\n", nil},
		{"last-applied annotation is noise", liveCM, strings.Replace(liveCM, `'{"data":{"k":"secret"}}'`, `'{}'`, 1), nil},
		{"a data value is a change", liveCM, strings.Replace(liveCM, "k: v", "k: w", 1), []string{`~ data.k: "v" → "w"`}},
		{"a label is a change", liveCM, strings.Replace(liveCM, "app: web", "app: api", 1), []string{`~ metadata.labels.app: "web" → "api"`}},
		{"an annotation apply removes is a change", liveCM, strings.Replace(liveCM, "    config.k8s.io/owning-inventory: inv\n", "", 1), []string{`- metadata.annotations.config.k8s.io/owning-inventory: "inv"`}},
		{"a field apply adds", liveCM, liveCM + "immutable: true\n", []string{"+ immutable: true"}},
		{"Secret values are hidden", strings.Replace(liveCM, "kind: ConfigMap", "kind: Secret", 1), strings.Replace(strings.Replace(liveCM, "kind: ConfigMap", "kind: Secret", 1), "k: v", "k: dG9w", 1), []string{"~ data.k (value hidden)"}},
		{"a Deployment's live replicas are a change apply makes", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec: {replicas: 5, template: {spec: {containers: [{name: app, image: "web:1"}]}}}
status: {replicas: 5}
`, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec: {replicas: 2, template: {spec: {containers: [{name: app, image: "web:1"}]}}}
status: {replicas: 5}
`, []string{"~ spec.replicas: 5 → 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range Diff(obj(t, tc.live), obj(t, tc.dryRun)) {
				got = append(got, f.Header())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Diff:\n got %q\nwant %q", got, tc.want)
			}
			for _, g := range got {
				if strings.Contains(g, "dG9w") || strings.Contains(g, "secret") {
					t.Errorf("a Secret value shows: %s", g)
				}
			}
		})
	}
}

func TestComparableLeavesInputAlone(t *testing.T) {
	o := obj(t, liveCM)
	before, _ := o.MarshalJSON()
	c := Comparable(o.Object)
	c["data"].(map[string]any)["k"] = "changed"
	after, _ := o.MarshalJSON()
	if string(before) != string(after) {
		t.Errorf("Comparable changed its input:\n%s\n%s", before, after)
	}
	md := c["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "generation", "managedFields", "creationTimestamp"} {
		if _, ok := md[k]; ok {
			t.Errorf("metadata.%s kept", k)
		}
	}
}

func TestFindingKinds(t *testing.T) {
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	immutableErr := apierrors.NewInvalid(gk, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), map[string]any{"app": "x"}, "field is immutable")})
	vap := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "app", field.ErrorList{field.Forbidden(field.NewPath(""), "ValidatingAdmissionPolicy 'no-bad' with binding 'no-bad' denied request: bad value")})
	webhook := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New(`admission webhook "x.example.com" denied the request: no`))
	rbac := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New(`User "kplan" cannot patch resource "secrets"`))
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "svc", field.ErrorList{field.Required(field.NewPath("spec", "ports"), "")})
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}, SearchedVersions: []string{"v1"}}
	secretErr := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Invalid(field.NewPath("data", "k"), "c2VjcmV0LXZhbHVl", "bad")})
	secret := obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: c2VjcmV0LXZhbHVl}\n")
	tests := []struct {
		name string
		err  error
		o    *unstructured.Unstructured
		want FindingKind
		in   string // the message keeps this
		out  string // and never shows this
	}{
		{"immutable selector", immutableErr, nil, Immutable, "field is immutable", ""},
		{"ValidatingAdmissionPolicy", vap, nil, Admission, "ValidatingAdmissionPolicy 'no-bad'", ""},
		{"admission webhook", webhook, nil, Admission, "denied the request: no", ""},
		{"RBAC", rbac, nil, Forbidden, "cannot patch", ""},
		{"validation", invalid, nil, Invalid, "spec.ports", ""},
		{"no CRD", noMatch, nil, MissingCRD, "Widget", ""},
		{"Secret values hidden", secretErr, secret, Invalid, "(hidden)", "c2VjcmV0LXZhbHVl"},
		{"other", &apierrors.StatusError{ErrStatus: metav1.Status{Message: "etcd timeout", Reason: metav1.StatusReasonTimeout}}, nil, Refused, "etcd timeout", ""},
	}
	p := &planner{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := p.finding("k", tc.err, tc.o)
			if f.Kind != tc.want {
				t.Errorf("kind %s, want %s (%s)", f.Kind, tc.want, f.Message)
			}
			if !strings.Contains(f.Message, tc.in) {
				t.Errorf("message %q lacks %q", f.Message, tc.in)
			}
			if tc.out != "" && strings.Contains(f.Message, tc.out) {
				t.Errorf("message %q shows %q", f.Message, tc.out)
			}
		})
	}
}

func TestOwnershipPolicies(t *testing.T) {
	mine := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {config.k8s.io/owning-inventory: mine}}\n")
	other := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {config.k8s.io/owning-inventory: other}}\n")
	none := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
	tests := []struct {
		policy string
		live   *unstructured.Unstructured
		want   bool // a finding
	}{
		{"must-match", mine, false}, {"must-match", other, true}, {"must-match", none, true},
		{"adopt-if-no-inventory", none, false}, {"adopt-if-no-inventory", other, true},
		{"adopt-all", other, false}, {"adopt-all", none, false},
	}
	for _, tc := range tests {
		p := &planner{policy: tc.policy}
		p.inv.ID = "mine"
		if f := p.owned("k", tc.live); (f != nil) != tc.want {
			t.Errorf("%s, owner %q: finding %v, want %v", tc.policy, tc.live.GetAnnotations()["config.k8s.io/owning-inventory"], f, tc.want)
		}
	}
}

func TestSameRender(t *testing.T) {
	o := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: prod, annotations: {config.k8s.io/owning-inventory: inv}}\ndata: {k: v}\n")
	tests := []struct {
		name     string
		deployed string
		want     bool
	}{
		{"same, namespace defaulted", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n", true},
		{"value differs", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: w}\n", false},
		{"label added", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {x: y}}\ndata: {k: v}\n", false},
	}
	for _, tc := range tests {
		if got := sameRender(obj(t, tc.deployed), o, "inv"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
