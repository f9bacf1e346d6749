package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// sharedModules are the modules whose packages both kplan and the tools
// modules compile: held at one version in go.mod, tools/cluster/go.mod
// and tools/helm/go.mod, Go's build cache compiles each package once for
// all three (a fresh machine's first make test compiles about 600 fewer
// packages building kube-apiserver and 670 fewer building helm).
var sharedModules = []string{"k8s.io/", "golang.org/x/", "google.golang.org/protobuf", "go.yaml.in/yaml/", "github.com/google/gnostic-models", "sigs.k8s.io/structured-merge-diff/"}

// TestToolsShareTheMainModulesVersions: every shared module tools/cluster
// and tools/helm require (after their replace directives) is at the main
// module's version.
func TestToolsShareTheMainModulesVersions(t *testing.T) {
	main := versions(t, "../go.mod")
	for _, tool := range []string{"../tools/cluster/go.mod", "../tools/helm/go.mod"} {
		for mod, v := range versions(t, tool) {
			want, ok := main[mod]
			if !ok || want == v || !shared(mod) {
				continue
			}
			t.Errorf("%s: %s %s, the main module has %s: align them (go get %s@%s in %s), or the build compiles it twice",
				tool, mod, v, want, mod, want, filepath.Dir(tool))
		}
	}
}

func shared(mod string) bool {
	for _, p := range sharedModules {
		if strings.HasPrefix(mod, p) {
			return true
		}
	}
	return false
}

// versions are a go.mod's required versions, replacements applied.
func versions(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := out[r.Old.Path]; ok && r.New.Version != "" {
			out[r.Old.Path] = r.New.Version
		}
	}
	return out
}
