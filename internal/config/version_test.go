package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kplan-dev/kplan/internal/testkit"
)

const versionedBody = `repositories:
  - name: o/r
    branches:
      - name: main
        targets:
          - {name: t, overlay: o}
`

// The file names its format: apiVersion kplan.dev/v1alpha1, kind
// WebhookConfig. Today's unversioned files still load, with a warning
// naming the file; another version or kind is refused whole, naming the
// file and line, before any field of it is judged.
func TestConfigVersion(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		warn, err  string
	}{
		{name: "versioned", head: "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\n"},
		{name: "unversioned", warn: `w.yaml has no apiVersion and kind: reading it as kplan.dev/v1alpha1 WebhookConfig; add "apiVersion: kplan.dev/v1alpha1" and "kind: WebhookConfig"`},
		{name: "other version", head: "apiVersion: kplan.dev/v2\nkind: WebhookConfig\nnewField: x\n",
			err: `w.yaml:1: apiVersion: "kplan.dev/v2" is not a version this kplan-webhook reads (kplan.dev/v1alpha1)`},
		{name: "other kind", head: "apiVersion: kplan.dev/v1alpha1\nkind: Webhook\n", err: `w.yaml:2: kind: "Webhook" is not WebhookConfig, the webhook's configuration`},
		{name: "a repository's file", head: "apiVersion: kplan.dev/v1alpha1\nkind: Repository\n", err: "kind Repository is a repository's .kplan.yaml"},
		{name: "kind alone", head: "kind: WebhookConfig\n", err: "w.yaml:1: apiVersion: required with kind"},
		{name: "apiVersion alone", head: "apiVersion: kplan.dev/v1alpha1\n", err: "w.yaml:1: kind: required with apiVersion"},
		{name: "a list", head: "apiVersion: [kplan.dev/v1alpha1]\nkind: WebhookConfig\n", err: "w.yaml:1: apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("w.yaml", []byte(tc.head+versionedBody))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "newField") {
					t.Errorf("a file of another version is judged field by field: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Repositories) != 1 {
				t.Errorf("repositories = %+v", cfg.Repositories)
			}
			switch {
			case tc.warn == "" && len(cfg.Warnings) > 0:
				t.Errorf("warnings = %q, want none", cfg.Warnings)
			case tc.warn != "" && (len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], tc.warn)):
				t.Errorf("warnings = %q, want one containing %q", cfg.Warnings, tc.warn)
			}
		})
	}
}

var knownFields = regexp.MustCompile(`unknown field \(known: ([^)]*)\)`)

// example.yaml is the reference: it sets every field the parser knows, in
// every place it knows it (the parser's own list of known fields, from
// its error for an unknown one), and unknown fields fail TestLoadExample.
func TestExampleHasEveryField(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys[n.Content[i].Value] = true
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	const tmpl = `apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
ROOT
repositories:
  - name: o/r
    REPO
    branches:
      - name: main
        BRANCH
        targets:
          - name: t
            overlay: o
            TARGET
            inventory: {name: n, namespace: ns, INVENTORY}
      - name: other
        targetsFrom: .kplan.yaml
        environments:
          prod: {ENVIRONMENT}
`
	places := []string{"ROOT", "REPO", "BRANCH", "TARGET", "INVENTORY", "ENVIRONMENT"}
	for _, place := range places {
		file := tmpl
		for _, p := range places {
			v := ""
			if p == place {
				v = "zzunknown: 1"
			}
			file = strings.Replace(file, p, v, 1)
		}
		_, err := Parse("w.yaml", []byte(file))
		m := knownFields.FindStringSubmatch(errString(err))
		if m == nil {
			t.Fatalf("%s: no list of known fields in %v", place, err)
		}
		for _, f := range strings.Split(m[1], ", ") {
			if !keys[f] {
				t.Errorf("example.yaml does not set %s, a field of %s: add it with its default and meaning", f, strings.ToLower(place))
			}
		}
	}
	if !keys["apiVersion"] || !keys["kind"] {
		t.Error("example.yaml is not versioned")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// docs/webhook.md shows example.yaml as it is: one reference, copied by
// go test -update.
func TestReferenceIsTheExample(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Generated(t, "../../docs/webhook.md", "internal/config/example.yaml", "```yaml\n"+string(data)+"```\n")
}
