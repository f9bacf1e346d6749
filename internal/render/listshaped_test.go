package render

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// Files whose top level is a list, read by a build, render as krusty
// renders them: the scrubber that gathers Secret values from the files
// a render reads once read any file mentioning "Secret" as objects, and
// kyaml's getters panic on a list ("kustomize panicked"). Each case
// holds the text "Secret" in a list-shaped file kustomize reads.
func TestListShapedInputsRenderAsKrustyDoes(t *testing.T) {
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:1\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: oidc\nstringData:\n  clientSecret: hunter2-oidc\n"
	cases := map[string]map[string]string{
		// A JSON 6902 patch file is a list of operations.
		"JSON 6902 patch file": {
			"kustomization.yaml": "resources: [deploy.yaml]\npatches:\n- path: patch.yaml\n  target:\n    kind: Deployment\n    name: app\n",
			"deploy.yaml":        deploy,
			"patch.yaml":         "- op: add\n  path: /spec/template/spec/containers/0/args\n  value: [--oidc-client-secret-file=/etc/oidc/clientSecret]\n",
		},
		// A replacements file is a list of replacements.
		"replacements file selecting a Secret": {
			"kustomization.yaml": "resources: [deploy.yaml, secret.yaml]\nreplacements:\n- path: replacements.yaml\n",
			"deploy.yaml":        deploy,
			"secret.yaml":        secret,
			"replacements.yaml":  "- source:\n    kind: Secret\n    name: oidc\n    fieldPath: metadata.name\n  targets:\n  - select:\n      kind: Deployment\n    fieldPaths:\n    - spec.template.spec.containers.0.image\n",
		},
		// The old field for the same list.
		"patchesJson6902 file": {
			"kustomization.yaml": "resources: [deploy.yaml]\npatchesJson6902:\n- path: patch.yaml\n  target:\n    group: apps\n    version: v1\n    kind: Deployment\n    name: app\n",
			"deploy.yaml":        deploy,
			"patch.yaml":         "- op: add\n  path: /metadata/annotations\n  value: {note: reads the Secret oidc}\n",
		},
		// A generator's input file, read as a ConfigMap's data.
		"configMapGenerator file": {
			"kustomization.yaml": "configMapGenerator:\n- name: users\n  files: [users.yaml]\n",
			"users.yaml":         "- name: alice\n  role: reads the Secret oidc\n",
		},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			in := map[string]string{}
			for p, c := range files {
				in["app/"+p] = c
			}
			s := testkit.Snapshot(t, "test", in)
			want, err := renderOne(s.FS, "app", krusty.MakeDefaultOptions())
			if err != nil {
				t.Fatalf("krusty fails, so this case tests nothing: %v", err)
			}
			got := renderAll(t, s)["app"]
			if got.Err != nil {
				t.Fatalf("kplan fails where krusty renders %d objects: %v", len(want), got.Err)
			}
			var a, b []string
			for _, o := range want {
				a = append(a, o.MustString())
			}
			for _, o := range got.Objects {
				b = append(b, o.MustString())
			}
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				t.Errorf("kplan renders:\n%s\nkrusty:\n%s", strings.Join(b, "---\n"), strings.Join(a, "---\n"))
			}
		})
	}
}

// The scrubber reads every file a render reads, as the kustomization or
// as another file: whatever a file holds, it never panics, and a value it
// gathers is hidden from a message.
func FuzzScrubberCollect(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/fuzz-scrub/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s scrubber
		s.collect("/repo/app/kustomization.yaml", data)
		s.collect("/repo/app/patch.yaml", data)
		s.collect("/repo/app/creds.yaml", data)
		s.mu.Lock()
		values := slices.Collect(maps.Keys(s.values))
		s.mu.Unlock()
		for _, v := range values {
			// Values the message's own words or the mark could spell
			// again are not checked.
			plain := !strings.ContainsFunc(v, func(r rune) bool {
				return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
			})
			if len(v) >= minSecret && plain && !strings.Contains("value "+hidden+" is wrong", v) &&
				strings.Contains(s.scrub("value "+v+" is wrong"), v) {
				t.Fatalf("%q gathered, not hidden", v)
			}
		}
	})
}
