package forge_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
)

const module = "github.com/kplan-dev/kplan/"

// The seam holds: internal/forge imports nothing of kplan's, only the
// GitHub forge (internal/forge/github and its deploy reports,
// internal/forge/github/deploys) imports go-github, and only the wiring
// (cmd/webhook) and GitHub's CI entry point (internal/action, the Action)
// import the GitHub forge, the Action without the deploy reports (the
// plan-only binary links no deployer). A second forge is one package
// beside it, its CI entry point, and the wiring: no other package knows
// which forge it serves. (test/githubapi, the local GitHub API tests run
// against, speaks GitHub's API too.)
func TestOnlyTheGitHubForgeSpeaksGitHub(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const gh = "internal/forge/github"
	importers := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], module), fields[1:]
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, "github.com/google/go-github/") && pkg != gh && !strings.HasPrefix(pkg, gh+"/") && !strings.HasPrefix(pkg, "test/"):
				t.Errorf("%s imports %s: only the GitHub forge speaks GitHub's API", pkg, imp)
			case strings.HasPrefix(imp, module+gh):
				importers[strings.TrimPrefix(imp, module)] = append(importers[strings.TrimPrefix(imp, module)], pkg)
			case pkg == "internal/forge" && strings.Contains(imp, "."):
				t.Errorf("internal/forge imports %s: the seam's types stand on the standard library alone", imp)
			}
		}
	}
	want := map[string][]string{
		gh:              {"cmd/webhook", "internal/action", gh + "/deploys"},
		gh + "/deploys": {"cmd/webhook"},
	}
	checkImporters(t, importers, want)
}

// The same holds of GitLab: only internal/forge/gitlab and its deploy
// reports import GitLab's client (client-go), and only the wiring and
// GitLab CI's entry point (internal/gitlabci) import the GitLab forge,
// the entry point without the deploy reports.
func TestOnlyTheGitLabForgeSpeaksGitLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const gl = "internal/forge/gitlab"
	importers := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], module), fields[1:]
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, "gitlab.com/gitlab-org/api/client-go") && pkg != gl && !strings.HasPrefix(pkg, gl+"/") && !strings.HasPrefix(pkg, "test/"):
				t.Errorf("%s imports %s: only the GitLab forge speaks GitLab's API", pkg, imp)
			case strings.HasPrefix(imp, module+gl):
				importers[strings.TrimPrefix(imp, module)] = append(importers[strings.TrimPrefix(imp, module)], pkg)
			}
		}
	}
	checkImporters(t, importers, map[string][]string{
		gl:              {"cmd/webhook", gl + "/deploys", "internal/gitlabci"},
		gl + "/deploys": {"cmd/webhook"},
	})
}

func checkImporters(t *testing.T, importers, want map[string][]string) {
	t.Helper()
	for pkg, w := range want {
		got := importers[pkg]
		slices.Sort(got)
		if !slices.Equal(got, w) {
			t.Errorf("packages importing %s: %q, want %q", pkg, got, w)
		}
	}
}

// CutChars counts characters and never cuts one in two.
func TestCutChars(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"éèê", 2, "éè"}, {"😀😀", 1, "😀"}, {"abc", 0, ""}, {"é", -1, ""}} {
		if got := forge.CutChars(c.s, c.n); got != c.want {
			t.Errorf("CutChars(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
