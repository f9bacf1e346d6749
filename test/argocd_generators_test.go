package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// An Argo CD repository whose ApplicationSets generate Applications from
// git files, .kplan.yaml's clusters, matrix and merge generators, planned
// by kplan diff: a pull request changing one git file's env plans the
// Applications made from it, named by cluster and Application, declared
// by their ApplicationSet's file: the Go-template one moves namespace,
// the matrix one is replaced by the one of the new env; the
// default-syntax one, which does not use env, is unchanged.
func TestArgoCDApplicationSetGeneratorsPlan(t *testing.T) {
	kplan := buildKplan(t)
	fx := gittest.Copy(t, "../internal/argocd/testdata/generators")
	fx.Init("generators")
	gittest.Git(t, fx.Dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	fx.Edit("config/api/config.yaml", "env: staging", "env: qa")

	cmd := exec.Command(kplan, "diff", "-C", fx.Dir, "--base", "main~1", "--head", "main", "--format", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
	}
	var p fluxPlan // the same JSON
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	type target struct{ status, file, added, pruned string }
	got := map[string]target{}
	for _, o := range p.Overlays {
		if o.Error != "" {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
		if o.Status != "unchanged" {
			got[o.Path] = target{o.Status, o.File, strings.Join(o.Added, ","), strings.Join(o.Pruned, ",")}
		}
	}
	want := map[string]target{
		"in-cluster: argocd/api-go":        {"changed", "sets/files-go.yaml", "~G_v1_ConfigMap|qa-api|api", "~G_v1_ConfigMap|staging-api|api"},
		"in-cluster: argocd/api-qa-m":      {"new", "sets/matrix.yaml", "~G_v1_ConfigMap|qa|api", ""},
		"in-cluster: argocd/api-staging-m": {"removed", "sets/matrix.yaml", "", "~G_v1_ConfigMap|staging|api"},
	}
	if len(got) != len(want) {
		t.Errorf("changed %+v, want %+v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	var names []string
	for _, o := range p.Overlays {
		names = append(names, o.Path)
	}
	if !slices.Contains(names, "prod: argocd/web-prod") || !slices.Contains(names, "in-cluster: argocd/api-files") {
		t.Errorf("targets %q: the clusters and git files ApplicationSets' Applications are not all planned", names)
	}
}
