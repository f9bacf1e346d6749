package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every command answers --help on stdout with exit 0, and says the exit
// codes.
func TestHelpForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"diff", "--help"}, {"render", "-h"}, {"apply", "--help"},
		{"init", "--help"}, {"migrate", "--help"}, {"demo", "--help"}, {"version", "--help"}, {"merge", "--help"}, {"approval", "--help"}, {"completion", "--help"}, {"help", "diff"}} {
		out, stderr, err := kplan(t, nil, args...)
		if err != nil || !strings.Contains(out, "Usage:") || stderr != "" {
			t.Errorf("kplan %q: err %v, stderr %q, stdout without usage:\n%s", args, err, stderr, out)
		}
		if args[0] != "completion" && args[0] != "help" && !strings.Contains(out, "2  diff and merge --exit-code only") {
			t.Errorf("kplan %q: help does not document the exit codes:\n%s", args, out)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	out, _, err := kplan(t, nil, "version")
	if err != nil || !strings.HasPrefix(out, "kplan ") {
		t.Errorf("kplan version: %v %q", err, out)
	}
	if out2, _, err := kplan(t, nil, "--version"); err != nil || out2 != out {
		t.Errorf("kplan --version = %q (%v), want %q", out2, err, out)
	}
	out, _, err = kplan(t, nil, "completion", "bash")
	if err != nil || !strings.Contains(out, "__start_kplan") {
		t.Errorf("kplan completion bash: %v", err)
	}
}

// Usage errors exit 1 (any error is 1; 2 only means changes under
// --exit-code), with a message saying what is wrong.
func TestUsageErrorsExitOne(t *testing.T) {
	for _, args := range [][]string{{"diff", "--bogus"}, {"nonsense"}, {"apply"}, {"apply", "a", "b"}, {"diff", "--base", "x", "-o", "xml"}, {"version", "extra"}} {
		_, _, err := kplan(t, nil, args...)
		var exit exitError
		if err == nil || errors.As(err, &exit) {
			t.Errorf("kplan %q: err %v, want an error message (exit 1)", args, err)
		}
	}
}

// Flags go anywhere on the line; positional overlays, -o and -C work.
func TestDiffFlagsAnywhere(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {k: %s}\n"
	dir := commitRepo(t,
		map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": strings.Replace(cm, "%s", "v1", 1),
			"other/kustomization.yaml": "resources: [cm.yaml]\n", "other/cm.yaml": strings.Replace(cm, "%s", "v1", 1)},
		map[string]string{"app/cm.yaml": strings.Replace(cm, "%s", "v2", 1), "other/cm.yaml": strings.Replace(cm, "%s", "v2", 1)})
	t.Chdir(dir)
	out, stderr, err := kplan(t, nil, "diff", "--base", "main~1", "app", "-o", "json", "--head", "main")
	if err != nil {
		t.Fatalf("kplan diff --base main~1 app -o json: %v %s", err, stderr)
	}
	var p jsonPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(p.Overlays) != 1 || p.Overlays[0].Path != "app" || p.Overlays[0].Status != "changed" {
		t.Errorf("planned %+v, want only app, changed", p.Overlays)
	}
	if _, _, err := kplan(t, nil, "diff", "app", "--exit-code", "--base=main~1", "--head=main"); !errors.Is(err, exitError(2)) {
		t.Errorf("--exit-code with changes: %v, want exit 2", err)
	}
}

// render takes absolute and relative paths from anywhere.
func TestRenderAbsoluteAndRelativePaths(t *testing.T) {
	repo := initRepo(t, map[string]string{
		"base/kustomization.yaml":       "resources: [cm.yaml]\n",
		"base/cm.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"overlays/x/kustomization.yaml": "resources: [../../base]\nnamePrefix: x-\n",
	})
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	for _, dir := range []string{filepath.Join(repo, "overlays/x"), mustRel(t, elsewhere, filepath.Join(repo, "overlays/x"))} {
		out, stderr, err := kplan(t, nil, "render", dir)
		if err != nil || !strings.Contains(out, "name: x-a") {
			t.Errorf("kplan render %s: %v %s\n%s", dir, err, stderr, out)
		}
	}
	if _, _, err := kplan(t, nil, "render", filepath.Join(repo, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("render of a missing directory: %v, want an error naming it", err)
	}
}

func mustRel(t *testing.T, from, to string) string {
	t.Helper()
	r, err := filepath.Rel(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func applyRepo(t *testing.T) string {
	return initRepo(t, map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml, resourcegroup.yaml]\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"app/resourcegroup.yaml": rg("inventory-app", ""),
	})
}

// A server that accepts connections and never answers fails the apply
// within its --timeout.
func TestApplyTimeoutAgainstASilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://" + l.Addr().String() + "'}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(applyRepo(t))
	start := time.Now()
	out, _, err := kplan(t, nil, "apply", "app", "--kubeconfig", kubeconfig, "--timeout", "3s")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "--timeout 3s") {
		t.Errorf("apply against a silent server: %v, want an error naming --timeout", err)
	}
	if took > 30*time.Second {
		t.Errorf("apply against a silent server took %s with --timeout 3s", took)
	}
	if strings.Contains(out, "0 failed") {
		t.Errorf("apply printed a summary before failing:\n%s", out)
	}
}

// No kubeconfig and not in a cluster: say so, never try localhost:8080.
func TestApplyWithoutAnyCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Chdir(applyRepo(t))
	_, _, err := kplan(t, nil, "apply", "app")
	if err == nil || !strings.Contains(err.Error(), "KUBECONFIG") || !strings.Contains(err.Error(), "~/.kube/config") {
		t.Errorf("apply without a cluster: %v, want an error naming KUBECONFIG and ~/.kube/config", err)
	}
}

// Shell completion completes flag values: output formats (from
// report.Formats), diff styles and the repository's refs; it completed
// none.
func TestCompletionOfFlagValues(t *testing.T) {
	dir := commitRepo(t, map[string]string{"app/kustomization.yaml": "resources: []\n"}, map[string]string{"app/README.md": "x\n"})
	git(t, dir, "branch", "feature-x")
	git(t, dir, "tag", "v1.2.3")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"diff", "-o", ""}, []string{"text", "markdown", "md", "json"}},
		{[]string{"merge", "--output", "m"}, []string{"markdown", "md"}},
		{[]string{"demo", "-o", ""}, []string{"text", "markdown", "json"}},
		{[]string{"diff", "--diff-style", ""}, []string{"fields", "unified"}},
		{[]string{"render", "--load-restrictor", ""}, []string{"LoadRestrictionsRootOnly", "LoadRestrictionsNone"}},
		{[]string{"diff", "-C", dir, "--base", ""}, []string{"main", "feature-x", "v1.2.3", "HEAD"}},
		{[]string{"diff", "-C", dir, "--head", "fe"}, []string{"feature-x"}},
	} {
		out, stderr, err := kplan(t, nil, append([]string{"__complete"}, tc.args...)...)
		if err != nil {
			t.Fatalf("kplan __complete %q: %v %s", tc.args, err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := lines[:len(lines)-1] // the last line is the directive
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("kplan %q<TAB> offers %q, want %q among them", tc.args, got, w)
			}
		}
		if strings.HasPrefix(tc.args[len(tc.args)-1], "fe") && len(got) != 1 {
			t.Errorf("kplan %q<TAB> offers %q, want only what the prefix matches", tc.args, got)
		}
	}
}
