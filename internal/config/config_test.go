package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/render"
)

var defaults = Settings{Prune: true, ReconcileTimeout: 5 * time.Minute, InventoryPolicy: "must-match"}

func TestLoadExample(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		File:           "example.yaml",
		GitBaseURL:     "https://github.com",
		GitLabURL:      "https://gitlab.com",
		APIBaseURL:     "https://api.github.com/",
		ResyncInterval: 5 * time.Minute,
		StateDir:       "/var/lib/kplan",
		GitBasesMaxAge: 168 * time.Hour,
		DeployNowLabel: "kplan/deploy-now",
		Repositories: []Repository{{
			Name: "octo-org/deploy-config", Forge: GitHub,
			Branches: []Branch{
				{Name: "main", Targets: []Target{
					{Name: "prod-eu", Overlay: "overlays/prod-eu", Environment: "production-eu", Namespace: "shop",
						Settings: Settings{Kubeconfig: "/etc/kplan/prod-eu.kubeconfig", Context: "prod-eu", Prune: true,
							ReconcileTimeout: 5 * time.Minute, InventoryPolicy: "must-match", RequireReviewedPlan: true,
							RemoteHosts: []string{"github.com", "*.example.com"},
							ChartCredentials: &ChartCredentials{RegistryConfig: "/var/run/secrets/kplan-charts-shop/config.json",
								RepositoryConfig: "/var/run/secrets/kplan-charts-shop/repositories.yaml"},
							Render: render.Options{KubeVersion: "v1.31", APIVersions: []string{"monitoring.coreos.com/v1/ServiceMonitor"}}}},
					{Name: "prod-us", Overlay: "overlays/prod-us", Environment: "prod-us", Namespace: "default",
						Inventory: &Inventory{Kind: "ResourceGroup", Name: "inventory-prod-us", Namespace: "kplan", ID: "inventory-prod-us-kplan"},
						Settings:  defaults, DependsOn: []string{"prod-eu"},
						Windows: []Window{{Days: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday}, Start: 9 * 60, End: 17 * 60, Location: berlin}}},
				}},
				{Name: "staging", Targets: []Target{
					{Name: "staging", Overlay: "overlays/staging", Environment: "staging", Namespace: "default", Settings: defaults},
				}},
			},
		}, {
			Name: "octo-org/apps", Forge: GitHub,
			Branches: []Branch{{Name: "main", TargetsFrom: ".kplan.yaml", Environments: []Environment{
				{Name: "production", Settings: Settings{Kubeconfig: "/etc/kplan/prod-eu.kubeconfig", Context: "prod-eu", Prune: true,
					ReconcileTimeout: 10 * time.Minute, InventoryPolicy: "must-match"}},
				{Name: "staging", Settings: defaults},
			}}},
		}, {
			Name: "platform/team/cluster-config", Forge: GitLab,
			Branches: []Branch{{Name: "main", Targets: []Target{
				{Name: "platform-prod", Overlay: "overlays/prod", Environment: "platform-prod", Namespace: "default",
					Settings: func() Settings { s := defaults; s.RequireReviewedPlan = true; return s }()},
			}}},
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load(example.yaml) =\n%+v\nwant\n%+v", cfg, want)
	}
}

const minimal = `
repositories:
  - name: Octo-Org/Deploy
    branches:
      - name: main
        targets:
          - {name: a, overlay: overlays/a/}
`

func TestDefaults(t *testing.T) {
	cfg, err := Parse("conf/webhook.yaml", []byte(minimal+`
gitBaseURL: http://127.0.0.1:8080/git/
apiBaseURL: http://127.0.0.1:9090/api/v3
stateDir: state
`))
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Repositories[0].Branches[0].Targets[0]
	want := Target{Name: "a", Overlay: "overlays/a", Environment: "a", Namespace: "default", Settings: defaults}
	if !reflect.DeepEqual(tg, want) {
		t.Errorf("target = %+v, want %+v", tg, want)
	}
	if cfg.GitBaseURL != "http://127.0.0.1:8080/git" || cfg.APIBaseURL != "http://127.0.0.1:9090/api/v3/" {
		t.Errorf("URLs = %q, %q", cfg.GitBaseURL, cfg.APIBaseURL)
	}
	if cfg.StateDir != filepath.Join("conf", "state") || cfg.ResyncInterval != 5*time.Minute {
		t.Errorf("stateDir %q resync %v", cfg.StateDir, cfg.ResyncInterval)
	}
	if cfg.GitBasesMaxAge != 7*24*time.Hour {
		t.Errorf("gitBasesMaxAge = %v, want 7 days", cfg.GitBasesMaxAge)
	}
	for _, tc := range []struct {
		set  string
		want time.Duration
	}{{"gitBasesMaxAge: 0s\n", 0}, {"gitBasesMaxAge: 36h\n", 36 * time.Hour}} {
		cfg, err := Parse("w.yaml", []byte(minimal+tc.set))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.GitBasesMaxAge != tc.want {
			t.Errorf("%q: gitBasesMaxAge = %v, want %v", tc.set, cfg.GitBasesMaxAge, tc.want)
		}
	}
}

func TestLookups(t *testing.T) {
	cfg, err := Parse("w.yaml", []byte(`
gitBaseURL: https://ghe.example.com
repositories:
  - name: Octo-Org/Deploy
    branches:
      - name: main
        targets:
          - {name: a, overlay: overlays/a}
          - {name: b, overlay: overlays/b}
      - name: Release/1.x
        targets:
          - {name: c, overlay: .}
  - name: other/repo
    cloneURL: http://127.0.0.1:1234/other.git
    branches:
      - name: main
        targets:
          - {name: d, overlay: x, kubeconfig: kube/config}
`))
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts []Target) (out []string) {
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tc := range []struct {
		repo, branch string
		want         []string
	}{
		{"octo-org/deploy", "main", []string{"a", "b"}},
		{"OCTO-ORG/DEPLOY", "Release/1.x", []string{"c"}},
		{"octo-org/deploy", "release/1.x", nil}, // branches are case-sensitive
		{"octo-org/deploy", "dev", nil},
		{"octo-org/other", "main", nil},
		{"other/repo", "main", []string{"d"}},
	} {
		if got := names(cfg.Targets(tc.repo, tc.branch)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Targets(%q, %q) = %v, want %v", tc.repo, tc.branch, got, tc.want)
		}
	}

	for repo, want := range map[string]string{
		"octo-org/deploy": "https://ghe.example.com/Octo-Org/Deploy.git",
		"Other/Repo":      "http://127.0.0.1:1234/other.git",
		"nobody/none":     "",
	} {
		if got := cfg.CloneURL(repo); got != want {
			t.Errorf("CloneURL(%q) = %q, want %q", repo, got, want)
		}
	}

	var refs []string
	for _, r := range cfg.AllTargets() {
		refs = append(refs, r.Repo+"@"+r.Branch+":"+r.Target.Name+" "+r.CloneURL)
	}
	want := []string{
		"Octo-Org/Deploy@main:a https://ghe.example.com/Octo-Org/Deploy.git",
		"Octo-Org/Deploy@main:b https://ghe.example.com/Octo-Org/Deploy.git",
		"Octo-Org/Deploy@Release/1.x:c https://ghe.example.com/Octo-Org/Deploy.git",
		"other/repo@main:d http://127.0.0.1:1234/other.git",
	}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("AllTargets =\n%s\nwant\n%s", strings.Join(refs, "\n"), strings.Join(want, "\n"))
	}
	if got := cfg.Targets("other/repo", "main")[0].Kubeconfig; got != filepath.Join("kube", "config") {
		t.Errorf("relative kubeconfig = %q", got)
	}
}

// target wraps target fields (indented for the list item) in a valid file;
// the target's first field is on line 6.
func target(fields string) string {
	return "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - " +
		strings.ReplaceAll(strings.TrimSpace(fields), "\n", "\n            ") + "\n"
}

func TestErrors(t *testing.T) {
	const tg = "w.yaml:%d: repositories[0].branches[0].targets[0]."
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each a substring of one error, in order
	}{
		{"empty", "", []string{"w.yaml: the configuration is empty"}},
		{"comment only", "# nothing\n", []string{"w.yaml: the configuration is empty"}},
		{"syntax", "repositories: [\n", []string{"w.yaml:1: did not find expected node content"}},
		{"two documents", minimal + "---\nstateDir: x\n", []string{"w.yaml:8: a second YAML document"}},
		{"not a mapping", "- a\n", []string{"w.yaml:1: want a mapping of fields, got a list"}},
		{"no repositories", "stateDir: /x\n", []string{"w.yaml:1: repositories: required"}},
		{"empty repositories", "repositories: []\n", []string{"w.yaml:1: repositories: at least one repository is required"}},
		{"repositories not a list", "repositories: {name: a}\n", []string{"w.yaml:1: repositories: want a list, got a mapping"}},
		{"unknown top-level", minimal + "resync: 5m\n", []string{"w.yaml:8: resync: unknown field (known: apiBaseURL, apiVersion, deployNowLabel, gitBaseURL, gitBasesMaxAge, gitlabURL, kind, repositories, resyncInterval, stateDir)"}},
		{"case typo", minimal + "gitBaseUrl: https://x\n", []string{"w.yaml:8: gitBaseUrl: unknown field; did you mean gitBaseURL?"}},
		{"twice", minimal + "stateDir: /a\nstateDir: /b\n", []string{"w.yaml:9: stateDir: set twice (first at line 8)"}},
		{"bad resync", minimal + "resyncInterval: 5 minutes\n", []string{`w.yaml:8: resyncInterval: "5 minutes" is not a duration (e.g. 5m)`}},
		{"zero resync", minimal + "resyncInterval: 0s\n", []string{"w.yaml:8: resyncInterval: must be positive"}},
		{"bare number duration", minimal + "resyncInterval: 300\n", []string{`w.yaml:8: resyncInterval: "300" is not a duration`}},
		{"negative git bases age", minimal + "gitBasesMaxAge: -1h\n", []string{"w.yaml:8: gitBasesMaxAge: must be positive, or 0s to keep git bases"}},
		{"git bases age in days", minimal + "gitBasesMaxAge: 7d\n", []string{`w.yaml:8: gitBasesMaxAge: "7d" is not a duration (e.g. 5m)`}},
		{"git URL scheme", minimal + "gitBaseURL: git@github.com:o\n", []string{`w.yaml:8: gitBaseURL: not an http(s) URL such as https://github.example.com`}},
		{"ssh URL", minimal + "gitBaseURL: ssh://git:hunter2@github.com\n", []string{`w.yaml:8: gitBaseURL: "ssh://git:xxxxx@github.com" is not an http(s) URL`}},
		{"file URL", minimal + "gitBaseURL: file:///srv/git\n", []string{`w.yaml:8: gitBaseURL: "file:///srv/git" is not an http(s) URL`}},
		{"api URL credentials", minimal + "apiBaseURL: https://me:hunter2@ghe/api/v3/\n", []string{"w.yaml:8: apiBaseURL: must not carry credentials: remove them and set KPLAN_GITHUB_TOKEN"}},
		{"repo name", "repositories:\n  - name: deploy-config\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n",
			[]string{`w.yaml:2: repositories[0].name: "deploy-config" is not owner/repo`}},
		{"repo name .git", "repositories:\n  - name: o/r.git\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n",
			[]string{`w.yaml:2: repositories[0].name: "o/r.git" is not owner/repo: drop the .git`}},
		{"repo URL", "repositories:\n  - name: https://github.com/o/r\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n",
			[]string{`repositories[0].name: "https://github.com/o/r" is not owner/repo`}},
		{"duplicate repo", minimal + "  - name: octo-org/deploy\n    branches: [{name: dev, targets: [{name: b, overlay: b}]}]\n",
			[]string{`w.yaml:8: repositories[1].name: repository "octo-org/deploy" is already configured at line 3`}},
		{"repo missing fields", "repositories:\n  - cloneURL: https://x/y.git\n", []string{
			"w.yaml:2: repositories[0].name: required", "w.yaml:2: repositories[0].branches: required"}},
		{"no branches", "repositories:\n  - name: o/r\n    branches: []\n", []string{"w.yaml:3: repositories[0].branches: at least one branch is required"}},
		{"branch is a ref", "repositories:\n  - name: o/r\n    branches: [{name: refs/heads/main, targets: [{name: a, overlay: a}]}]\n",
			[]string{`w.yaml:3: repositories[0].branches[0].name: "refs/heads/main" is a ref: write the branch name`}},
		{"branch a number", "repositories:\n  - name: o/r\n    branches: [{name: 1.10, targets: [{name: a, overlay: a}]}]\n",
			[]string{`w.yaml:3: repositories[0].branches[0].name: want a string, got "1.10" (quote it`}},
		{"duplicate branch", "repositories:\n  - name: o/r\n    branches:\n    - {name: main, targets: [{name: a, overlay: a}]}\n    - {name: main, targets: [{name: b, overlay: b}]}\n",
			[]string{`w.yaml:5: repositories[0].branches[1].name: branch "main" is already configured at line 4`}},
		{"no targets", "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n",
			[]string{"w.yaml:5: repositories[0].branches[0].targets: at least one target is required"}},
		{"target missing fields", target("environment: x"), []string{
			fmt.Sprintf(tg+"name: required", 6), fmt.Sprintf(tg+"overlay: required", 6)}},
		{"target not a mapping", target("just-a-name"), []string{"w.yaml:6: repositories[0].branches[0].targets[0]: want a mapping of fields, got \"just-a-name\""}},
		{"bad timeout", target("name: a\noverlay: a\nreconcileTimeout: 5 minutes"),
			[]string{fmt.Sprintf(tg+`reconcileTimeout: "5 minutes" is not a duration (e.g. 5m)`, 8)}},
		{"negative timeout", target("name: a\noverlay: a\nreconcileTimeout: -1s"), []string{fmt.Sprintf(tg+"reconcileTimeout: must not be negative", 8)}},
		{"bad policy", target("name: a\noverlay: a\ninventoryPolicy: adopt"),
			[]string{fmt.Sprintf(tg+`inventoryPolicy: "adopt" is not one of must-match, adopt-if-no-inventory, adopt-all`, 8)}},
		{"prune not bool", target("name: a\noverlay: a\nprune: \"yes\""), []string{fmt.Sprintf(tg+`prune: want true or false, got "yes"`, 8)}},
		{"absolute overlay", target("name: a\noverlay: /overlays/a"), []string{fmt.Sprintf(tg+`overlay: "/overlays/a" must be relative to the repository root`, 7)}},
		{"dotdot overlay", target("name: a\noverlay: overlays/../../etc"), []string{fmt.Sprintf(tg+`overlay: "overlays/../../etc" must stay inside the repository (no ..)`, 7)}},
		{"leading dotdot overlay", target("name: a\noverlay: ../x"), []string{fmt.Sprintf(tg+`overlay: "../x" must stay inside the repository`, 7)}},
		{"backslash overlay", target("name: a\noverlay: 'overlays\\a'"), []string{fmt.Sprintf(tg+`overlay: "overlays\\a" must use / as the separator`, 7)}},
		{"empty overlay", target("name: a\noverlay: \"\""), []string{fmt.Sprintf(tg+`overlay: must not be empty`, 7)}},
		{"bad target name", target("name: prod eu\noverlay: a"), []string{fmt.Sprintf(tg+`name: "prod eu" must be 1 to 63 letters`, 6)}},
		{"unknown target field", target("name: a\noverlay: a\nnamespaces: x"), []string{fmt.Sprintf(tg+"namespaces: unknown field (known: allowRemoteBases, allowReplaceInventory, apiVersions, chartCredentials, context, dependsOn, deployWindows, enableHelm, environment, freeze, inventory, inventoryPolicy, kubeVersion, kubeconfig, name, namespace, overlay, prune, reconcileTimeout, remoteHosts, requireReviewedPlan)", 8)}},
		{"bad remote host", target("name: a\noverlay: a\nremoteHosts: [example.com, \"http://x/\"]"), []string{fmt.Sprintf(tg+`remoteHosts[1]: remote host "http://x/": want a host name`, 8)}},
		{"bad namespace", target("name: a\noverlay: a\nnamespace: Apps"), []string{fmt.Sprintf(tg+`namespace: "Apps" is not a valid namespace`, 8)}},
		{"bad kubeVersion", target("name: a\noverlay: a\nkubeVersion: latest"), []string{fmt.Sprintf(tg+`kubeVersion: "latest" is not a Kubernetes version`, 8)}},
		{"bad apiVersions", target("name: a\noverlay: a\napiVersions: [\"a b/v1\"]"), []string{fmt.Sprintf(tg+`apiVersions[0]: "a b/v1": want group/version`, 8)}},
		{"same explicit inventory", "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n" +
			"          - {name: eu, overlay: a, kubeconfig: /k, inventory: {name: inv, namespace: kplan}}\n" +
			"          - {name: us, overlay: b, kubeconfig: /k, inventory: {name: inv, namespace: kplan, id: other}}\n",
			[]string{`w.yaml:7: targets "eu" (line 6) and "us" use the same inventory (ResourceGroup kplan/inv) in the same cluster (kubeconfig "/k", context ""): applying one would prune the other's objects`}},
		{"same inventory-id", "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n" +
			"          - {name: eu, overlay: a, inventory: {name: inv, namespace: kplan}}\n" +
			"          - {name: us, overlay: b, inventory: {kind: ConfigMap, name: other, namespace: kplan, id: inv-kplan}}\n",
			[]string{`w.yaml:7: targets "eu" (line 6) and "us" use the same inventory (inventory-id inv-kplan) in the same cluster`}},
		{"same overlay twice", "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n" +
			"          - {name: eu, overlay: a}\n          - {name: us, overlay: a/}\n",
			[]string{`w.yaml:7: targets "eu" (line 6) and "us" deploy overlay a of o/r@main to the same cluster and namespace`}},
		{"targetsFrom without environments", "repositories:\n  - name: o/r\n    branches:\n      - {name: main, targetsFrom: .kplan.yaml}\n",
			[]string{"w.yaml:4: repositories[0].branches[0].environments: required"}},
		{"environments without targetsFrom", "repositories:\n  - name: o/r\n    branches:\n      - {name: main, targets: [{name: a, overlay: a}], environments: {prod: {}}}\n",
			[]string{"w.yaml:4: repositories[0].branches[0].environments: only used with targetsFrom"}},
		{"bad environment", "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targetsFrom: ../x\n        environments:\n          prod: {prune: maybe, overlay: a}\n",
			[]string{`w.yaml:5: repositories[0].branches[0].targetsFrom: "../x" must name a file in the repository`,
				`w.yaml:7: repositories[0].branches[0].environments.prod.prune: want true or false, got "maybe"`,
				`w.yaml:7: repositories[0].branches[0].environments.prod.overlay: unknown field`}},
		{"inventory", target("name: a\noverlay: a\ninventory: {kind: Secret, name: Bad_Name, id: \"no spaces\"}"), []string{
			fmt.Sprintf(tg+`inventory.kind: "Secret" is not ResourceGroup or ConfigMap`, 8),
			fmt.Sprintf(tg+`inventory.name: "Bad_Name" is not a valid object name`, 8),
			fmt.Sprintf(tg+`inventory.id: "no spaces" is not a valid label value`, 8),
			fmt.Sprintf(tg+`inventory.namespace: required`, 8)}},
		{"merge key", "defaults: &d {prune: false}\n" + minimal, []string{"w.yaml:1: defaults: unknown field"}},
		{"duplicate target across branches and repos",
			"repositories:\n  - name: o/r\n    branches:\n      - {name: main, targets: [{name: Prod, overlay: a}]}\n      - {name: dev, targets: [{name: prod, overlay: b}]}\n",
			[]string{`w.yaml:5: repositories[0].branches[1].targets[0].name: target "prod" is already defined at line 4; target names are unique in the file`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("w.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("a config with the error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d:\n  %s\nwant it to contain\n  %s", i, lines[i], w)
				}
			}
		})
	}
}

// TestAllErrors checks that one pass reports every problem, not the first.
func TestAllErrors(t *testing.T) {
	_, err := Parse("webhook.yaml", []byte(`repositories:
  - name: octo-org/deploy-config
    token: ghp_do_not_echo_me
    branches:
      - name: main
        targets:
          - name: prod-eu
            overlay: overlays/prod-eu
          - name: prod-eu
            overlay: /abs
            reconcileTimeout: 5 minutes
            inventoryPolicy: sometimes
webhookSecret: s3cr3t-do-not-echo
resyncInterval: often
`))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"webhook.yaml:3: repositories[0].token: secrets are not read from the configuration file: remove it and set KPLAN_GITHUB_TOKEN or KPLAN_GITHUB_TOKEN_FILE in the environment",
		`webhook.yaml:9: repositories[0].branches[0].targets[1].name: target "prod-eu" is already defined at line 7; target names are unique in the file`,
		`webhook.yaml:10: repositories[0].branches[0].targets[1].overlay: "/abs" must be relative to the repository root`,
		`webhook.yaml:11: repositories[0].branches[0].targets[1].reconcileTimeout: "5 minutes" is not a duration (e.g. 5m)`,
		`webhook.yaml:12: repositories[0].branches[0].targets[1].inventoryPolicy: "sometimes" is not one of must-match, adopt-if-no-inventory, adopt-all`,
		"webhook.yaml:13: webhookSecret: secrets are not read from the configuration file: remove it and set KPLAN_WEBHOOK_SECRET or KPLAN_WEBHOOK_SECRET_FILE in the environment",
		`webhook.yaml:14: resyncInterval: "often" is not a duration (e.g. 5m)`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestSecretFieldsNeverEchoed(t *testing.T) {
	for _, key := range []string{"secret", "token", "webhookSecret", "githubToken", "github_token", "GITHUB-TOKEN", "password", "privateKey"} {
		_, err := Parse("w.yaml", []byte(minimal+key+": hunter2\n"))
		if err == nil || !strings.Contains(err.Error(), "secrets are not read from the configuration file") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", key, err)
		}
	}
	_, err := Parse("w.yaml", []byte(minimal+"gitBaseURL: https://x:hunter2@github.com\n"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("credentials in a URL: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secretFile := write("secret", "from-file\n")
	crlfFile := write("crlf", "crlf\r\n")
	emptyFile := write("empty", "\n")
	tokenFile := write("token", "ghp_file\n")

	for _, tc := range []struct {
		name          string
		env           map[string]string
		secret, token string
		err           string
	}{
		{name: "env", env: map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t"}, secret: "s", token: "t"},
		{name: "files", env: map[string]string{"KPLAN_WEBHOOK_SECRET_FILE": secretFile, "KPLAN_GITHUB_TOKEN_FILE": tokenFile}, secret: "from-file", token: "ghp_file"},
		{name: "crlf", env: map[string]string{"KPLAN_WEBHOOK_SECRET_FILE": crlfFile}, secret: "crlf"},
		{name: "only one newline trimmed", env: map[string]string{"KPLAN_WEBHOOK_SECRET": "s \n\n"}, secret: "s \n"},
		{name: "no token is fine", env: map[string]string{"KPLAN_WEBHOOK_SECRET": "s"}, secret: "s"},
		{name: "no secret", env: map[string]string{"KPLAN_GITHUB_TOKEN": "t"}, err: "no webhook secret: set KPLAN_WEBHOOK_SECRET, or KPLAN_WEBHOOK_SECRET_FILE"},
		{name: "both", env: map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_WEBHOOK_SECRET_FILE": secretFile}, err: "both KPLAN_WEBHOOK_SECRET and KPLAN_WEBHOOK_SECRET_FILE are set"},
		{name: "empty file", env: map[string]string{"KPLAN_WEBHOOK_SECRET_FILE": emptyFile}, err: "KPLAN_WEBHOOK_SECRET_FILE (" + emptyFile + ") is empty"},
		{name: "missing file", env: map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN_FILE": filepath.Join(dir, "nope")}, err: "KPLAN_GITHUB_TOKEN_FILE: open " + filepath.Join(dir, "nope")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, token, err := Secrets(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(secret) != tc.secret || string(token) != tc.token {
				t.Errorf("got %q, %q; want %q, %q", secret, token, tc.secret, tc.token)
			}
			if tc.token == "" && token != nil {
				t.Errorf("absent token = %q, want nil", token)
			}
		})
	}
}

// A branch with targetsFrom gives the webhook one stand-in target, and
// the deployer a source with the environments.
func TestTargetsFrom(t *testing.T) {
	cfg, err := Parse("w.yaml", []byte(`
repositories:
  - name: o/r
    branches:
      - name: main
        targetsFrom: ./.kplan.yaml
        environments:
          production: {kubeconfig: prod.kubeconfig, prune: false}
          staging:
        targets:
          - {name: static, overlay: s}
`))
	if err != nil {
		t.Fatal(err)
	}
	ts := cfg.Targets("O/R", "main")
	if len(ts) != 2 || ts[0].Name != "static" || ts[1].Name != "o/r@main" || ts[1].FromFile != ".kplan.yaml" {
		t.Errorf("Targets = %+v", ts)
	}
	if refs := cfg.AllTargets(); len(refs) != 1 || refs[0].Target.Name != "static" {
		t.Errorf("AllTargets = %+v", refs)
	}
	src := cfg.Sources()
	if len(src) != 1 || src[0].Name != "o/r@main" || src[0].File != ".kplan.yaml" || src[0].CloneURL != "https://github.com/o/r.git" {
		t.Fatalf("Sources = %+v", src)
	}
	prod, ok := src[0].Environment("production")
	if !ok || prod.Kubeconfig != "prod.kubeconfig" || prod.Prune || prod.ReconcileTimeout != 5*time.Minute {
		t.Errorf("production = %+v", prod)
	}
	if st, ok := src[0].Environment("staging"); !ok || !reflect.DeepEqual(st.Settings, defaults) {
		t.Errorf("staging = %+v", st)
	}
	if _, ok := src[0].Environment("dev"); ok {
		t.Error("dev is not mapped")
	}
}

// A repository names its forge: a GitLab project's path may hold
// subgroups and clones from gitlabURL; a GitHub repository's may not.
func TestForgePerRepository(t *testing.T) {
	cfg, err := Parse("w.yaml", []byte(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
gitlabURL: https://gitlab.example/
repositories:
  - name: platform/team/infra
    forge: gitlab
    branches: [{name: main, targets: [{name: a, overlay: a}]}]
  - name: octo/infra
    branches: [{name: main, targets: [{name: b, overlay: b}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.CloneURL("platform/team/infra"); got != "https://gitlab.example/platform/team/infra.git" {
		t.Errorf("GitLab clone URL %s", got)
	}
	if cfg.ForgeOf("Platform/Team/Infra") != GitLab || cfg.ForgeOf("octo/infra") != GitHub || !cfg.HasForge(GitLab) {
		t.Error("ForgeOf/HasForge")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"  - name: a/b/c\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n", `"a/b/c" is not owner/repo`},
		{"  - name: a/b\n    forge: gitea\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n", `"gitea" is not a forge`},
		{"  - name: a/b.git\n    forge: gitlab\n    branches: [{name: main, targets: [{name: a, overlay: a}]}]\n", "drop the .git"},
	} {
		_, err := Parse("w.yaml", []byte("apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\nrepositories:\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestGitLabAuthFrom: a GitLab token is required; from a file, the file
// is named to be read again as it changes, not its content kept.
func TestGitLabAuthFrom(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("glpat-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name              string
		env               map[string]string
		token, file, hook string
		err               string
	}{
		{name: "token", env: map[string]string{EnvGitLabToken: "glpat-x"}, token: "glpat-x"},
		{name: "token file", env: map[string]string{EnvGitLabTokenFile: tokenFile, EnvGitLabWebhookSecret: "gl-s"}, file: tokenFile, hook: "gl-s"},
		{name: "none", env: map[string]string{}, err: "no GitLab token: set KPLAN_GITLAB_TOKEN, or KPLAN_GITLAB_TOKEN_FILE"},
		{name: "both", env: map[string]string{EnvGitLabToken: "x", EnvGitLabTokenFile: tokenFile}, err: "both KPLAN_GITLAB_TOKEN and KPLAN_GITLAB_TOKEN_FILE are set"},
		{name: "missing file", env: map[string]string{EnvGitLabTokenFile: filepath.Join(dir, "nope")}, err: "KPLAN_GITLAB_TOKEN_FILE: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := GitLabAuthFrom(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(a.Token) != tc.token || a.TokenFile != tc.file || string(a.WebhookSecret) != tc.hook {
				t.Fatalf("%+v, %v", a, err)
			}
		})
	}
}
