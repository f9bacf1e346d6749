package action

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"
)

func TestDiffStyleInput(t *testing.T) {
	for _, c := range []struct {
		value, want, err string
	}{
		{value: "", want: ""},
		{value: "fields", want: "fields"},
		{value: "unified", want: "unified"},
		{value: "side-by-side", err: "input diff-style"},
	} {
		env := map[string]string{"INPUT_DIFF-STYLE": c.value}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("diff-style %q: err %v, want one naming %q", c.value, err, c.err)
		case c.err == "" && (err != nil || in.DiffStyle != c.want):
			t.Errorf("diff-style %q: %q, %v; want %q", c.value, in.DiffStyle, err, c.want)
		}
	}
}

func TestIgnoreInputs(t *testing.T) {
	for _, c := range []struct {
		fields, kinds, err string
		want               int
	}{
		{fields: "metadata.annotations.checksum/*\nmetadata.labels.helm.sh/chart", kinds: "HorizontalPodAutoscaler", want: 3},
		{kinds: "Secret", err: "ignore kind Secret"},
		{fields: "*", err: "every field"},
	} {
		env := map[string]string{"INPUT_IGNORE-FIELDS": c.fields, "INPUT_IGNORE-KINDS": c.kinds}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q %q: err %v, want %q", c.fields, c.kinds, err, c.err)
		case c.err == "" && (err != nil || len(in.Plan.Ignore.Fields)+len(in.Plan.Ignore.Kinds) != c.want):
			t.Errorf("%q %q: %+v, %v", c.fields, c.kinds, in.Plan.Ignore, err)
		}
	}
}

func TestDangerInputs(t *testing.T) {
	for _, c := range []struct {
		fail, label, err string
		want             bool
	}{
		{want: false},
		{fail: "true", label: "risk-ok", want: true},
		{fail: "maybe", err: "input fail-on-dangerous"},
	} {
		env := map[string]string{"INPUT_FAIL-ON-DANGEROUS": c.fail, "INPUT_ALLOW-DANGEROUS-LABEL": c.label}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("fail-on-dangerous %q: err %v, want %q", c.fail, err, c.err)
		case c.err == "" && (err != nil || in.FailOnDangerous != c.want || in.AllowDangerousLabel != c.label):
			t.Errorf("fail-on-dangerous %q label %q: %v %q, %v", c.fail, c.label, in.FailOnDangerous, in.AllowDangerousLabel, err)
		}
	}
}

func TestShardAndMergeInputs(t *testing.T) {
	for _, c := range []struct {
		shard, merge, err string
		want              string
	}{
		{want: "0/0"},
		{shard: "2/3", want: "2/3"},
		{shard: "4/3", err: "input shard"},
		{shard: "1/2", merge: "parts", err: "inputs shard and merge"},
		{merge: "parts", want: "0/0"},
	} {
		env := map[string]string{"INPUT_SHARD": c.shard, "INPUT_MERGE": c.merge}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("shard %q merge %q: err %v, want %q", c.shard, c.merge, err, c.err)
		case c.err == "" && (err != nil || in.Plan.Shard.String() != c.want || in.merge != c.merge):
			t.Errorf("shard %q merge %q: %v %q, %v", c.shard, c.merge, in.Plan.Shard, in.merge, err)
		}
	}
}

// TestDefaultIgnoreInput pins the default-ignore input: the default noise
// set is on unless the input says false, and a value that is no boolean
// is refused naming the input.
func TestDefaultIgnoreInput(t *testing.T) {
	for _, c := range []struct {
		value string
		off   bool
		err   string
	}{{"", false, ""}, {"true", false, ""}, {"false", true, ""}, {"nope", false, "input default-ignore"}} {
		env := map[string]string{"INPUT_DEFAULT-IGNORE": c.value}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: err %v, want %q", c.value, err, c.err)
		case c.err == "" && (err != nil || in.Plan.NoDefaultIgnore != c.off):
			t.Errorf("%q: NoDefaultIgnore %v (%v), want %v", c.value, in.Plan.NoDefaultIgnore, err, c.off)
		}
	}
}

// The webhook-config input reads the webhook's configuration for the
// workflow's repository (GITHUB_REPOSITORY): its targets' clusters reach
// the plan; a file that does not configure the repository is an error
// naming the input, not a plan without them.
func TestWebhookConfigInput(t *testing.T) {
	f := filepath.Join(t.TempDir(), "webhook.yaml")
	y := "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\nrepositories:\n  - name: octo/shop\n    branches: [{name: main, targets: [{name: a, overlay: apps/a, context: prod}, {name: b, overlay: apps/b, context: prod}]}]\n"
	if err := os.WriteFile(f, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ repo, err string }{{repo: "octo/shop"}, {repo: "octo/other", err: "input webhook-config: " + f + " does not configure repository octo/other"}} {
		env := map[string]string{"INPUT_WEBHOOK-CONFIG": f, "GITHUB_REPOSITORY": c.repo}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.repo, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.repo, err)
		case !slices.Equal(in.Plan.DeployedTo["apps/b"], []string{"in-cluster#prod"}):
			t.Errorf("%s: the plan is told %v", c.repo, in.Plan.DeployedTo)
		}
	}
}

func TestArgoCDInput(t *testing.T) {
	on, off := true, false
	for _, c := range []struct {
		value string
		want  *bool
		err   string
	}{
		{value: "", want: nil},
		{value: "auto", want: nil},
		{value: "true", want: &on},
		{value: "false", want: &off},
		{value: "maybe", err: "input argocd: \"maybe\": want true, false or auto"},
	} {
		env := map[string]string{"INPUT_ARGOCD": c.value}
		a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(io.Discard))
		in, err := readInputs(a)
		got := in.Plan.ArgoCD
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("argocd %q: err %v, want %q", c.value, err, c.err)
		case c.err == "" && (err != nil || (got == nil) != (c.want == nil) || (got != nil && *got != *c.want)):
			t.Errorf("argocd %q: %v, %v; want %v", c.value, got, err, c.want)
		}
	}
}
