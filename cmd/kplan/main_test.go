package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/test/gittest"
)

func kplan(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// git runs the git command line (shared with other packages' tests).
var git = gittest.Git

var write = gittest.Write

type jsonPlan struct {
	Overlays []jsonOverlay
	Totals   struct{ Added, Changed, Pruned, ChangedOverlays, Overlays, Failed, IntroducedFailures, Dangerous int }
}

// overlay returns the plan of the overlay at path.
func (p jsonPlan) overlay(t *testing.T, path string) jsonOverlay {
	t.Helper()
	for _, o := range p.Overlays {
		if o.Path == path {
			return o
		}
	}
	t.Fatalf("the plan has no overlay %s: %+v", path, p.Overlays)
	return jsonOverlay{}
}

type jsonOverlay = struct {
	Path     string
	Status   string
	Added    []string
	Pruned   []string
	Changed  []string
	Detached []string
	Replaced []struct{ Base, Head string }
	Error    string
	// The plan's truth about the merge (truth_test.go).
	Fields map[string][]struct {
		Path, Op string
		// Old and New are typed values; the tests read their JSON text.
		Old, New rawJSON
	}
	Dangerous           []string
	Failure             string
	Targets             []string
	MovedFrom           string
	SharedInventoryWith []string
	Base, Head          struct {
		Hash      string
		Inventory *struct{ Kind, Namespace, Name, ID string }
	}
}

// rawJSON is a value of the JSON report as its JSON text: "\"web:1\"" for
// the string web:1, "1" for the number.
type rawJSON string

func (r *rawJSON) UnmarshalJSON(data []byte) error {
	var b bytes.Buffer
	err := json.Compact(&b, data)
	*r = rawJSON(b.String())
	return err
}

func diffJSON(t *testing.T, args ...string) jsonPlan {
	t.Helper()
	out, stderr, err := kplan(t, nil, append([]string{"diff", "--format", "json"}, args...)...)
	if err != nil && !errors.Is(err, exitError(1)) {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	var p jsonPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return p
}

// The components user story in a real repository, base and head commits.
func TestDiffComponentsStory(t *testing.T) {
	repo, err := demo.NewRepo(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := diffJSON(t, "-C", repo.Dir, "--base", repo.Base, "--head", repo.Head)
	byPath := map[string]int{}
	for i, o := range p.Overlays {
		byPath[o.Path] = i
	}
	dev := p.Overlays[byPath["overlays/dev"]]
	if len(dev.Added) != 1 || !strings.HasPrefix(dev.Added[0], "~G_v1_Secret|default|ldappass-") {
		t.Errorf("dev adds %q, want the ldappass Secret", dev.Added)
	}
	if !slices.Equal(dev.Changed, []string{"apps_v1_Deployment|default|example"}) || len(dev.Replaced) != 2 || len(dev.Pruned) != 0 {
		t.Errorf("dev: changed %q replaced %+v pruned %q", dev.Changed, dev.Replaced, dev.Pruned)
	}
	ent := p.Overlays[byPath["overlays/enterprise"]]
	if ent.Status != "removed" || len(ent.Pruned) != 4 {
		t.Errorf("enterprise: %s, pruned %q", ent.Status, ent.Pruned)
	}
	com := p.Overlays[byPath["overlays/community"]]
	if len(com.Replaced) != 1 || !strings.HasPrefix(com.Replaced[0].Base, "~G_v1_Secret|default|recaptcha-") {
		t.Errorf("community: replaced %+v", com.Replaced)
	}
	if p.Totals.Overlays != 3 || p.Totals.ChangedOverlays != 3 {
		t.Errorf("totals %+v", p.Totals)
	}

	// The same plan as text, by branch names, with the head in the work tree.
	git(t, repo.Dir, "branch", "base", repo.Base)
	out, _, err := kplan(t, nil, "diff", "-C", repo.Dir, "--base", "base")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"overlays/enterprise (overlay removed)", "+ Secret ldappass-", "data.secret_key.txt (value hidden)", "Plan: 1 to add, 5 to change, 4 to prune in 3 of 3 overlays."} {
		if !strings.Contains(out, want) {
			t.Errorf("text plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-key-rotated") || strings.Contains(out, "c2VjcmV0LWtleS1yb3RhdGVk") {
		t.Error("text plan shows a Secret value")
	}
}

func TestDiffWorkingTreeBrokenOverlayAndDetach(t *testing.T) {
	dir := t.TempDir()
	cm := func(name, extra string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + extra + "data:\n  k: v\n"
	}
	write(t, dir, map[string]string{
		"a/kustomization.yaml": "resources: [one.yaml, two.yaml]\n",
		"a/one.yaml":           cm("one", ""),
		"a/two.yaml":           cm("two", "  annotations:\n    client.lifecycle.config.k8s.io/deletion: detach\n"),
		"b/kustomization.yaml": "resources: [x.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [a=1]\n",
		"b/x.yaml":             cm("x", ""),
	})
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	// Uncommitted head: a drops the detach-annotated object, b's generator
	// input changes, and a new overlay c is broken.
	write(t, dir, map[string]string{
		"a/kustomization.yaml": "resources: [one.yaml]\n",
		"b/kustomization.yaml": "resources: [x.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [a=2]\n",
		"c/kustomization.yaml": "resources: [missing.yaml]\n",
	})
	p := diffJSON(t, "-C", dir, "--base", "main")
	got := map[string]string{}
	for _, o := range p.Overlays {
		got[o.Path] = o.Status
		switch o.Path {
		case "a":
			if len(o.Pruned) != 0 || !slices.Equal(o.Detached, []string{"~G_v1_ConfigMap|default|two"}) {
				t.Errorf("a: pruned %q, left in cluster %q", o.Pruned, o.Detached)
			}
		case "b":
			if len(o.Replaced) != 1 || len(o.Added)+len(o.Pruned) != 0 {
				t.Errorf("b: the generated ConfigMap must be one replacement: %+v", o)
			}
		case "c":
			if !strings.Contains(o.Error, "missing.yaml") {
				t.Errorf("c: error %q does not name the missing file", o.Error)
			}
		}
	}
	if got["a"] != "changed" || got["b"] != "changed" || got["c"] != "error" {
		t.Errorf("statuses = %v", got)
	}
	// A failed head overlay fails the command unless asked not to.
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main"); !errors.Is(err, exitError(1)) {
		t.Errorf("diff with a broken overlay: err %v, want exit 1", err)
	}
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main", "--fail-on-error=false", "--exclude", "c"); err != nil {
		t.Errorf("diff without the broken overlay: %v", err)
	}
}

func TestDiffErrors(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	cases := [][]string{
		{"diff", "-C", dir},
		{"diff", "-C", dir, "--base", "nope"},
		{"diff", "-C", t.TempDir(), "--base", "main"},
		{"diff", "-C", dir, "--base", "HEAD", "--format", "xml"},
		{"nonsense"},
	}
	for _, args := range cases {
		if _, _, err := kplan(t, nil, args...); err == nil {
			t.Errorf("kplan %q succeeded", args)
		}
	}
}

// kplan render emits the seed's inventory ConfigMap after the objects.
func TestRenderSeedInventory(t *testing.T) {
	dir := t.TempDir()
	src := "../../internal/inventory/testdata/mysql"
	for _, f := range []string{"kustomization.yaml", "deployment.yaml", "service.yaml"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, map[string]string{"app/" + f: string(data)})
	}
	t.Chdir(dir)
	out, stderr, err := kplan(t, nil, "render", "app")
	if err != nil {
		t.Fatalf("render: %v %s", err, stderr)
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("render printed %d objects, want 4:\n%s", len(docs), out)
	}
	last := docs[3]
	for _, want := range []string{"kind: ConfigMap", "name: root-cm", "namespace: default",
		`kustomize.config.k8s.io/Inventory: '{"current":{"apps_v1_Deployment|default|mysql":null,"~G_v1_Secret|default|pass-`,
		`"~G_v1_Service|default|mysql":null}}'`, "kustomize.config.k8s.io/InventoryHash: "} {
		if !strings.Contains(last, want) {
			t.Errorf("inventory ConfigMap lacks %q:\n%s", want, last)
		}
	}
}
