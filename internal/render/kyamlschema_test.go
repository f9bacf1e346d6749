package render

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// builtinBundle is kyaml's built-in schema as the patched copy embeds it,
// decoded the way upstream kyaml decodes it: every definition at once.
func builtinBundle(t *testing.T) (defs spec.Definitions, resources []struct{ APIVersion, Kind, Definition string }) {
	t.Helper()
	matches, err := filepath.Glob("../../third_party/kyaml/openapi/kubernetesapi/data/*.json.gz")
	if err != nil || len(matches) != 1 {
		t.Fatalf("the built-in bundle of third_party/kyaml: %v %v", matches, err)
	}
	gz, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Definitions spec.Definitions `json:"definitions"`
		Resources   []struct{ APIVersion, Kind, Definition string }
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	return b.Definitions, b.Resources
}

// TestLazyBuiltinSchemaIsTheEagerOne: the patched kyaml decodes a built-in
// definition on its first lookup (third_party/README.md). Every
// definition, looked up by reference from the global schema (as the
// strategic-merge walk does) and by resource type (as upstream indexes
// them, from each definition's x-kubernetes-group-version-kind), is the
// one upstream's eager decode gives, and no type is found that upstream
// does not find, nor missed.
func TestLazyBuiltinSchemaIsTheEagerOne(t *testing.T) {
	defer lockSchema(false)()
	defs, resources := builtinBundle(t)
	if len(defs) < 500 {
		t.Fatalf("%d definitions: not the built-in bundle", len(defs))
	}
	for name, want := range defs {
		ref := spec.MustCreateRef("#/definitions/" + name)
		got, err := openapi.Resolve(&ref, openapi.Schema())
		if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("Resolve(%s) = %v, %v; not the eager definition", name, got != nil, err)
		}
	}
	deep := spec.MustCreateRef("#/definitions/io.k8s.api.apps.v1.Deployment/properties/spec")
	got, err := openapi.Resolve(&deep, openapi.Schema())
	if want := defs["io.k8s.api.apps.v1.Deployment"].Properties["spec"]; err != nil || got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("a pointer into a definition resolves to %v, %v", got, err)
	}

	// Upstream's index by type: AddDefinitions, from the extension.
	eager := map[yaml.TypeMeta]spec.Schema{}
	for _, d := range defs {
		exts, _ := d.Extensions["x-kubernetes-group-version-kind"].([]any)
		for _, e := range exts {
			m, _ := e.(map[string]any)
			g, _ := m["group"].(string)
			v, _ := m["version"].(string)
			k, _ := m["kind"].(string)
			apiVersion := v
			if g != "" {
				apiVersion = g + "/" + v
			}
			eager[yaml.TypeMeta{APIVersion: apiVersion, Kind: k}] = d
		}
	}
	types := map[yaml.TypeMeta]bool{{APIVersion: "example.com/v1", Kind: "Thing"}: true}
	for tm := range eager {
		types[tm] = true
	}
	for _, r := range resources {
		types[yaml.TypeMeta{APIVersion: r.APIVersion, Kind: r.Kind}] = true
	}
	for tm := range types {
		rs := openapi.SchemaForResourceType(tm)
		want, found := eager[tm]
		switch {
		case found != (rs != nil):
			t.Errorf("%s %s: upstream finds it %v, the patched kyaml %v", tm.APIVersion, tm.Kind, found, rs != nil)
		case found && !reflect.DeepEqual(*rs.Schema, want):
			t.Errorf("%s %s: not upstream's schema", tm.APIVersion, tm.Kind)
		}
	}
	if len(eager) < 200 {
		t.Errorf("%d types indexed: not the built-in bundle", len(eager))
	}
}

// TestPatchedKyamlMergesAsKustomize: strategic-merge patches on built-in
// kinds (merge keys from the schema, nested references, lists replaced,
// $patch directives) render in process, with the patched kyaml's lazily
// decoded schema, exactly as the kustomize CLI built from the upstream
// modules renders them.
func TestPatchedKyamlMergesAsKustomize(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	var overlays []string
	for i, c := range smpCases {
		dir := fmt.Sprintf("s%02d", i)
		files[dir+"/base.yaml"] = c.base
		files[dir+"/patch.yaml"] = c.patch
		files[dir+"/kustomization.yaml"] = "resources:\n- base.yaml\npatches:\n- path: patch.yaml\n"
		overlays = append(overlays, dir)
	}
	for _, r := range besideKustomize(t, files, overlays) {
		if r.cliErr != nil || r.res.Err != nil {
			t.Errorf("%s: kplan %v, kustomize %v", r.res.Path, r.res.Err, r.cliErr)
			continue
		}
		if got := toYAML(t, r.res.Objects); got != string(r.cli) {
			t.Errorf("%s: kplan renders\n%s\nkustomize\n%s", r.res.Path, got, r.cli)
		}
	}
}

// smpCases each patch a built-in kind where the schema decides the merge.
var smpCases = []struct{ base, patch string }{
	{ // containers, env and ports merged by name / containerPort
		base: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: app
        image: app:1
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        ports: [{containerPort: 80, name: http}]
        volumeMounts: [{name: data, mountPath: /data}]
      - name: side
        image: side:1
      volumes: [{name: data, emptyDir: {}}]
`,
		patch: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: app
        image: app:2
        env: [{name: B, value: "3"}, {name: C, value: "4"}]
        ports: [{containerPort: 443, name: https}]
      - name: side
        $patch: delete
      volumes: [{name: cache, emptyDir: {}}]
`,
	},
	{ // a CronJob: the pod template three references deep
		base: `apiVersion: batch/v1
kind: CronJob
metadata: {name: job}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: run, image: run:1, args: [a, b]}]
          tolerations: [{key: k, operator: Exists}]
`,
		patch: `apiVersion: batch/v1
kind: CronJob
metadata: {name: job}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: run, args: [c]}, {name: extra, image: extra:1}]
          tolerations: [{key: other, operator: Exists}]
`,
	},
	{ // Service ports merged by port; a ClusterRole's rules (no merge key) replaced
		base: `apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  ports: [{port: 80, targetPort: 8080, name: http}, {port: 90, name: other}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: role}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
`,
		patch: `apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  ports: [{port: 80, targetPort: 9090}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: role}
rules: [{apiGroups: [apps], resources: [deployments], verbs: [list]}]
`,
	},
	{ // a StatefulSet: claim templates, init containers, $retainKeys-free replace
		base: `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  template:
    spec:
      initContainers: [{name: init, image: init:1}]
      containers: [{name: db, image: db:1, resources: {limits: {cpu: "1"}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`,
		patch: `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      initContainers: [{name: init2, image: init:2}]
      containers: [{name: db, resources: {limits: {memory: 1Gi}}}]
`,
	},
}
