package test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// The Action on an Argo CD repository (testdata/argocd-example): a
// kustomize Application, a Helm one and an ApplicationSet's git
// directory Applications, each a target; the pull request bumps the
// kustomize image, the chart's value file, scales a Deployment whose
// replicas the Application's ignoreDifferences leave out, removes an
// object marked Prune=false and adds a team directory. The comment is
// docs/argocd.md's example, written by -update.
func TestActionArgoCDExampleComment(t *testing.T) {
	// Fixed dates: the commits, and so the comment's SHAs, are the same
	// on every run.
	t.Setenv("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
	t.Setenv("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
	base := testkit.Files(t, "../testdata/argocd-example/base")
	head := testkit.Files(t, "../testdata/argocd-example/head")
	up, baseSHA, headSHA := prRepo(t, base, head)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), gh.URL(), "ghs_test")
	r.env["INPUT_ARGOCD"] = "true"
	body := planComment(t, r, gh, ws)

	for _, want := range []string{
		// One target per Application, the ApplicationSet's new one too.
		"`argocd/shop`", "`argocd/web`", "`argocd/team-red`",
		// The kustomize image and the chart's value file, as Argo CD renders them.
		"registry.example.com/shop:2.0` → `registry.example.com/shop:2.1`",
		"registry.example.com/web:1.4` → `registry.example.com/web:1.5`",
		// Prune=false: left in the cluster, said why, not pruned.
		"ConfigMap prod-legacy-settings (shop) stays in the cluster: its argocd.argoproj.io/sync-options says Prune=false",
		// ignoreDifferences: the replicas change is hidden and counted.
		"jsonPointers /spec/replicas of apps/Deployment",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "spec.replicas: 2 → 4") {
		t.Errorf("the replicas change Argo CD's diff ignores is shown:\n%s", body)
	}
	// The footer's render time is the one thing that varies.
	body = took.ReplaceAllString(body, "; TIME.</sub>")
	testkit.Golden(t, "../testdata/argocd-example/comment.md.golden", body)
	testkit.Generated(t, "../docs/argocd.md", "argocd example comment", "````markdown\n"+body+"\n````\n")
}

var took = regexp.MustCompile(`; [0-9.]+(ms|s|µs|m[0-9.]*s)\.</sub>`)
