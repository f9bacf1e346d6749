package flux

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Conformance cases for resourceset.go: each encodes a rule of
// flux-operator's at tag v0.59.0 (github.com/controlplaneio-fluxcd/
// flux-operator), named in the case.
func TestResourceSets(t *testing.T) {
	for _, tc := range []struct {
		name, cite, in string
		// want are the objects made, as "Kind ns/name" followed by
		// "field=value" checks of the first object of that name.
		want        []string
		checks      map[string]string // "Kind ns/name path.to.field" → value
		notes       []string          // substrings of notes
		notRendered []string          // substrings of notRendered
	}{
		{
			name: "inline inputs × resources",
			cite: "internal/builder/resourceset.go:31 BuildResourceSet, :273 newTemplate (<< >>), controller resourceset_controller.go:512 owner labels",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: apps, namespace: flux-system}
spec:
  inputs:
    - tenant: frontend
    - tenant: backend
  resources:
    - apiVersion: v1
      kind: Namespace
      metadata:
        name: << inputs.tenant >>
    - apiVersion: v1
      kind: ServiceAccount
      metadata:
        name: flux
        namespace: << inputs.tenant >>
`,
			want: []string{"Namespace /frontend", "Namespace /backend", "ServiceAccount frontend/flux", "ServiceAccount backend/flux"},
			checks: map[string]string{
				"Namespace /frontend metadata.labels.resourceset\\.fluxcd\\.controlplane\\.io/name":      "apps",
				"Namespace /frontend metadata.labels.resourceset\\.fluxcd\\.controlplane\\.io/namespace": "flux-system",
			},
		},
		{
			name: "resourcesTemplate with slugify, toYaml, provider metadata, dedup",
			cite: "resourceset.go:253 BuildResourcesFromYAML, :303 slug 63 smart truncate, :313 toYaml, inputs/provider.go:43 provider key, resourceset.go:31 dedup (first kept)",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputs:
    - semver: ">=1.0.0-rc.0"
      labels: {a: "1"}
    - semver: ">=2.0.0"
      labels: {a: "2"}
  resourcesTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: v-<< inputs.semver | slugify >>
      namespace: ns
    data:
      by: << inputs.provider.kind >>/<< inputs.provider.name >>
      labels: |
        << inputs.labels | toYaml | nindent 4 | trim >>
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: shared
      namespace: ns
    data:
      first: "<< inputs.semver >>"
`,
			want: []string{"ConfigMap ns/v-1-0-0-rc-0", "ConfigMap ns/shared", "ConfigMap ns/v-2-0-0"},
			checks: map[string]string{
				"ConfigMap ns/v-1-0-0-rc-0 data.by": "ResourceSet/t",
				"ConfigMap ns/shared data.first":    ">=1.0.0-rc.0",
			},
		},
		{
			name: "reconcile disabled is left out",
			cite: "resourceset.go:66 and :96 fluxcd.controlplane.io/reconcile: disabled",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputs: [{n: a}, {n: b}]
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: << inputs.n >>
        namespace: ns
        annotations:
          fluxcd.controlplane.io/reconcile: << if eq inputs.n "b" >>disabled<< else >>enabled<< end >>
`,
			want: []string{"ConfigMap ns/a"},
		},
		{
			name: "inputsFrom a Static provider: defaultValues and an id",
			cite: "resourcesetinputprovider_controller.go:253 Static exports defaultValues + id (inputs/id.go:12 adler32 of the UID); resourceset_controller.go:394 getInputs by name, in the ResourceSet's namespace",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSetInputProvider
metadata: {name: team, namespace: ns}
spec:
  type: Static
  defaultValues:
    tenant: team1
---
apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputsFrom:
    - name: team
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: << inputs.tenant >>-<< inputs.id >>
        namespace: ns
`,
			want:  []string{"ConfigMap ns/team1-" + inputID("ns/team")},
			notes: []string{"ResourceSetInputProvider ns/team: inputs.id is a checksum of the UID"},
		},
		{
			name: "inputsFrom by selector, Permute with its ids",
			cite: "inputs/permuter.go:52 scoped by normalized provider name, :195 id = adler32(\"name=i/...\"), permuter_test.go:130 (provider_1=0/provider_2=0 → 2075461889)",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSetInputProvider
metadata: {name: provider-1, namespace: ns, labels: {team: x}}
spec: {type: Static, defaultValues: {key1: value1}}
---
apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSetInputProvider
metadata: {name: provider-2, namespace: ns, labels: {team: x}}
spec: {type: Static, defaultValues: {key2: value2}}
---
apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputStrategy: {name: Permute}
  inputsFrom:
    - selector: {matchLabels: {team: x}}
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: p-<< inputs.id >>
        namespace: ns
      data:
        v: << inputs.provider_1.key1 >>-<< inputs.provider_2.key2 >>
`,
			want:   []string{"ConfigMap ns/p-2075461889"},
			checks: map[string]string{"ConfigMap ns/p-2075461889 data.v": "value1-value2"},
		},
		{
			name: "a non-static provider is named with its reason; the inline inputs render",
			cite: "resourcesetinputprovider_controller.go:267 callExternalProvider for every type but Static",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSetInputProvider
metadata: {name: prs, namespace: ns}
spec:
  type: GitHubPullRequest
  url: https://github.com/org/app
---
apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputs: [{n: main}]
  inputsFrom: [{name: prs}]
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: << inputs.n >>, namespace: ns}
`,
			want:        []string{"ConfigMap ns/main"},
			notRendered: []string{"ResourceSet ns/t: what it makes from the inputs of ResourceSetInputProvider ns/prs (type GitHubPullRequest: flux-operator asks https://github.com/org/app"},
		},
		{
			name: "a missing key fails the set, as the operator stalls it",
			cite: "resourceset.go:273 missingkey=error",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputs: [{n: a}]
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: << inputs.id >>, namespace: ns}
`,
			notRendered: []string{"ResourceSet ns/t is not rendered: flux-operator fails it:", "map has no entry for key \"id\""},
		},
		{
			name: "dependsOn is noted; no inputs renders once",
			cite: "resourceset.go:50 a template with no inputs is built once; api/v1 resourceset_types.go DependsOn",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  dependsOn:
    - {apiVersion: fluxcd.controlplane.io/v1, kind: ResourceSet, name: policies, namespace: flux-system, ready: true}
  commonMetadata:
    labels: {team: x}
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: once, namespace: ns}
`,
			want:   []string{"ConfigMap ns/once"},
			checks: map[string]string{"ConfigMap ns/once metadata.labels.team": "x"},
			notes:  []string{"ResourceSet ns/t waits for ResourceSet flux-system/policies (ready)"},
		},
		{
			name: "a template past kplan's bounds fails its set, not the plan",
			cite: "kplan's bound (resourceset.go boundedFuncs): flux-operator would exhaust its memory",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  resourcesTemplate: |
    << range until 1000000000 >>x<< end >><< repeat 1000000000 "y" >>
`,
			notRendered: []string{"ResourceSet ns/t is not rendered: flux-operator fails it:", "kplan renders at most 100000"},
		},
		{
			name: "providers with no inputs make an empty set",
			cite: "resourceset_controller.go:175 inputsFrom with no inputs reconciles an empty set",
			in: `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputsFrom: [{selector: {matchLabels: {none: here}}}]
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: x, namespace: ns}
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := yamldocs.Mappings([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			res := resourceSets(objs, nil)
			var got []string
			byName := map[string]*yaml.RNode{}
			for _, o := range res.objects {
				k := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
				got = append(got, k)
				if byName[k] == nil {
					byName[k] = o
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("%s: made\n%s\nwant\n%s\n(not rendered: %v)", tc.cite, strings.Join(got, "\n"), strings.Join(tc.want, "\n"), res.notRendered)
			}
			for key, want := range tc.checks {
				obj, field, _ := strings.Cut(key, " ")
				name, field, _ := strings.Cut(field, " ")
				o := byName[obj+" "+name]
				if o == nil {
					t.Errorf("%s: no %s %s", tc.cite, obj, name)
					continue
				}
				v, err := o.Pipe(yaml.Lookup(splitPath(field)...))
				if err != nil || v == nil || yaml.GetValue(v) != want {
					t.Errorf("%s: %s %s %s = %v, want %q", tc.cite, obj, name, field, v, want)
				}
			}
			for _, n := range tc.notes {
				if !containsSub(res.notes, n) {
					t.Errorf("%s: notes %q, want one with %q", tc.cite, res.notes, n)
				}
			}
			for _, n := range tc.notRendered {
				if !containsSub(res.notRendered, n) {
					t.Errorf("%s: not rendered %q, want one with %q", tc.cite, res.notRendered, n)
				}
			}
			if len(tc.notRendered) == 0 && len(res.notRendered) > 0 {
				t.Errorf("%s: not rendered %q, want none", tc.cite, res.notRendered)
			}
		})
	}
}

// splitPath splits a dotted path, "\." standing for a dot in a key.
func splitPath(p string) []string {
	p = strings.ReplaceAll(p, `\.`, "\x00")
	parts := strings.Split(p, ".")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], "\x00", ".")
	}
	return parts
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// copyFrom: a ConfigMap takes the data of the one it names, as the
// plan knows it (internal/copier/resources.go:48); unknown, it is noted.
func TestResourceSetCopyFrom(t *testing.T) {
	objs, err := yamldocs.Mappings([]byte(`apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata: {name: t, namespace: ns}
spec:
  inputs: [{tenant: a}]
  resources:
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: info
        namespace: << inputs.tenant >>
        annotations: {fluxcd.controlplane.io/copyFrom: flux-system/info}
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: other
        namespace: << inputs.tenant >>
        annotations: {fluxcd.controlplane.io/copyFrom: flux-system/none}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := resourceSets(objs, func(ns, name string) (map[string]string, bool) {
		if ns == "flux-system" && name == "info" {
			return map[string]string{"ENV": "staging"}, true
		}
		return nil, false
	})
	if len(res.objects) != 2 {
		t.Fatalf("made %d objects", len(res.objects))
	}
	if got := res.objects[0].GetDataMap(); got["ENV"] != "staging" {
		t.Errorf("a/info data %v, want flux-system/info's", got)
	}
	if !containsSub(res.notes, "ConfigMap a/other copies its data from flux-system/none in the cluster when applied; kplan plans it as written") {
		t.Errorf("notes %q", res.notes)
	}
}

func TestSlugify(t *testing.T) {
	// resourceset.go:303: at most 63 characters, cut at the last dash.
	long := strings.Repeat("word ", 20)
	if got := slugify(long); len(got) > 63 || strings.HasSuffix(got, "-") || !strings.HasPrefix(got, "word-word") {
		t.Errorf("slugify(%q) = %q", long, got)
	}
	if got := slugify(">=1.0.0-rc.0"); got != "1-0-0-rc-0" {
		t.Errorf("slugify = %q, want 1-0-0-rc-0 (flux-operator builder/testdata/resourceset/slugify.golden.yaml)", got)
	}
}
