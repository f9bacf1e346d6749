package forge_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kplan-dev/kplan/"

// The seam holds: internal/forge imports nothing of kplan's, only
// internal/forge/github imports go-github, and only the wiring
// (cmd/webhook) and GitHub's CI entry point (internal/action, the Action)
// import the GitHub forge. A second forge is one package beside it, its
// CI entry point, and the wiring: no other package knows which forge it
// serves. (test/githubapi, the local GitHub API tests run against,
// speaks it too.)
func TestOnlyTheGitHubForgeSpeaksGitHub(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var importers []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], module), fields[1:]
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, "github.com/google/go-github/") && pkg != "internal/forge/github" && !strings.HasPrefix(pkg, "test/"):
				t.Errorf("%s imports %s: only internal/forge/github speaks GitHub's API", pkg, imp)
			case imp == module+"internal/forge/github":
				importers = append(importers, pkg)
			case pkg == "internal/forge" && strings.Contains(imp, "."):
				t.Errorf("internal/forge imports %s: the seam's types stand on the standard library alone", imp)
			}
		}
	}
	slices.Sort(importers)
	if want := []string{"cmd/webhook", "internal/action"}; !slices.Equal(importers, want) {
		t.Errorf("packages importing internal/forge/github: %q, want only the wiring and the Action %q", importers, want)
	}
}
