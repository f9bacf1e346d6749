package render

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/gittest"
)

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n"

func TestDiscover(t *testing.T) {
	tree := map[string]string{
		"base/kustomization.yaml":              "resources: [cm.yaml]\n",
		"base/cm.yaml":                         strings.ReplaceAll(cm, "%s", "a"),
		"components/x/kustomization.yaml":      "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
		"overlays/prod/kustomization.yaml":     "resources: [../../base]\ncomponents: [../../components/x]\n",
		"overlays/staging/kustomization.yml":   "resources:\n- ../../base\n",
		"overlays/legacy/Kustomization":        "bases: [../staging]\n",
		"apps/web/envs/dev/kustomization.yaml": "resources: [https://github.com/example/repo//base?ref=v1]\n",
		"broken/kustomization.yaml":            "resources: [unterminated\n",
	}
	cases := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"all", Filter{}, []string{"apps/web/envs/dev", "broken", "overlays/legacy", "overlays/prod"}},
		// A kustomization the include names is planned though legacy lists it.
		{"include", Filter{Include: []string{"overlays/*"}}, []string{"overlays/legacy", "overlays/prod", "overlays/staging"}},
		{"targets", Filter{Targets: []string{"overlays/staging", "base", "components/x", "missing"}, Exclude: []string{"base"}}, []string{"components/x", "missing", "overlays/staging"}},
		{"include doublestar", Filter{Include: []string{"apps/**"}}, []string{"apps/web/envs/dev"}},
		{"exclude", Filter{Exclude: []string{"broken", "overlays/legacy/"}}, []string{"apps/web/envs/dev", "overlays/prod"}},
	}
	s := testkit.Snapshot(t, "test", tree)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Discover(s.FS, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Overlays, tc.want) {
				t.Errorf("overlays = %q, want %q", got.Overlays, tc.want)
			}
		})
	}
	if _, err := Discover(s.FS, Filter{Include: []string{"[bad"}}); err == nil {
		t.Error("a malformed pattern must be an error")
	}
}

func renderAll(t *testing.T, s *snapshot.Snapshot) map[string]Result {
	t.Helper()
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	results, err := Render(context.Background(), s.FS, tree, tree.Overlays, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Result{}
	for _, r := range results {
		out[r.Path] = r
	}
	return out
}

func toYAML(t *testing.T, objs []*yaml.RNode) string {
	t.Helper()
	out, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// The user story of seeds/004_922b9f81ee02a23f.md renders as kustomize does.
func TestComponentsUserStory(t *testing.T) {
	s, err := snapshot.FromFS(demo.Story(), "story")
	if err != nil {
		t.Fatal(err)
	}
	got := renderAll(t, s)
	type want struct {
		secrets  []string // generated Secret name prefixes
		confKeys []string // keys of the merged ConfigMap
		volumes  []string // Deployment volumes, in order
	}
	wants := map[string]want{
		"overlays/community":  {[]string{"dbpass", "recaptcha"}, []string{"db.conf", "main.conf", "recaptcha.conf"}, []string{"recaptcha", "dbpass", "conf"}},
		"overlays/enterprise": {[]string{"dbpass", "ldappass"}, []string{"db.conf", "ldap.conf", "main.conf"}, []string{"ldappass", "dbpass", "conf"}},
		"overlays/dev":        {[]string{"dbpass", "recaptcha"}, []string{"db.conf", "main.conf", "recaptcha.conf"}, []string{"recaptcha", "dbpass", "conf"}},
	}
	if len(got) != len(wants) {
		t.Fatalf("overlays = %v, want community, enterprise, dev", keys(got))
	}
	for path, w := range wants {
		r := got[path]
		if r.Err != nil {
			t.Fatalf("%s: %v", path, r.Err)
		}
		var secrets, volumes, confKeys []string
		for _, o := range r.Objects {
			switch o.GetKind() {
			case "Secret":
				secrets = append(secrets, o.GetName()[:strings.LastIndex(o.GetName(), "-")])
			case "ConfigMap":
				confKeys = slices.Sorted(func(yield func(string) bool) {
					for k := range o.GetDataMap() {
						if !yield(k) {
							return
						}
					}
				})
			case "Deployment":
				vols, err := o.Pipe(yaml.Lookup("spec", "template", "spec", "volumes"))
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vols.Content() {
					volumes = append(volumes, yaml.GetValue(yaml.NewRNode(v).Field("name").Value))
				}
			}
		}
		slices.Sort(secrets)
		if !slices.Equal(secrets, w.secrets) || !slices.Equal(confKeys, w.confKeys) || !slices.Equal(volumes, w.volumes) {
			t.Errorf("%s: secrets %v conf %v volumes %v; want %v %v %v", path, secrets, confKeys, volumes, w.secrets, w.confKeys, w.volumes)
		}
	}

	// Byte for byte against the kustomize that kubectl embeds, when present.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found; skipping the comparison with kubectl kustomize")
		return
	}
	dir := t.TempDir()
	if err := demo.WriteStory(dir); err != nil {
		t.Fatal(err)
	}
	for path := range wants {
		want, err := exec.Command(kubectl, "kustomize", dir+"/"+path).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", path, err)
		}
		if g := toYAML(t, got[path].Objects); g != string(want) {
			t.Errorf("%s differs from kubectl kustomize:\n--- kplan\n%s\n--- kubectl\n%s", path, g, want)
		}
	}
}

func keys(m map[string]Result) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestBrokenOverlaysBesideGoodOnes(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"good/kustomization.yaml":    "resources: [cm.yaml]\n",
		"good/cm.yaml":               strings.ReplaceAll(cm, "%s", "good"),
		"badyaml/kustomization.yaml": "resources: [cm.yaml\n",
		"missing/kustomization.yaml": "resources: [nothere.yaml]\n",
		"remote/kustomization.yaml":  "resources: [https://127.0.0.1:1/nothing/here.yaml]\n",
		"escape/kustomization.yaml":  "patches: [{path: ../good/cm.yaml}]\n",
	})
	got := renderAll(t, s)
	if r := got["good"]; r.Err != nil || len(r.Objects) != 1 {
		t.Fatalf("good overlay: %d objects, err %v", len(r.Objects), r.Err)
	}
	for _, p := range []string{"badyaml", "missing", "remote", "escape"} {
		r := got[p]
		if r.Err == nil {
			t.Errorf("%s: rendered %d objects, want an error", p, len(r.Objects))
			continue
		}
		if !strings.Contains(r.Err.Error(), p) {
			t.Errorf("%s: error does not name the overlay: %v", p, r.Err)
		}
	}
	if !strings.Contains(got["missing"].Err.Error(), "nothere.yaml") {
		t.Errorf("missing file not named: %v", got["missing"].Err)
	}
}

func TestInventoryDirectiveIsReadAndRemoved(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\ninventory:\n  type: ConfigMap\n  configMap:\n    name: root-cm\n    namespace: default\n",
		"app/cm.yaml":            strings.ReplaceAll(cm, "%s", "a"),
	})
	r := renderAll(t, s)["app"]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Inventory == nil || r.Inventory.Type != "ConfigMap" || r.Inventory.ConfigMap.Name != "root-cm" || r.Inventory.ConfigMap.Namespace != "default" {
		t.Errorf("inventory directive = %+v", r.Inventory)
	}
	if len(r.Objects) != 1 {
		t.Errorf("objects = %d, want 1", len(r.Objects))
	}
}

// Generator inputs quoted by kustomize's errors never reach a report.
func TestRenderErrorsHideGeneratorInput(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"env/kustomization.yaml": "secretGenerator:\n- name: db\n  envs: [db.env]\n",
		"env/db.env":             "PASSWORD=caf\xe9-s3cr3t\n",
		"lit/kustomization.yaml": "secretGenerator:\n- name: db\n  literals: [hunter2-no-equals]\n",
	})
	got := renderAll(t, s)
	for _, p := range []string{"env", "lit"} {
		err := got[p].Err
		if err == nil {
			t.Fatalf("%s: rendered, want an error", p)
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the secret: %v", p, err)
		}
		if !strings.Contains(err.Error(), "hidden") {
			t.Errorf("%s: the error does not say what was hidden: %v", p, err)
		}
	}
}

func TestPatterns(t *testing.T) {
	for in, want := range map[string][]string{
		"":                           nil,
		"apps/*":                     {"apps/*"},
		" a/**, b \n\nc/*,":          {"a/**", "b", "c/*"},
		"clusters/prod\nclusters/qa": {"clusters/prod", "clusters/qa"},
	} {
		if got := Patterns(in); !slices.Equal(got, want) {
			t.Errorf("Patterns(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiscoverReportsCycles(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"a/kustomization.yaml":   "resources: [../b]\n",
		"b/kustomization.yaml":   "resources: [../c]\n",
		"c/kustomization.yaml":   "resources: [../a]\n",
		"app/kustomization.yaml": "resources: [cm.yaml]\n",
		"app/cm.yaml":            strings.ReplaceAll(cm, "%s", "a"),
	})
	for range 5 { // one answer, whatever the map order
		tree, err := Discover(s.FS, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tree.Overlays, []string{"a", "app"}) {
			t.Fatalf("overlays = %q, want the cycle reported once, on a", tree.Overlays)
		}
		if err := tree.Errors["a"]; err == nil || !strings.Contains(err.Error(), "a → b → c → a") {
			t.Fatalf("error of a = %v, want the cycle a → b → c → a", err)
		}
	}
}

func TestDiscoverTargetErrors(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
	})
	tree, err := Discover(s.FS, Filter{Targets: []string{"comp", "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"comp": "is a kustomize Component", "gone": "has no kustomization.yaml"} {
		if err := tree.Errors[dir]; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ".kplan.yaml") {
			t.Errorf("error of %s = %v, want %q naming .kplan.yaml", dir, err, want)
		}
	}
}

// gitSnapshot commits files (gittest.Write's format, "->target" for a
// symlink) and returns the commit's snapshot and the checkout.
func gitSnapshot(t *testing.T, files map[string]string) (*snapshot.Snapshot, string) {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q")
	gittest.Write(t, dir, files)
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "files")
	s, err := snapshot.FromCommit(context.Background(), dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// What `kustomize build` refuses fails that overlay, with kustomize's
// reason; the other overlays render. kubectl kustomize, when present,
// agrees on which overlays fail.
func TestRenderRefusesWhatKustomizeRefuses(t *testing.T) {
	files := map[string]string{
		"shared/cm.yaml":                     strings.ReplaceAll(cm, "%s", "shared"),
		"ok/kustomization.yaml":              "resources: [../shared]\n",
		"shared/kustomization.yaml":          "resources: [cm.yaml]\n",
		"linkout/kustomization.yaml":         "resources: [cm.yaml]\n",
		"linkout/cm.yaml":                    "->../shared/cm.yaml",
		"dotdot/kustomization.yaml":          "resources: [../shared/cm.yaml]\n",
		"linkin/kustomization.yaml":          "resources: [cm.yaml]\n",
		"linkin/cm.yaml":                     "->sub/cm.yaml",
		"linkin/sub/cm.yaml":                 strings.ReplaceAll(cm, "%s", "linkin"),
		"dirlink/kustomization.yaml":         "resources: [base]\n",
		"dirlink/base":                       "->../shared",
		"above/kustomization.yaml":           "resources: [../../outside.yaml]\n",
		"deep/above/kustomization.yaml":      "resources: [../../../../shared/cm.yaml]\n",
		"dup/kustomization.yaml":             "resources: [cm.yaml]\n",
		"dup/cm.yaml":                        strings.ReplaceAll(cm, "%s", "dup") + "data:\n  k: v\n  k: w\n",
		"names/a@b (c)+é/kustomization.yaml": "resources: [\"x y+z@(1)é.yaml\"]\n",
		"names/a@b (c)+é/x y+z@(1)é.yaml":    strings.ReplaceAll(cm, "%s", "names"),
	}
	s, dir := gitSnapshot(t, files)
	// Outside the repository, where a checkout's ".." can reach.
	os.WriteFile(filepath.Join(filepath.Dir(dir), "outside.yaml"), []byte(strings.ReplaceAll(cm, "%s", "outside")), 0o644)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	overlays := []string{"ok", "linkout", "dotdot", "linkin", "dirlink", "above", "deep/above", "dup", "names/a@b (c)+é"}
	rootOnly := map[string]string{ // overlay -> kustomize's reason; "" renders
		"linkout":    "security; file '/repo/linkout/cm.yaml' is not in or below '/repo/linkout'",
		"dotdot":     "security; file '/repo/shared/cm.yaml' is not in or below '/repo/dotdot'",
		"above":      "'/outside.yaml' doesn't exist",
		"deep/above": "'/shared/cm.yaml' doesn't exist",
		"dup":        `line 7: mapping key "k" already defined at line 6`,
	}
	none := map[string]string{"above": rootOnly["above"], "deep/above": rootOnly["deep/above"], "dup": rootOnly["dup"]}
	kubectl, _ := exec.LookPath("kubectl")
	for _, tc := range []struct {
		name string
		opts Options
		want map[string]string
	}{{"root only", Options{}, rootOnly}, {"none", Options{LoadRestrictorNone: true}, none}} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Render(context.Background(), s.FS, tree, overlays, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				want := tc.want[r.Path]
				switch {
				case want == "" && (r.Err != nil || len(r.Objects) != 1):
					t.Errorf("%s: %v, %d objects; want one", r.Path, r.Err, len(r.Objects))
				case want != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), want)):
					t.Errorf("%s: %v; want an error with %q", r.Path, r.Err, want)
				}
				if kubectl == "" || r.Path == "above" { // the checkout's ".." is not the snapshot's
					continue
				}
				args := []string{"kustomize", filepath.Join(dir, r.Path)}
				if tc.opts.LoadRestrictorNone {
					args = append(args, "--load-restrictor", "LoadRestrictionsNone")
				}
				if _, kerr := exec.Command(kubectl, args...).Output(); (kerr == nil) != (r.Err == nil) {
					t.Errorf("%s: kplan says %v, kubectl kustomize %v", r.Path, r.Err, kerr)
				}
			}
		})
	}
}

// TestSharedBuildsAfterAResetDoNotRace pins the schema lock: an exclusive
// build resets kyaml's schema, and the shared builds that follow must not
// parse it while others read it (a data race CI's -race run caught in
// TestRemoteResourcesGoThroughThePolicy, one run in sixty).
func TestSharedBuildsAfterAResetDoNotRace(t *testing.T) {
	files := map[string]string{}
	for i := range 8 {
		d := fmt.Sprintf("o%d/", i)
		files[d+"kustomization.yaml"] = "resources: [r.yaml]\npatches:\n- path: p.yaml\n"
		files[d+"r.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: a\n" +
			"---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
		files[d+"p.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: b\n"
	}
	s := testkit.Snapshot(t, "test", files)
	tree, err := Discover(s.FS, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		lockSchema(true)() // as an exclusive build ends: the schema is reset
		results, err := Render(context.Background(), s.FS, tree, tree.Overlays, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil || len(r.Objects) != 2 {
				t.Fatalf("%s: %d objects, err %v", r.Path, len(r.Objects), r.Err)
			}
		}
	}
}
