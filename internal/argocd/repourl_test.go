package argocd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One repository's https, ssh and scp-like URLs, with or without .git or
// a trailing slash, are the same; another repository or host is not;
// "*" takes any.
func TestReposHas(t *testing.T) {
	r := NewRepos("git@github.com:Example/Deploy.git")
	for u, want := range map[string]bool{
		"https://github.com/example/deploy":           true,
		"https://github.com/example/deploy.git/":      true,
		"ssh://git@github.com/example/deploy.git":     true,
		"git@github.com:example/deploy":               true,
		"https://github.com/example/deploy-other.git": false,
		"https://gitlab.com/example/deploy.git":       false,
		"":                                            false,
	} {
		if got := r.Has(u); got != want {
			t.Errorf("Has(%q) = %v, want %v", u, got, want)
		}
	}
	if !NewRepos("*").Has("https://anything.example.com/x") {
		t.Error(`"*" does not match`)
	}
}

// kustomize edit add label fails on a label the kustomization sets,
// unless forced: so does the Application's render, saying which setting
// to change.
func TestCommonLabelsWithoutForceFailOnExistingLabel(t *testing.T) {
	k := &Kustomize{CommonLabels: map[string]string{"team": "b"}}
	_, err := edit([]byte("commonLabels: {team: a}\n"), "kustomization.yaml", k, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "forceCommonLabels") {
		t.Fatalf("err %v, want one naming forceCommonLabels", err)
	}
	k.ForceCommonLabels = true
	out, err := edit([]byte("commonLabels: {team: a}\n"), "kustomization.yaml", k, nil, nil)
	if err != nil || !strings.Contains(string(out), "team: b") {
		t.Fatalf("forced: %v\n%s", err, out)
	}
}

// A Go template field that writes too much, or loops without writing,
// fails its ApplicationSet alone, within a bound, instead of holding the
// plan.
func TestGoTemplateIsBounded(t *testing.T) {
	for name, tmpl := range map[string]string{
		"writes a lot":    "{{ range 100000000 }}xxxxxxxxxxxxxxxx{{ end }}",
		"no sprig repeat": `{{ repeat 1000000000 "x" }}`,
	} {
		if _, err := execTemplate(nil, tmpl, nil, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if out, err := execTemplate(nil, `{{ .a | upper }}`, map[string]any{"a": "x"}, nil); err != nil || out != "X" {
		t.Errorf("upper: %q %v", out, err)
	}
}

// A chart whose Chart.yaml lists a dependency that is not under charts/
// is built as Argo CD's helm dependency build does, through the network
// policy: a host the plan may not fetch from fails the Application with
// the refusal naming the setting, never a render without the
// dependency's objects.
func TestHelmDependencyFromARefusedHostFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("app.yaml", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: db}\nspec:\n  source: {repoURL: "+repoURL+", path: chart}\n  destination: {namespace: db}\n")
	write("chart/Chart.yaml", "apiVersion: v2\nname: db\nversion: 1.0.0\ndependencies:\n  - {name: mariadb, version: 9.1.0, repository: https://charts.example.com}\n")
	write("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\n")
	r := buildRepo(t, dir)
	if tg := r.Target("argocd/db"); tg == nil || tg.Err == nil || !strings.Contains(tg.Err.Error(), "dependency mariadb 9.1.0 from https://charts.example.com: fetch https://charts.example.com/index.yaml refused") || !strings.Contains(tg.Err.Error(), "--remote-hosts") {
		t.Errorf("db: %+v", tg)
	}
}

// What Argo CD does not do on its own at the merge is said: nothing
// without automated sync, no prune without automated.prune, no delete of
// a deleted Application's objects without its resources finalizer.
func TestSyncAndDeleteNotes(t *testing.T) {
	parse := func(y string) *Application {
		t.Helper()
		d := ParseFile([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\n"+y), "a.yaml")
		if len(d.Applications) != 1 {
			t.Fatalf("%q: %+v", y, d)
		}
		return d.Applications[0]
	}
	manual := parse("metadata: {name: a}\nspec: {source: {repoURL: r}}\n")
	auto := parse("metadata: {name: a, finalizers: [resources-finalizer.argocd.argoproj.io]}\nspec: {source: {repoURL: r}, syncPolicy: {automated: {}}}\n")
	pruning := parse("metadata: {name: a}\nspec: {source: {repoURL: r}, syncPolicy: {automated: {prune: true}}}\n")
	for name, c := range map[string]struct {
		got  []string
		want string
	}{
		"manual":             {manual.SyncNotes(false), "no automated sync"},
		"auto, no prune":     {auto.SyncNotes(true), "automated.prune is off"},
		"auto, nothing gone": {auto.SyncNotes(false), ""},
		"auto with prune":    {pruning.SyncNotes(true), ""},
		"deleted":            {manual.DeleteNotes(), "without the resources-finalizer.argocd.argoproj.io finalizer"},
		"deleted, finalizer": {auto.DeleteNotes(), ""},
	} {
		if (c.want == "") != (len(c.got) == 0) || (c.want != "" && !strings.Contains(c.got[0], c.want)) {
			t.Errorf("%s: %q, want %q", name, c.got, c.want)
		}
	}
}
