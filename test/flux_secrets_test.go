package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/test/gittest"
)

// secretContexts are testdata/flux-secrets' app directories: the YAML
// context the Secret's value lands in.
var secretContexts = []string{"plain", "quoted", "single", "prefixed", "key", "block"}

// fluxSecretsRepo is testdata/flux-secrets committed twice: main~1 as
// is, main adding a Secret per value and a Flux Kustomization per value
// and context (secretContexts' directories) substituting it as S. It
// returns the directory.
func fluxSecretsRepo(t *testing.T, values, contexts []string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../testdata/flux-secrets")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "apps")
	var secrets, targets bytes.Buffer
	for i, v := range values {
		data, err := sigsyaml.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": fmt.Sprintf("s-%d", i), "namespace": "flux-system"},
			"stringData": map[string]string{"S": v},
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&secrets, "---\n%s", data)
		for _, c := range contexts {
			fmt.Fprintf(&targets, `---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: v-%[1]d-%[2]s, namespace: flux-system}
spec:
  interval: 1h
  path: ./app/%[2]s
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  postBuild:
    substitute: {ID: "%[1]d"}
    substituteFrom: [{kind: Secret, name: s-%[1]d}]
`, i, c)
		}
	}
	for name, data := range map[string][]byte{"secrets.yaml": secrets.Bytes(), "targets.yaml": targets.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, "clusters/dev", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "secrets")
	return dir
}

// secretForms are what Flux's substitution and YAML re-parse can make of
// a Secret's value: lines joined, cut at " #", trimmed, unquoted.
func secretForms(v string) []string {
	joined := strings.ReplaceAll(v, "\n", "")
	forms := []string{v, joined, strings.TrimSpace(joined)}
	if cut, _, ok := strings.Cut(joined, " #"); ok {
		forms = append(forms, cut, strings.TrimSpace(cut))
	}
	return append(forms, strings.NewReplacer(`"`, "", `'`, "", `\`, "", `\\`, `\`).Replace(joined))
}

// Secret values that Flux's YAML re-parse cuts (" #"), trims (a leading
// space), unquotes ("\"", "\\"), joins (lines), and a generated set of
// printable values with YAML's significant characters, substituted into
// every YAML context of testdata/flux-secrets: kplan diff's text,
// Markdown and JSON print no substring of 4 characters of any value or
// its forms that the same plan with harmless values does not print, and
// they do print the fields, masked.
func TestFluxSecretValuesNeverPrinted(t *testing.T) {
	kplan := buildKplan(t)
	values := []string{"abc #tail", " leading", `a"b\c`, `a"b\\c`, "line one\nline two #x"}
	// Generated: random words joined by what YAML reads as syntax, so
	// that each value has text of its own on both sides of a cut.
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	seps := []string{" #", " # ", ": ", `"`, "'", `\`, `\"`, " ", ", ", "[", "]", "{", "}", " &", " *", "!", "%", "@", "`", " |", ">", "\t"}
	rng := rand.New(rand.NewPCG(22, 8))
	word := func() string {
		b := make([]byte, 4+rng.IntN(6))
		for j := range b {
			b[j] = alnum[rng.IntN(len(alnum))]
		}
		return string(b)
	}
	for i := range 24 {
		v := word() + seps[rng.IntN(len(seps))] + word()
		if i%3 == 0 {
			v = seps[rng.IntN(len(seps))] + v
		}
		if i%4 == 0 {
			v += seps[rng.IntN(len(seps))] + word()
		}
		values = append(values, v)
	}
	harmless := make([]string, len(values))
	for i := range harmless {
		harmless[i] = "0"
	}
	// diff runs kplan diff -o format on the repositories of values and of
	// harmless ones: what it prints, and what it prints with no Secret.
	diff := func(format string, values, contexts []string) (out, allowed string) {
		t.Helper()
		var outs [2]string
		for i, dir := range []string{fluxSecretsRepo(t, values, contexts), fluxSecretsRepo(t, harmless[:len(values)], contexts)} {
			cmd := exec.Command(kplan, "diff", "-C", dir, "--base", "main~1", "--head", "main", "-o", format)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			// Exit status 1: some values break the YAML, and Flux would
			// fail those targets too; their errors are printed.
			if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("kplan diff -o %s: %v\n%s", format, err, stderr.String())
			}
			outs[i] = stdout.String() + stderr.String()
		}
		// kplan's masks and errors are text no Secret made either.
		return outs[0], outs[1] + "\n(value from a Secret, hidden)\npostBuild substitution fails with the values of its Secret variables (the error is not shown: it may quote them)"
	}
	check := func(format string, values []string, out, allowed string) {
		t.Helper()
		for _, v := range values {
			for _, f := range secretForms(v) {
				r := []rune(f)
				for i := 0; i+4 <= len(r); i++ {
					if g := string(r[i : i+4]); strings.Contains(out, g) && !strings.Contains(allowed, g) {
						t.Errorf("-o %s prints %q of the Secret value %q", format, g, v)
						break
					}
				}
			}
		}
	}
	for _, format := range []string{"text", "json"} {
		out, allowed := diff(format, values, secretContexts)
		if n := strings.Count(out, " key S, hidden)"); n < len(values)*len(secretContexts)/2 {
			t.Errorf("-o %s prints %d masked fields, want most of the %d targets' fields:\n%s", format, n, len(values)*len(secretContexts), out)
		}
		check(format, values, out, allowed)
	}
	// Markdown, a comment's size, prints the added objects' YAML for a
	// few overlays only: the five values the issue names, in two contexts.
	named := values[:5]
	out, allowed := diff("markdown", named, []string{"plain", "prefixed"})
	if n := strings.Count(out, " key S, hidden)"); n < len(named)*2 {
		t.Errorf("-o markdown prints %d masked fields, want %d:\n%s", n, len(named)*2, out)
	}
	check("markdown", named, out, allowed)
	out, allowed = diff("markdown", values, secretContexts)
	check("markdown", values, out, allowed)
}

// A Secret's value that postBuild substitutes into a ConfigMap changes,
// and nothing else does: the ConfigMap is planned changed (Flux changes
// it), its field shown as the Secret's key, hidden, and changed; no
// output (text, Markdown, JSON, the debug log) holds either value, and
// the target's digest is the same whatever the value (it is taken over
// the masked objects).
func TestFluxSecretValueChangePlannedHidden(t *testing.T) {
	kplan := buildKplan(t)
	values := []string{"first-Val#1234", "second-Val#5678", "third-Val#9012"}
	fx := gittest.Copy(t, "../testdata/flux-secrets")
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(fx.Dir, "clusters/dev", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("secrets.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: app-secret, namespace: flux-system}\nstringData: {S: \""+values[0]+"\"}\n")
	write("targets.yaml", `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app, namespace: flux-system}
spec:
  interval: 1h
  path: ./app/prefixed
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  postBuild:
    substitute: {ID: "0"}
    substituteFrom: [{kind: Secret, name: app-secret}]
`)
	fx.Init("app")
	for _, v := range values[1:] {
		fx.Edit("clusters/dev/secrets.yaml", values[0], v)
		values[0] = v
	}
	values = []string{"first-Val#1234", "second-Val#5678", "third-Val#9012"}
	run := func(base, head, format string) string {
		t.Helper()
		cmd := exec.Command(kplan, "diff", "-C", fx.Dir, "--base", base, "--head", head, "-o", format)
		cmd.Env = append(os.Environ(), "KPLAN_DEBUG=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kplan diff -o %s: %v\n%s", format, err, stderr.String())
		}
		out := stdout.String() + stderr.String()
		for _, v := range values {
			for _, part := range []string{v, strings.Split(v, "#")[0], strings.Split(v, "#")[1]} {
				if strings.Contains(out, part) {
					t.Errorf("kplan diff -o %s %s..%s prints %q of a Secret's value:\n%s", format, base, head, part, out)
				}
			}
		}
		return stdout.String()
	}
	type plan struct {
		Overlays []struct {
			Path, Status string
			Changed      []string
			Fields       map[string][]struct{ Path, Old, New string }
			HeadDigest   string `json:"headDigest"`
		}
	}
	digests := map[string]bool{}
	for _, rev := range [][2]string{{"main~2", "main~1"}, {"main~1", "main"}} {
		var p plan
		if err := json.Unmarshal([]byte(run(rev[0], rev[1], "json")), &p); err != nil {
			t.Fatal(err)
		}
		var app, system bool
		for _, o := range p.Overlays {
			switch o.Path {
			case "flux-system/app":
				app = true
				const mask = "(value from Secret flux-system/app-secret key S, hidden"
				var fields []string
				for k, fs := range o.Fields {
					for _, f := range fs {
						fields = append(fields, fmt.Sprintf("%s %s: %s → %s", k, f.Path, f.Old, f.New))
					}
				}
				want := fmt.Sprintf(`_v1_ConfigMap|app|prefixed-0 data.value: Bearer %[1]s) (rotated) → Bearer %[1]s, changed) (rotated)`, mask)
				if o.Status != "changed" || len(fields) != 1 || !strings.HasSuffix(fields[0], want) {
					t.Errorf("%s..%s: app is %s with fields %q; want changed, its ConfigMap's field %s", rev[0], rev[1], o.Status, fields, want)
				}
				digests[o.HeadDigest] = true
			case "flux-system/flux-system":
				system = true
				if o.Status != "changed" || len(o.Changed) != 1 || !strings.Contains(o.Changed[0], "Secret|flux-system|app-secret") {
					t.Errorf("%s..%s: flux-system is %s changing %v; want the Secret alone changed", rev[0], rev[1], o.Status, o.Changed)
				}
			}
		}
		if !app || !system {
			t.Fatalf("%s..%s plans %+v; want the targets app and flux-system", rev[0], rev[1], p.Overlays)
		}
		for _, format := range []string{"text", "markdown"} {
			if out := run(rev[0], rev[1], format); !strings.Contains(out, "key S, hidden, changed)") {
				t.Errorf("-o %s does not show the field changed:\n%s", format, out)
			}
		}
	}
	if len(digests) != 1 {
		t.Errorf("app's head digests %v: one per Secret value, want the same digest for every value (nothing of the value in it)", digests)
	}
}
