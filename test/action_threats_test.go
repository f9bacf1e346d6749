package test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/prcomment"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// threatPR is pull request 2 of Codertocat/Hello-World served over smart
// HTTP: main holds base, the pull request adds head on top, and the
// workspace is GitHub's merge commit checked out one commit deep, as
// actions/checkout leaves it on pull_request.
func threatPR(t *testing.T, base, head map[string]string) (ws, baseSHA, headSHA string) {
	t.Helper()
	root := t.TempDir()
	up := filepath.Join(root, "Codertocat", "Hello-World.git")
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, work, files)
		git(t, work, "add", "-A")
		git(t, work, "commit", "-qm", msg)
		return git(t, work, "rev-parse", "HEAD")
	}
	baseSHA = commit(base, "base")
	git(t, work, "checkout", "-qb", "feature")
	headSHA = commit(head, "the pull request")
	git(t, work, "checkout", "-q", "--detach", baseSHA)
	git(t, work, "merge", "-q", "--no-ff", "-m", "Merge "+headSHA+" into "+baseSHA, "feature")
	merge := git(t, work, "rev-parse", "HEAD")
	git(t, work, "update-ref", "refs/pull/2/merge", merge)
	git(t, work, "update-ref", "refs/pull/2/head", headSHA)
	git(t, work, "checkout", "-q", "main")
	git(t, work, "branch", "-D", "feature")
	git(t, root, "clone", "-q", "--mirror", work, up)
	git(t, up, "config", "uploadpack.allowReachableSHA1InWant", "true")
	srv := githttp.Serve(t, root, "")

	ws = filepath.Join(t.TempDir(), "workspace")
	git(t, t.TempDir(), "init", "-q", ws)
	git(t, ws, "remote", "add", "origin", srv.URL+"/Codertocat/Hello-World.git")
	git(t, ws, "fetch", "-q", "--no-tags", "--depth=1", "origin", "+refs/pull/2/merge:refs/remotes/pull/2/merge")
	git(t, ws, "checkout", "-q", "--force", "refs/remotes/pull/2/merge")
	return ws, baseSHA, headSHA
}

// TestActionStrangersMarkedCommentGetsNoPlan pins that the plan comment
// is the token's own: a stranger who comments kplan's marker first gets
// neither the plan written into their comment (which they could then
// edit) nor the plan withheld; a re-run edits kplan's comment only.
// Whom the token is comes from GET /user (a user's token), else from
// comment-author, else it is github-actions[bot], whom the workflow's
// token posts as.
func TestActionStrangersMarkedCommentGetsNoPlan(t *testing.T) {
	const owner, repo = "Codertocat", "Hello-World"
	tests := []struct {
		name, login, commentAuthor string
		// custom: github-token is not the workflow's (action.yml says so).
		custom bool
		// wantWarning: the token posts as someone kplan did not look for.
		wantWarning bool
	}{
		{name: "workflow token", login: "github-actions[bot]"},
		{name: "a user's token", login: "kplan-bot-user", custom: true},
		{name: "App token, comment-author set", login: "acme-kplan[bot]", commentAuthor: "acme-kplan[bot]", custom: true},
		{name: "App token, comment-author unset", login: "acme-kplan[bot]", custom: true, wantWarning: true},
	}
	ws, base, head := threatPR(t,
		map[string]string{"overlays/a/kustomization.yaml": "resources: [app.yaml]\n", "overlays/a/app.yaml": configMap("app-a")},
		map[string]string{"overlays/a/kustomization.yaml": "resources: [app.yaml, pr-change.yaml]\n", "overlays/a/pr-change.yaml": configMap("pr-change")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gh := githubapi.New()
			defer gh.Close()
			gh.AddToken("tok", githubapi.Identity{Login: tt.login})
			// Bait: marked comments by a stranger, posted before kplan's
			// first run, and by the workflow's bot when kplan is another.
			baits := []githubapi.Comment{gh.SeedComment(owner, repo, 2, "mallory", prcomment.PlanMarker+"\nNo changes. Approve away!")}
			if tt.login != "github-actions[bot]" {
				baits = append(baits, gh.SeedComment(owner, repo, 2, "github-actions[bot]", prcomment.PlanMarker+"\nsomeone else's plan"))
			}
			r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", base, head), gh.URL(), "tok")
			r.env["INPUT_COMMENT-AUTHOR"] = tt.commentAuthor
			r.env["KPLAN_GITHUB_TOKEN_IS_DEFAULT"] = strconv.FormatBool(!tt.custom)
			if err := r.run(t); err != nil {
				t.Fatal(err)
			}
			cs := gh.Comments(owner, repo, 2)
			if len(cs) != len(baits)+1 {
				t.Fatalf("%d comments, want the bait and kplan's own: %+v", len(cs), cs)
			}
			own := cs[len(cs)-1]
			if own.User.Login != tt.login || !strings.Contains(own.Body, "pr-change") {
				t.Errorf("kplan's comment is by %s and says:\n%s", own.User.Login, own.Body)
			}
			for i, b := range baits {
				if cs[i] != b {
					t.Errorf("kplan changed %s's comment: %q", b.User.Login, cs[i].Body)
				}
			}
			warned := strings.Contains(r.stdout.String(), "set the input comment-author: "+tt.login)
			if warned != tt.wantWarning {
				t.Errorf("warning to set comment-author: %v, want %v:\n%s", warned, tt.wantWarning, r.stdout.String())
			}

			// The plan of an earlier push, then a re-run: kplan's comment
			// is edited (or, not knowing it, another posted); the bait
			// never.
			stale := prcomment.PlanMarker + "\nthe plan of an earlier push"
			if _, _, err := gh.Client("tok").Issues.EditComment(t.Context(), owner, repo, own.ID, &github.IssueComment{Body: &stale}); err != nil {
				t.Fatal(err)
			}
			gh.ResetRequests()
			if err := r.run(t); err != nil {
				t.Fatal(err)
			}
			cs = gh.Comments(owner, repo, 2)
			for i, b := range baits {
				if cs[i] != b {
					t.Errorf("re-run: kplan changed %s's comment: %q", b.User.Login, cs[i].Body)
				}
			}
			var patched []string
			for _, req := range gh.Requests() {
				if req.Method == "PATCH" {
					patched = append(patched, req.Path)
				}
			}
			if tt.wantWarning {
				if len(cs) != len(baits)+2 || len(patched) != 0 {
					t.Errorf("re-run not knowing whom the token is: %d comments, edits %v; want another comment, no edit", len(cs), patched)
				}
				return
			}
			if len(cs) != len(baits)+1 || len(patched) != 1 || !strings.HasSuffix(patched[0], "/comments/"+strconv.FormatInt(own.ID, 10)) {
				t.Errorf("re-run: %d comments, edits %v; want kplan's comment %d edited", len(cs), patched, own.ID)
			}
			if c := cs[len(cs)-1]; !strings.Contains(c.Body, "pr-change") {
				t.Errorf("re-run: kplan's comment says:\n%s", c.Body)
			}
		})
	}
}
