package main

import (
	"os"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testchart"
)

// The common multi-source Application, a chart from a Helm repository
// with value files from a `ref: values` source of this repository, is
// planned on a pull request that bumps the chart's version range and a
// $ref value file: kplan diff fetches the chart from the repository
// (allowed with --remote-hosts) and shows the Deployment's new image
// and replicas; without the host allowed, the Application fails with
// the refusal naming the setting.
func TestDiffPlansArgoCDRemoteChartWithRefValues(t *testing.T) {
	const src = "../../internal/argocd/testdata/remote"
	repo := testchart.ServeRepo(t)
	for _, v := range []string{"1.0.0", "1.1.0"} {
		repo.Add(t, testchart.Package(t, src+"/shop", v, v))
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src+"/repo")); err != nil {
		t.Fatal(err)
	}
	// Only the Helm repository's Application: the others' servers are
	// not running here.
	for _, p := range []string{"apps/shop-oci.yaml", "apps/umbrella.yaml", "apps/root.yaml"} {
		if err := os.Remove(dir + "/" + p); err != nil {
			t.Fatal(err)
		}
	}
	app, err := os.ReadFile(dir + "/apps/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shop := strings.ReplaceAll(string(app), "CHARTS_URL", repo.URL)
	write(t, dir, map[string]string{"apps/shop.yaml": shop})
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	write(t, dir, map[string]string{
		"apps/shop.yaml":      strings.Replace(shop, `"~1.0"`, `"~1.1"`, 1),
		"envs/prod/shop.yaml": "replicas: 6\nimage:\n  repository: registry.example.com/shop\n",
	})
	git(t, dir, "commit", "-qam", "shop 1.1, 6 replicas")

	p := diffJSON(t, "-C", dir, "--base", "main~", "--head", "HEAD", "--remote-hosts", "127.0.0.1")
	o := p.overlay(t, "argocd/shop")
	if o.Status != "changed" || len(o.Changed) != 1 || !strings.Contains(o.Changed[0], "Deployment|shop|shop") {
		t.Fatalf("argocd/shop: %+v", o)
	}
	fields := map[string]string{}
	for _, f := range o.Fields[o.Changed[0]] {
		fields[f.Path] = string(f.Old) + " -> " + string(f.New)
	}
	for path, want := range map[string]string{
		"spec.replicas": "4 -> 6",
		"spec.template.spec.containers[name=shop].image": `"registry.example.com/shop:1.0.0" -> "registry.example.com/shop:1.1.0"`,
	} {
		if fields[path] != want {
			t.Errorf("%s: %q, want %q (fields %q)", path, fields[path], want, fields)
		}
	}
	text, stderr, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~", "--head", "HEAD", "--remote-hosts", "127.0.0.1")
	if err != nil {
		t.Fatalf("kplan diff: %v\n%s", err, stderr)
	}
	if !strings.Contains(text, "argocd/shop: 0 to add, 1 to change, 0 to prune") {
		t.Errorf("text plan lacks the Application's change:\n%s", text)
	}

	refused := diffJSON(t, "-C", dir, "--base", "main~", "--head", "HEAD")
	if o := refused.overlay(t, "argocd/shop"); o.Status != "error" || !strings.Contains(o.Error, "refused") || !strings.Contains(o.Error, "allow it with --remote-hosts 127.0.0.1") {
		t.Errorf("without --remote-hosts: %+v, want a failure naming the setting", o)
	}
}
