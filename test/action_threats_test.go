package test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/markers"
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
			baits := []githubapi.Comment{gh.SeedComment(owner, repo, 2, "mallory", markers.PlanMarker+"\nNo changes. Approve away!")}
			if tt.login != "github-actions[bot]" {
				baits = append(baits, gh.SeedComment(owner, repo, 2, "github-actions[bot]", markers.PlanMarker+"\nsomeone else's plan"))
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
			stale := markers.PlanMarker + "\nthe plan of an earlier push"
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

// hostile are lines that are workflow commands when they start a line of
// the runner's log (or, the legacy form, anywhere in one).
var hostile = []string{"::error::pwned", "::stop-commands::x", "::add-mask::secret", "##[warning]legacy-pwned", "  ::notice title=t::indented-pwned"}

// runnerCommand is a workflow command the runner acts on.
type runnerCommand struct {
	name, data string
	props      map[string]string
}

// runnerCommandNames are the commands actions/runner registers
// (ActionCommandManager and its extensions); a line naming another is
// not a command.
var runnerCommandNames = []string{"add-mask", "add-matcher", "add-path", "debug", "echo", "endgroup", "error", "group",
	"notice", "remove-matcher", "save-state", "set-env", "set-output", "stop-commands", "warning"}

// runnerCommands reads a log as actions/runner does (ActionCommand.TryParseV2,
// then TryParse; ActionCommandManager.TryProcessCommand): a line is a
// command when, leading white space trimmed, it is ::name props::data, or
// when it holds ##[name props]data anywhere, name being a registered
// command (any case); after ::stop-commands::T no line is acted on until
// one whose command is T, which resumes. It returns the commands acted on
// (stop and resume included) and whether commands are stopped at the end.
func runnerCommands(log string) (cmds []runnerCommand, stopped bool) {
	unescape := strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%")
	token := ""
	for _, line := range strings.Split(log, "\n") {
		var info, data string
		if l := strings.TrimLeft(line, " \t"); strings.HasPrefix(l, "::") && strings.Contains(l[2:], "::") {
			info, data, _ = strings.Cut(l[2:], "::")
		} else if i := strings.Index(line, "##["); i >= 0 && strings.Contains(line[i:], "]") {
			info, data, _ = strings.Cut(line[i+3:], "]")
		} else {
			continue
		}
		name, props, _ := strings.Cut(info, " ")
		known := slices.ContainsFunc(runnerCommandNames, func(n string) bool { return strings.EqualFold(n, name) })
		switch {
		case stopped && token != "" && strings.EqualFold(name, token):
			stopped, token = false, ""
		case stopped || !known:
			continue
		case strings.EqualFold(name, "stop-commands"):
			stopped, token = true, data
		}
		c := runnerCommand{name: strings.ToLower(name), data: unescape.Replace(data), props: map[string]string{}}
		for _, p := range strings.FieldsFunc(props, func(r rune) bool { return r == ',' || r == ';' }) {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
				c.props[k] = unescape.Replace(v)
			}
		}
		cmds = append(cmds, c)
	}
	return cmds, stopped
}

func TestRunnerCommands(t *testing.T) {
	cmds, stopped := runnerCommands("a\n::error::one\n x ##[warning]two\n::STOP-COMMANDS::tok\n::error::no\n::x::\n##[tok]\n::error file=a%2Cb,title=t%3A::three%0Afour\n::stop-commands::t2\n")
	var got []string
	for _, c := range cmds {
		got = append(got, c.name+":"+c.data+fmt.Sprint(c.props))
	}
	want := []string{"error:onemap[]", "warning:twomap[]", "stop-commands:tokmap[]", "tok:map[]", "error:three\nfourmap[file:a,b title:t:]", "stop-commands:t2map[]"}
	if !slices.Equal(got, want) || !stopped {
		t.Errorf("runnerCommands = %q, stopped %v; want %q, stopped", got, stopped, want)
	}
}

// TestActionPlanCannotCommandTheRunner pins that what the Action prints
// from the repository (here a ConfigMap value, an overlay's directory
// name and a render error quoting the repository) is never a workflow
// command: the runner, reading the log as runnerCommands does, acts on
// kplan's own commands only: its annotations, groups and mask.
func TestActionPlanCannotCommandTheRunner(t *testing.T) {
	value := "ok\n" + strings.Join(hostile, "\n") + "\n"
	var indented strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(value, "\n"), "\n") {
		indented.WriteString("    " + l + "\n")
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: |\n" + indented.String()
	evilDir := "overlays/evil\n::error::pwned-path\n##[add-mask]secret-path"
	broken := "overlays/broken\n::error::pwned-broken"
	ws, base, head := threatPR(t,
		map[string]string{
			"overlays/app/kustomization.yaml": "resources: [cm.yaml]\n", "overlays/app/cm.yaml": configMap("app"),
			// Broken before the change: the log (stderr) names it.
			"overlays/old ##[error]pwned-log/kustomization.yaml": "resources: [missing.yaml]\n",
		},
		map[string]string{
			"overlays/app/cm.yaml": cm,
			// Touched, so planned, and still broken.
			"overlays/old ##[error]pwned-log/kustomization.yaml": "resources: [missing.yaml, gone.yaml]\n",
			evilDir + "/kustomization.yaml":                      "resources: [cm.yaml]\n",
			evilDir + "/cm.yaml":                                 strings.Replace(cm, "name: app", "name: evil", 1),
			// A render error naming the repository's text: kplan's own
			// annotation, which must stay a command, and one.
			broken + "/kustomization.yaml": "resources: [\"::error::pwned-missing.yaml\"]\n",
		})
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", base, head), gh.URL(), "ghs_test")
	err := r.run(t)
	if err == nil {
		t.Fatal("the run passed, want it failing on the broken overlay")
	}
	// As cmd/action's main does once Run returned.
	githubactions.New(githubactions.WithWriter(&r.stdout)).Errorf("kplan: %v", err)
	log := r.stdout.String()

	// The hostile lines are in the log where the runner would act on
	// them (starting a line, but for white space; ##[ anywhere)...
	lines := strings.Split(log, "\n")
	for _, h := range append(hostile, "::error::pwned-path", "##[add-mask]secret-path", "::error::pwned-broken") {
		h = strings.TrimSpace(h)
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.HasPrefix(strings.TrimSpace(l), h) || strings.HasPrefix(h, "##[") && strings.Contains(l, h)
		}) {
			t.Fatalf("the log lacks a line %q: the test tests nothing\n%s", h, log)
		}
	}
	// ...and the runner acts on kplan's commands only.
	cmds, stopped := runnerCommands(log)
	var errs []runnerCommand
	tokens := map[string]bool{}
	for _, c := range cmds {
		switch c.name {
		case "add-mask":
			if c.data != "ghs_test" {
				t.Errorf("the runner masks %q", c.data)
			}
		case "group", "endgroup":
		case "stop-commands":
			tokens[c.data] = true
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.data) {
				t.Errorf("stop-commands token %q: want 128 random bits in hex", c.data)
			}
		case "error":
			errs = append(errs, c)
		default:
			if !tokens[c.name] {
				t.Errorf("the runner acts on %s %v::%s", c.name, c.props, c.data)
			}
		}
	}
	if len(tokens) != 1 {
		t.Errorf("stop-commands tokens %v: want one for the run", tokens)
	}
	if stopped {
		t.Error("commands are still stopped when the Action ends: later steps' commands would be ignored")
	}
	// The log on stderr is no command even read while commands run.
	if !strings.Contains(r.stderr.String(), "pwned-log") {
		t.Fatalf("the log does not name the overlay broken before: the test tests nothing\n%s", r.stderr.String())
	}
	if cmds, _ := runnerCommands(r.stderr.String()); len(cmds) != 0 {
		t.Errorf("the runner acts on the log's %+v", cmds)
	}
	// kplan's own annotations are commands: the broken overlay's, on its
	// file, and the run's failure, each one annotation.
	if len(errs) != 2 || errs[0].props["title"] != "kplan: this change breaks "+broken || errs[0].props["file"] != broken+"/kustomization.yaml" ||
		!strings.HasPrefix(errs[1].data, "kplan: this change breaks 1 overlay: "+broken) {
		t.Errorf("error annotations %+v, want the broken overlay's and the run's", errs)
	}
}
