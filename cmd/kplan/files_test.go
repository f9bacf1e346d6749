package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests here run kplan on real repositories whose files kyaml's
// in-memory file system could not hold or that kustomize refuses.

func configMap(name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  " + data + "\n"
}

// commitAll commits the work tree and returns the commit.
func commitAll(t *testing.T, dir, msg string) string {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return git(t, dir, "rev-parse", "HEAD")
}

// statuses maps each overlay of a plan to its status.
func statuses(p jsonPlan) map[string]string {
	m := map[string]string{}
	for _, o := range p.Overlays {
		m[o.Path] = o.Status
	}
	return m
}

// renderIn runs kplan render in dir.
func renderIn(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	t.Chdir(dir)
	return kplan(t, nil, append([]string{"render"}, args...)...)
}

// Names with @ + ( ) space and é, in overlay directories, resource files
// and files no overlay reads, plan and render like any other.
func TestNamesGitStoresPlanAndRender(t *testing.T) {
	const overlay = "apps/cert-manager@v1.14 (prod)+é"
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		overlay + "/kustomization.yaml":  "resources: [\"cm (a)+b@c é.yaml\"]\nsecretGenerator: [{name: tls, files: [ca.pem=tls+ca.pem]}]\n",
		overlay + "/cm (a)+b@c é.yaml":   configMap("certs", "k: one"),
		overlay + "/tls+ca.pem":          "pem\n",
		"plain/kustomization.yaml":       "resources: [cm.yaml]\n",
		"plain/cm.yaml":                  configMap("plain", "k: v"),
		"docs/Run book (prod).md":        "# run book\n",
		"docs/é+@ (x)/notes about it.md": "notes\n",
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{overlay + "/cm (a)+b@c é.yaml": configMap("certs", "k: two"), "docs/Run book (prod).md": "# run book, v2\n"})
	head := commitAll(t, dir, "head")

	var plans []map[string]string
	for _, extra := range [][]string{{"--full"}, nil} {
		p := diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", head}, extra...)...)
		if o := p.overlay(t, overlay); o.Status != "changed" || len(o.Changed) != 1 || o.Error != "" {
			t.Errorf("diff %q: %s is %s %q %q, want one object changed", extra, overlay, o.Status, o.Changed, o.Error)
		}
		if s := statuses(p); s["plain"] != "unchanged" || len(s) != 2 {
			t.Errorf("diff %q: statuses %v", extra, s)
		}
		plans = append(plans, statuses(p))
	}
	if plans[0][overlay] != plans[1][overlay] {
		t.Errorf("--full %v and changed-only %v differ", plans[0], plans[1])
	}

	out, stderr, err := renderIn(t, dir, overlay, "plain")
	if err != nil {
		t.Fatalf("kplan render: %v\n%s", err, stderr)
	}
	for _, want := range []string{"name: certs", "k: two", "ca.pem: cGVtCg==", "name: plain"} {
		if !strings.Contains(out, want) {
			t.Errorf("kplan render lacks %q:\n%s", want, out)
		}
	}
}

// A symlinked base whose directory holds another symlink: resolved in map
// order, the same two commits planned "changed" or "error" from run to
// run. Twenty runs give one answer, the right one.
func TestNestedSymlinksPlanTheSameEveryRun(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"base/kustomization.yaml":    "resources: [linked.yaml]\n",
		"base/real.yaml":             configMap("real", "k: one"),
		"base/linked.yaml":           "->real.yaml",
		"overlay/kustomization.yaml": "resources: [base]\n",
		"overlay/base":               "->../base",
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{"base/real.yaml": configMap("real", "k: two")})
	head := commitAll(t, dir, "head")
	for run := range 20 {
		for _, extra := range [][]string{{"--full"}, nil} {
			p := diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", head}, extra...)...)
			o := p.overlay(t, "overlay")
			if o.Status != "changed" || len(o.Changed) != 1 || o.Error != "" {
				t.Fatalf("run %d %q: overlay is %s, changed %q, error %q; want its ConfigMap changed", run, extra, o.Status, o.Changed, o.Error)
			}
		}
	}
}

// A file outside the kustomization root, through a symlink or through
// "../", fails that overlay with kustomize's reason under the default
// root-only load restrictor, and renders under LoadRestrictionsNone.
func TestOutsideTheRootFailsUnderRootOnly(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"shared/cm.yaml":                configMap("shared", "k: one"),
		"viasymlink/kustomization.yaml": "resources: [cm.yaml]\n",
		"viasymlink/cm.yaml":            "->../shared/cm.yaml",
		"viadotdot/kustomization.yaml":  "resources: [../shared/cm.yaml]\n",
		"inside/kustomization.yaml":     "resources: [cm.yaml]\n",
		"inside/cm.yaml":                configMap("inside", "k: v"),
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{"shared/cm.yaml": configMap("shared", "k: two")})
	head := commitAll(t, dir, "head")
	for _, o := range []string{"viasymlink", "viadotdot"} {
		for _, extra := range [][]string{{"--full"}, nil} {
			p := diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", head}, extra...)...)
			got := p.overlay(t, o)
			if got.Status != "error" || !strings.Contains(got.Error, "security; file '/repo/") || !strings.Contains(got.Error, "is not in or below '/repo/"+o+"'") {
				t.Errorf("root only %q: %s is %s, %q; want kustomize's security error", extra, o, got.Status, got.Error)
			}
			if s := p.overlay(t, "inside").Status; s != "unchanged" {
				t.Errorf("root only %q: inside is %s", extra, s)
			}
			p = diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", head, "--load-restrictor", "LoadRestrictionsNone"}, extra...)...)
			if got := p.overlay(t, o); got.Status != "changed" || len(got.Changed) != 1 {
				t.Errorf("LoadRestrictionsNone %q: %s is %s %q, want its ConfigMap changed", extra, o, got.Status, got.Error)
			}
		}
		_, _, err := renderIn(t, dir, o)
		if err == nil || !strings.Contains(err.Error(), "security; file") {
			t.Errorf("kplan render %s: %v, want kustomize's security error", o, err)
		}
		out, stderr, err := renderIn(t, dir, "--load-restrictor", "LoadRestrictionsNone", o)
		if err != nil || !strings.Contains(out, "name: shared") {
			t.Errorf("kplan render --load-restrictor LoadRestrictionsNone %s: %v %s\n%s", o, err, stderr, out)
		}
	}
}

// "../" above the repository's top is not clamped to the top: the file
// there does not exist, as in a checkout where it lies outside.
func TestPathAboveTheRepositoryFails(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"cm.yaml":               configMap("top", "k: v"),
		"o/kustomization.yaml":  "resources: [../../cm.yaml]\n",
		"ok/kustomization.yaml": "resources: [cm.yaml]\n",
		"ok/cm.yaml":            configMap("ok", "k: v"),
	})
	base := commitAll(t, dir, "base")
	for _, extra := range [][]string{{"--full"}, {"--full", "--load-restrictor", "LoadRestrictionsNone"}} {
		p := diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", base}, extra...)...)
		if o := p.overlay(t, "o"); o.Status != "error" || !strings.Contains(o.Error, "'/cm.yaml' doesn't exist") {
			t.Errorf("%q: o is %s, %q; want the path above the top missing", extra, o.Status, o.Error)
		}
		if s := p.overlay(t, "ok").Status; s != "unchanged" {
			t.Errorf("%q: ok is %s", extra, s)
		}
	}
	if _, _, err := renderIn(t, dir, "o"); err == nil || !strings.Contains(err.Error(), "doesn't exist") {
		t.Errorf("kplan render o: %v, want the path above the top missing", err)
	}
}

// An object with a repeated key fails its overlay with the reason
// `kustomize build` gives; the other overlays render.
func TestDuplicateKeysFailTheOverlay(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"dup/kustomization.yaml": "resources: [cm.yaml]\n",
		"dup/cm.yaml":            configMap("dup", "k: one"),
		"ok/kustomization.yaml":  "resources: [cm.yaml]\n",
		"ok/cm.yaml":             configMap("ok", "k: one"),
	})
	base := commitAll(t, dir, "base")
	write(t, dir, map[string]string{
		"dup/cm.yaml": configMap("dup", "k: one\n  k: two"),
		"ok/cm.yaml":  configMap("ok", "k: two"),
	})
	head := commitAll(t, dir, "head")
	const reason = `line 7: mapping key "k" already defined at line 6`
	for _, extra := range [][]string{{"--full"}, nil} {
		args := append([]string{"diff", "-C", dir, "--base", base, "--head", head}, extra...)
		if _, _, err := kplan(t, nil, args...); !errors.Is(err, exitError(1)) {
			t.Errorf("kplan %q: %v, want exit 1: the PR breaks an overlay", args, err)
		}
		p := diffJSON(t, append([]string{"-C", dir, "--base", base, "--head", head}, extra...)...)
		if o := p.overlay(t, "dup"); o.Status != "error" || !strings.Contains(o.Error, reason) {
			t.Errorf("%q: dup is %s, %q; want %q", extra, o.Status, o.Error, reason)
		}
		if o := p.overlay(t, "ok"); o.Status != "changed" {
			t.Errorf("%q: ok is %s, want changed", extra, o.Status)
		}
	}
	if _, _, err := renderIn(t, dir, "dup"); err == nil || !strings.Contains(err.Error(), reason) {
		t.Errorf("kplan render dup: %v, want %q", err, reason)
	}
}

// kplan render reads the disk as kustomize does: a secretGenerator's
// local, gitignored secret.env renders.
func TestRenderReadsGitignoredSecretEnv(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		".gitignore":             "secret.env\n",
		"app/kustomization.yaml": "secretGenerator: [{name: creds, envs: [secret.env]}]\n",
	})
	commitAll(t, dir, "base")
	write(t, dir, map[string]string{"app/secret.env": "PASSWORD=hunter2\n"})
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("secret.env is not ignored: %q", st)
	}
	out, stderr, err := renderIn(t, dir, "app")
	if err != nil {
		t.Fatalf("kplan render app: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "PASSWORD: aHVudGVyMg==") || !strings.Contains(out, "name: creds-") {
		t.Errorf("kplan render app lacks the generated Secret:\n%s", out)
	}
}

// A clean work tree plans no change against its commit, even when
// .gitattributes checks files out with CRLF.
func TestCleanCRLFWorkTreePlansNoChange(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	files := map[string]string{
		".gitattributes":         "* text eol=crlf\n",
		"app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator: [{name: conf, files: [settings.conf]}]\n",
		"app/cm.yaml":            configMap("app", "k: v"),
		"app/settings.conf":      "a=1\nb=2\n",
	}
	write(t, dir, files)
	commitAll(t, dir, "base")
	// A fresh checkout: CRLF on disk.
	for name := range files {
		os.Remove(filepath.Join(dir, name))
	}
	git(t, dir, "checkout", "--", ".")
	if data, _ := os.ReadFile(filepath.Join(dir, "app/settings.conf")); !strings.Contains(string(data), "\r\n") {
		t.Fatalf("the checkout has no CRLF: %q", data)
	}
	for _, extra := range [][]string{{"--full"}, nil} {
		args := append([]string{"diff", "-C", dir, "--base", "main", "--exit-code"}, extra...)
		if out, stderr, err := kplan(t, nil, args...); err != nil {
			t.Errorf("kplan %q: %v, want no change\n%s%s", args, err, out, stderr)
		}
	}
}
