package helm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/testchart"
)

// Flux sources whose charts need credentials (a HelmRepository behind
// basic auth, an OCIRepository behind a registry's token service, each
// with a secretRef, which names a Secret of the cluster kplan does not
// read): rendered with the credentials of Helm's files; without them the
// release is not rendered, its note naming the source's Secret and where
// kplan takes credentials from, and printing none.
func TestPrivateSourcesRender(t *testing.T) {
	const user, password = "flux", "pr1vate-pa55"
	repo := testchart.ServeRepoWith(t, testchart.RepoOptions{User: user, Password: password})
	repo.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	reg := testchart.ServeRegistryWith(t, testchart.RegistryOptions{User: user, Password: password})
	reg.Push(t, "charts", testchart.Package(t, demo, "1.1.0", "1.1.0"))

	dir := t.TempDir()
	repos := filepath.Join(dir, "repositories.yaml")
	if err := os.WriteFile(repos, []byte("repositories:\n- name: private\n  url: "+repo.URL+"\n  username: "+user+"\n  password: "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(dir, "config.json")
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	if err := os.WriteFile(registry, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	src := sources(
		`{kind: HelmRepository, metadata: {name: private, namespace: apps}, spec: {url: `+repo.URL+`, secretRef: {name: charts-auth}}}`,
		`{kind: OCIRepository, metadata: {name: demo, namespace: apps}, spec: {url: "oci://`+reg.Host+`/charts/demo", ref: {tag: 1.1.0}, secretRef: {name: registry-auth}}}`)
	for _, tc := range []struct{ name, spec, tag, secret string }{
		{"HelmRepository", `{chart: {spec: {chart: demo, version: 1.0.0, sourceRef: {kind: HelmRepository, name: private}}}}`, "1.0.0", "apps/charts-auth"},
		{"OCIRepository", `{chartRef: {kind: OCIRepository, name: demo}}`, "1.1.0", "apps/registry-auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRelease(t, `{metadata: {name: demo, namespace: apps}, spec: `+tc.spec+`}`)
			_, err := Prepare(context.Background(), r, Env{Source: src, Charts: charts.New(charts.Options{Policy: loopback(t), Auth: &charts.Auth{}})})
			var un *UnavailableError
			if !errors.As(err, &un) || !strings.Contains(err.Error(), "Secret "+tc.secret+", which kplan does not read") ||
				!strings.Contains(err.Error(), "docs/charts.md#credentials") || strings.Contains(err.Error(), password) {
				t.Fatalf("without credentials: %v, want the release unavailable, naming Secret %s", err, tc.secret)
			}
			auth := &charts.Auth{RepositoryConfig: repos, RegistryConfig: registry}
			got := renderOK(t, r, Env{Source: src, Charts: charts.New(charts.Options{Policy: loopback(t), Auth: auth})})
			if img := field(t, got["Deployment apps/demo"], "spec", "template", "spec", "containers", "[name=demo]", "image"); img != "ghcr.io/example/demo:"+tc.tag {
				t.Errorf("image %s, want tag %s", img, tc.tag)
			}
		})
	}
}
