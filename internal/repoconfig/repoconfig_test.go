package repoconfig

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	c, err := Parse([]byte("targets:\n  - name: prod\n    overlay: ./clusters/prod/\n  - name: staging\n    overlay: clusters/staging\n    environment: stage\n    namespace: apps\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "prod", Overlay: "clusters/prod", Environment: "prod", Namespace: "default"},
		{Name: "staging", Overlay: "clusters/staging", Environment: "stage", Namespace: "apps"},
	}
	for i, w := range want {
		if c.Targets[i] != w {
			t.Errorf("target %d = %+v, want %+v", i, c.Targets[i], w)
		}
	}
	if got := c.TargetsOf("clusters/prod"); len(got) != 1 || got[0].Name != "prod" {
		t.Errorf("TargetsOf = %+v", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "list at least one target"},
		{"unknown field", "targets:\n  - name: a\n    overlay: o\n    namspace: x\n", "field namspace not found"},
		{"no overlay", "targets:\n  - name: a\n", "targets[0].overlay: required"},
		{"outside", "targets:\n  - name: a\n    overlay: ../x\n", "inside the repository"},
		{"duplicate", "targets:\n  - name: a\n    overlay: x\n  - name: A\n    overlay: y\n", `targets[1].name: "A" is also targets[0]`},
		{"bad namespace", "targets:\n  - name: a\n    overlay: x\n    namespace: Not_OK\n", "targets[0].namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), File) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, File, tc.want)
			}
		})
	}
}

func TestParseIgnore(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
		targets       bool
	}{
		{"with targets", "targets:\n  - name: a\n    overlay: o\nignore:\n  fields: ['metadata.annotations.checksum/*']\n  kinds: [HorizontalPodAutoscaler]\n", "", true},
		{"ignore only: overlays are discovered", "ignore:\n  fields: [metadata.labels.helm.sh/chart]\n", "", false},
		{"Secret refused", "ignore:\n  kinds: [Secret]\n", "ignore.kinds[0]: a Secret's changes are never ignored", false},
		{"everything refused", "ignore:\n  fields: ['*']\n", "ignore.fields[0]", false},
		{"misspelt", "ignore:\n  field: [x]\n", "field field not found", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || c.HasTargets() != tc.targets || len(c.Ignore.Fields)+len(c.Ignore.Kinds) == 0 {
				t.Fatalf("%+v, %v", c, err)
			}
		})
	}
}

func TestParseDangerous(t *testing.T) {
	c, err := Parse([]byte("dangerous:\n  disable: [scale-to-zero, host-path]\n"))
	if err != nil || c.HasTargets() || strings.Join(c.Dangerous.Disable, ",") != "scale-to-zero,host-path" {
		t.Fatalf("%+v, %v: want the rules off and overlays discovered", c, err)
	}
	_, err = Parse([]byte("targets:\n  - name: a\n    overlay: o\ndangerous:\n  disable: [scale-to-0]\n"))
	if err == nil || !strings.Contains(err.Error(), `.kplan.yaml: dangerous.disable: unknown danger rule "scale-to-0": the rules are prune-stateful, `) ||
		!strings.Contains(err.Error(), "scale-to-zero") {
		t.Fatalf("err = %v, want it to name the unknown rule and the valid ones", err)
	}
	if _, err := Parse([]byte("dangerous:\n  disabled: [host-path]\n")); err == nil || !strings.Contains(err.Error(), "field disabled not found") {
		t.Fatalf("a misspelt setting: err = %v", err)
	}
}

func TestParseFlux(t *testing.T) {
	tests := []struct {
		data string
		want *bool
		err  string
	}{
		{"flux: true\n", new(true), ""},
		{"flux: false\n", new(false), ""},
		{"targets:\n  - name: a\n    overlay: o\n", nil, ""},
		{"flux: yes please\n", nil, "cannot unmarshal"},
	}
	for _, tc := range tests {
		c, err := Parse([]byte(tc.data))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.data, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.data, err)
			continue
		}
		if (c.Flux == nil) != (tc.want == nil) || (c.Flux != nil && *c.Flux != *tc.want) {
			t.Errorf("%q: flux %v, want %v", tc.data, c.Flux, tc.want)
		}
		if c.HasTargets() != strings.Contains(tc.data, "targets") {
			t.Errorf("%q: HasTargets %v", tc.data, c.HasTargets())
		}
	}
}

// .kplan.yaml names its format: apiVersion kplan.dev/v1alpha1, kind
// Repository. Today's unversioned files still parse, with a warning
// naming the file; another version or kind is refused whole, naming the
// file, before any field of it is judged.
func TestParseVersion(t *testing.T) {
	const body = "targets:\n  - name: a\n    overlay: a\n"
	for _, tc := range []struct{ name, head, warn, err string }{
		{name: "versioned", head: "apiVersion: kplan.dev/v1alpha1\nkind: Repository\n"},
		{name: "unversioned", warn: `.kplan.yaml has no apiVersion and kind: reading it as kplan.dev/v1alpha1 Repository`},
		{name: "other version", head: "apiVersion: kplan.dev/v1\nkind: Repository\nnewField: 1\n", err: `.kplan.yaml: apiVersion: "kplan.dev/v1" is not a version this kplan reads (kplan.dev/v1alpha1)`},
		{name: "other kind", head: "apiVersion: kplan.dev/v1alpha1\nkind: Repo\n", err: `.kplan.yaml: kind: "Repo" is not Repository`},
		{name: "the webhook's kind", head: "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\n", err: "kind WebhookConfig is the webhook's configuration"},
		{name: "kind alone", head: "kind: Repository\n", err: ".kplan.yaml: apiVersion: required with kind"},
		{name: "apiVersion alone", head: "apiVersion: kplan.dev/v1alpha1\n", err: ".kplan.yaml: kind: required with apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.head + body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "newField") {
					t.Fatalf("err = %v, want only %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Targets) != 1 || c.Targets[0].Name != "a" {
				t.Errorf("targets = %+v", c.Targets)
			}
			switch {
			case tc.warn == "" && len(c.Warnings) > 0:
				t.Errorf("warnings = %q, want none", c.Warnings)
			case tc.warn != "" && (len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], tc.warn)):
				t.Errorf("warnings = %q, want one containing %q", c.Warnings, tc.warn)
			}
		})
	}
}

// A .kplan.yaml that only sets Argo CD mode and the repoURLs naming the
// repository is a valid file (no targets needed), and reads both.
func TestArgoCDSettingsAlone(t *testing.T) {
	c, err := Parse([]byte("apiVersion: kplan.dev/v1alpha1\nkind: Repository\nargocd: true\nargocdRepoURLs: [https://git.example.com/deploy.git, '*']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ArgoCD == nil || !*c.ArgoCD || len(c.ArgoCDRepoURLs) != 2 || c.ArgoCDRepoURLs[1] != "*" {
		t.Errorf("argocd %v, urls %q", c.ArgoCD, c.ArgoCDRepoURLs)
	}
}

// argocdClusters declares the clusters Argo CD deploys to, for
// ApplicationSets' clusters generators: an empty list is a declaration
// (Argo CD's own cluster only), unset is none; a cluster needs its name
// and server, names are unique.
func TestArgoCDClusters(t *testing.T) {
	head := "apiVersion: kplan.dev/v1alpha1\nkind: Repository\n"
	c, err := Parse([]byte(head + "argocdClusters:\n- name: prod\n  server: https://prod.example.com\n  labels: {env: prod}\n  annotations: {team: shop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ArgoCDClusters) != 1 || c.ArgoCDClusters[0].Labels["env"] != "prod" || c.ArgoCDClusters[0].Annotations["team"] != "shop" {
		t.Errorf("clusters %+v", c.ArgoCDClusters)
	}
	c, err = Parse([]byte(head + "argocdNewGitFileGlobbing: true\n"))
	if err != nil || !c.ArgoCDNewGitFileGlobbing {
		t.Errorf("argocdNewGitFileGlobbing alone: %+v, %v", c, err)
	}
	c, err = Parse([]byte(head + "argocdClusters: []\n"))
	if err != nil || c.ArgoCDClusters == nil {
		t.Errorf("an empty list: %+v, %v; want a declaration of no cluster Secrets", c, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"argocdClusters: [{name: a}]\n", "argocdClusters[0]: give each cluster the name and server"},
		{"argocdClusters: [{name: a, server: s}, {name: a, server: t}]\n", `argocdClusters[1]: "a" is also argocdClusters[0]`},
		{"argocdClusters: [{name: a, server: s, label: {}}]\n", "field label not found"},
	} {
		if _, err := Parse([]byte(head + tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestParseBuildOptions reads argocd-cm's kustomize.buildOptions as Argo
// CD passes them to kustomize build, and refuses a flag kplan would not
// honour, naming it.
func TestParseBuildOptions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want BuildOptions
		err  string
	}{
		{"", BuildOptions{}, ""},
		{"--enable-helm", BuildOptions{EnableHelm: true}, ""},
		{"--load-restrictor LoadRestrictionsNone --enable-helm", BuildOptions{EnableHelm: true, LoadRestrictorNone: true}, ""},
		{"--load_restrictor=LoadRestrictionsNone", BuildOptions{LoadRestrictorNone: true}, ""},
		{"--load-restrictor", BuildOptions{}, "needs a value"},
		{"--load-restrictor=None", BuildOptions{}, `"None": want LoadRestrictionsNone`},
		{"--enable-alpha-plugins", BuildOptions{}, `"--enable-alpha-plugins": kplan reads`},
	} {
		got, err := ParseBuildOptions(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	_, err := Parse([]byte("apiVersion: kplan.dev/v1alpha1\nkind: Repository\nargocdKustomizeBuildOptions: --enable-alpha-plugins\n"))
	if err == nil || !strings.Contains(err.Error(), ".kplan.yaml: argocdKustomizeBuildOptions: ") {
		t.Errorf("Parse: %v, want the field named", err)
	}
}

// fluxArtifacts maps OCI artifacts built from the repository to their
// directory; a URL with a tag, a path leaving the repository and a URL
// listed twice are refused.
func TestFluxArtifacts(t *testing.T) {
	c, err := Parse([]byte("fluxArtifacts:\n  - {url: oci://ghcr.io/org/fleet/, path: ./}\n  - {url: oci://ghcr.io/org/apps, path: ./apps/}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.FluxArtifactPaths()
	if len(got) != 2 || got["oci://ghcr.io/org/fleet"] != "." || got["oci://ghcr.io/org/apps"] != "apps" {
		t.Errorf("FluxArtifactPaths = %v", got)
	}
	for _, bad := range []string{
		"fluxArtifacts: [{url: oci://ghcr.io/org/fleet:latest, path: ./}]",
		"fluxArtifacts: [{url: https://ghcr.io/org/fleet, path: ./}]",
		"fluxArtifacts: [{url: oci://ghcr.io/org/fleet, path: ../other}]",
		"fluxArtifacts: [{url: oci://ghcr.io/org/fleet, path: ./}, {url: oci://ghcr.io/org/fleet/, path: a}]",
	} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "fluxArtifacts[") {
			t.Errorf("Parse(%q) = %v, want a fluxArtifacts error", bad, err)
		}
	}
}
