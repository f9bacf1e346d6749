package approval_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/test/gittest"
)

// repo is a test repository whose branch main the tests grow.
type repo struct {
	t   testing.TB
	dir string
}

func newRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit(files, "base")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	return gittest.Git(r.t, r.dir, args...)
}

// commit commits files ("" deletes) on the branch checked out.
func (r *repo) commit(files map[string]string, msg string) string {
	r.t.Helper()
	gittest.Write(r.t, r.dir, files)
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// branch checks out a new branch at commit.
func (r *repo) branch(name, at string) {
	r.t.Helper()
	r.git("checkout", "-q", "-B", name, at)
}

// mergePR merges head into main as GitHub's merge button does: a merge
// commit, a squash, or the commits rebased (method merge, squash, rebase).
func (r *repo) mergePR(method, fork, head string) string {
	r.t.Helper()
	r.git("checkout", "-q", "main")
	switch method {
	case "merge":
		r.git("merge", "-q", "--no-ff", "-m", "merge", head)
	case "squash":
		r.git("merge", "-q", "--squash", head)
		r.git("commit", "-q", "--allow-empty", "-m", "squash")
	case "rebase":
		r.git("cherry-pick", "--allow-empty", fork+".."+head)
	}
	return r.git("rev-parse", "HEAD")
}

func (r *repo) check(deployed, tip string, rec *approval.Record, scope approval.Scope) *approval.Result {
	r.t.Helper()
	res, err := approval.Check(context.Background(), approval.CLI{Repo: gitcli.Repo{Dir: r.dir}},
		approval.Input{Deployed: deployed, Tip: tip, Record: rec, Scope: scope})
	if err != nil {
		r.t.Fatalf("Check: %v", err)
	}
	return res
}

func pull(n int, base, head, merge string, commits int, reviews ...approval.Review) approval.Pull {
	return approval.Pull{Number: n, Base: approval.Ref{Ref: "main", SHA: base}, Head: approval.Ref{SHA: head},
		Merge: merge, MergedAt: "2026-01-01T00:00:00Z", Commits: commits, Reviews: reviews}
}

func review(login, state, commit string) approval.Review {
	return approval.Review{User: approval.User{Login: login}, State: state, CommitID: commit}
}

var writers = map[string]string{"alice": "write", "bob": "admin", "carol": "maintain", "eve": "read"}

func verdicts(res *approval.Result) string {
	var b []string
	for _, s := range res.Steps {
		b = append(b, string(s.Kind)+":"+string(s.Verdict))
	}
	return strings.Join(b, " ")
}

// The bypass: a direct push to main, then any approved pull request
// merged after it. Merging the approved head into what runs (its merge
// base with the head is what runs) counted the push as approved; step by
// step, the push is refused and the later approval does not carry it.
func TestLaunderingADirectPushThroughALaterPRIsRefused(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	push := r.commit(map[string]string{"app/a": "evil\n"}, "direct push")
	r.branch("pr", push)
	head := r.commit(map[string]string{"app/b": "2\n"}, "pr")
	merge := r.mergePR("merge", push, head)
	rec := &approval.Record{Pulls: []approval.Pull{pull(7, push, head, merge, 1, review("alice", approval.Approved, head))}, Permissions: writers}
	res := r.check(deployed, merge, rec, nil)
	if res.Verdict != approval.VerdictRefused || res.Refused == nil || res.Refused.Commit != push || res.Refused.Kind != approval.KindPush {
		t.Fatalf("verdict %s, refused %+v; want refused at the push %s", res.Verdict, res.Refused, push)
	}
	if got := verdicts(res); got != "push:refused pull:refused" {
		t.Errorf("steps %s", got)
	}
	if last := res.Steps[1]; last.Carries != push || !strings.Contains(last.Why, "never carries") {
		t.Errorf("the approved PR's step %+v: want it to say it carries the push", last)
	}
	for _, s := range res.Steps {
		if strings.Contains(s.Fix, "empty commit") || strings.Contains(s.Fix, "merge again") {
			t.Errorf("advice that would launder: %s", s.Fix)
		}
	}
	// A revert of the push returns to an approved state: applied.
	revert := r.commit(map[string]string{"app/a": "1\n"}, "revert the push")
	if res := r.check(deployed, revert, rec, nil); res.Verdict != approval.VerdictApproved || verdicts(res) != "push:refused pull:refused push:reverted" {
		t.Errorf("after the revert: %s %s (%s)", res.Verdict, verdicts(res), res.Why)
	}
	// So does an override of the push by a writer; by a reader it is not.
	rec.Overrides = []approval.Override{{Commit: push, User: approval.User{Login: "eve"}}}
	if res := r.check(deployed, merge, rec, nil); res.Verdict != approval.VerdictRefused {
		t.Errorf("overridden by a reader: %s", res.Verdict)
	}
	rec.Overrides = append(rec.Overrides, approval.Override{Commit: push, User: approval.User{Login: "bob"}})
	if res := r.check(deployed, merge, rec, nil); res.Verdict != approval.VerdictApproved || verdicts(res) != "push:overridden pull:approved" {
		t.Errorf("overridden by a writer: %s %s", res.Verdict, verdicts(res))
	}
	// An override of the tip counts though the tip changes nothing.
	r.branch("docs", merge)
	docs := r.commit(map[string]string{"README": "x\n"}, "docs")
	rec.Overrides = []approval.Override{{Commit: docs, User: approval.User{Login: "bob"}}}
	if res := r.check(deployed, docs, rec, approval.Dir("app")); res.Verdict != approval.VerdictApproved || verdicts(res) != "push:refused pull:refused push:overridden" {
		t.Errorf("the tip overridden: %s %s", res.Verdict, verdicts(res))
	}
	// Restricted to a target that does not read app/a, the push needs no
	// approval.
	rec.Overrides = nil
	if res := r.check(deployed, merge, rec, approval.Dir("app/b")); res.Verdict != approval.VerdictApproved || verdicts(res) != "push:unaffected pull:approved" {
		t.Errorf("scope app/b: %s %s", res.Verdict, verdicts(res))
	}
}

// A force-push replaced what runs (an approved pull request) with a commit
// no one approved, and an unrelated approved pull request was merged on
// top. Falling back to the merge's first parent approved it; the rule
// starts from the fork point, which differs from what runs.
func TestForcePushOverAnUnrelatedApprovedPRIsRefused(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n"})
	fork := r.git("rev-parse", "HEAD")
	r.branch("pr1", fork)
	h1 := r.commit(map[string]string{"app/a": "2\n"}, "pr1")
	deployed := r.mergePR("merge", fork, h1)
	r.git("reset", "-q", "--hard", fork)
	forced := r.commit(map[string]string{"app/a": "evil\n"}, "force-pushed")
	r.branch("pr2", forced)
	h2 := r.commit(map[string]string{"app/b": "2\n"}, "pr2")
	m2 := r.mergePR("merge", forced, h2)
	rec := &approval.Record{Pulls: []approval.Pull{
		pull(1, fork, h1, deployed, 1, review("alice", approval.Approved, h1)),
		pull(2, forced, h2, m2, 1, review("alice", approval.Approved, h2)),
	}, Permissions: writers}
	res := r.check(deployed, m2, rec, nil)
	if res.Verdict != approval.VerdictRefused || res.Refused == nil || res.Refused.Kind != approval.KindHistory {
		t.Fatalf("verdict %s, refused %+v (%s); want refused at the rewritten history", res.Verdict, res.Refused, verdicts(res))
	}
	if !strings.Contains(res.Refused.Why, "force-push") {
		t.Errorf("why: %s", res.Refused.Why)
	}
	// A force-push that redoes what runs (the same tree, squashed) and
	// then an approved pull request: every change is covered.
	r.git("checkout", "-q", "main")
	r.git("reset", "-q", "--hard", fork)
	redo := r.commit(map[string]string{"app/a": "2\n"}, "pr1 squashed again")
	r.branch("pr3", redo)
	h3 := r.commit(map[string]string{"app/b": "3\n"}, "pr3")
	m3 := r.mergePR("squash", redo, h3)
	rec.Pulls = append(rec.Pulls, pull(3, redo, h3, m3, 1, review("bob", approval.Approved, h3)))
	if res := r.check(deployed, m3, rec, nil); res.Verdict != approval.VerdictApproved {
		t.Errorf("a rewrite back to what runs, then an approved PR: %s %s (%s)", res.Verdict, verdicts(res), res.Why)
	}
	// The tip rewound to before what runs: refused, unless a writer
	// overrides it.
	if res := r.check(deployed, fork, rec, nil); res.Verdict != approval.VerdictRefused {
		t.Errorf("rewound: %s", res.Verdict)
	}
	rec.Overrides = []approval.Override{{Commit: fork, User: approval.User{Login: "bob"}}}
	if res := r.check(deployed, fork, rec, nil); res.Verdict != approval.VerdictApproved || verdicts(res) != "history:overridden" {
		t.Errorf("rewound, overridden: %s %s", res.Verdict, verdicts(res))
	}
	// A history that shares nothing with what runs.
	r.git("checkout", "-q", "--orphan", "other")
	other := r.commit(map[string]string{"app/a": "2\n"}, "unrelated")
	if res := r.check(deployed, other, rec, nil); res.Verdict != approval.VerdictRefused || !strings.Contains(res.Why, "shares no history") {
		t.Errorf("unrelated: %s (%s)", res.Verdict, res.Why)
	}
}

// Two approved pull requests merged back to back (a merge queue) are
// approved, one verdict per step, whatever the merge method.
func TestApprovedPRsMergedBackToBackAreApproved(t *testing.T) {
	for _, method := range []string{"merge", "squash", "rebase"} {
		t.Run(method, func(t *testing.T) {
			r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n", "app/c": "1\n"})
			deployed := r.git("rev-parse", "HEAD")
			r.branch("pr1", deployed)
			r.commit(map[string]string{"app/a": "2\n"}, "pr1 one")
			h1 := r.commit(map[string]string{"app/c": "2\n"}, "pr1 two")
			r.branch("pr2", deployed)
			h2 := r.commit(map[string]string{"app/b": "2\n"}, "pr2")
			m1 := r.mergePR(method, deployed, h1)
			m2 := r.mergePR(method, deployed, h2)
			rec := &approval.Record{Pulls: []approval.Pull{
				pull(1, deployed, h1, m1, 2, review("alice", approval.Approved, h1)),
				pull(2, deployed, h2, m2, 1, review("carol", approval.Approved, h2)),
			}, Permissions: writers}
			res := r.check(deployed, m2, rec, nil)
			if res.Verdict != approval.VerdictApproved || verdicts(res) != "pull:approved pull:approved" {
				t.Fatalf("%s %s (%s)", res.Verdict, verdicts(res), res.Why)
			}
			if res.Steps[0].PR != 1 || res.Steps[1].PR != 2 || res.Steps[1].Approval.By != "carol" {
				t.Errorf("steps %+v", res.Steps)
			}
			if method == "rebase" && len(res.Steps[0].Commits) != 2 {
				t.Errorf("the rebase of #1: %d commits, want 2", len(res.Steps[0].Commits))
			}
		})
	}
}

// One approver whose permission cannot be read (GitHub answers 404 for a
// bot or a deleted user) counts as not a writer, and is named; the
// writer's approval still counts.
func TestUnreadableApproverDoesNotVoidTheOthers(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	r.branch("pr", deployed)
	head := r.commit(map[string]string{"app/a": "2\n"}, "pr")
	merge := r.mergePR("merge", deployed, head)
	rec := &approval.Record{Pulls: []approval.Pull{pull(4, deployed, head, merge, 1,
		review("renovate[bot]", approval.Approved, head), review("alice", approval.Approved, head))}, Permissions: writers}
	res := r.check(deployed, merge, rec, nil)
	if res.Verdict != approval.VerdictApproved || len(res.Unreadable) != 1 || res.Unreadable[0] != "renovate[bot]" {
		t.Fatalf("%s, unreadable %v (%s)", res.Verdict, res.Unreadable, res.Why)
	}
	// Alone, the unreadable approver approves nothing, and the verdict
	// says why.
	rec.Pulls[0].Reviews = rec.Pulls[0].Reviews[:1]
	res = r.check(deployed, merge, rec, nil)
	if res.Verdict != approval.VerdictRefused || !strings.Contains(res.Refused.Why, "@renovate[bot] could not be read") {
		t.Errorf("%s: %+v", res.Verdict, res.Refused)
	}
}

// Dismissed reviews and readers' approvals count for nothing; an approval
// counts for the commit it was given on, so a push after it is refused.
func TestApprovalsThatDoNotCount(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	r.branch("pr", deployed)
	approved := r.commit(map[string]string{"app/a": "2\n"}, "pr")
	head := r.commit(map[string]string{"app/b": "evil\n"}, "pushed after the approval")
	merge := r.mergePR("squash", deployed, head)
	for name, reviews := range map[string][]approval.Review{
		"pushed after the approval": {review("alice", approval.Approved, approved)},
		"dismissed":                 {review("alice", approval.Approved, head), review("alice", approval.Dismissed, head)},
		"changes requested after":   {review("alice", approval.Approved, head), review("alice", approval.ChangesRequested, head)},
		"a reader":                  {review("eve", approval.Approved, head)},
		"none":                      nil,
	} {
		rec := &approval.Record{Pulls: []approval.Pull{pull(5, deployed, head, merge, 2, reviews...)}, Permissions: writers}
		if res := r.check(deployed, merge, rec, nil); res.Verdict != approval.VerdictRefused || res.Refused.PR != 5 {
			t.Errorf("%s: %s %s (%s)", name, res.Verdict, verdicts(res), res.Why)
		}
	}
	rec := &approval.Record{Pulls: []approval.Pull{pull(5, deployed, head, merge, 2,
		review("alice", approval.Approved, approved), review("alice", approval.Commented, head), review("bob", approval.Approved, head))}, Permissions: writers}
	if res := r.check(deployed, merge, rec, nil); res.Verdict != approval.VerdictApproved || res.Steps[0].Approval.By != "bob" {
		t.Errorf("approved at the head: %s (%s)", res.Verdict, res.Why)
	}
	// Restricted to app/a, what alice approved is what the target reads.
	rec.Pulls[0].Reviews = rec.Pulls[0].Reviews[:1]
	if res := r.check(deployed, merge, rec, approval.Dir("app/a")); res.Verdict != approval.VerdictApproved {
		t.Errorf("scope app/a: %s (%s)", res.Verdict, res.Why)
	}
}

// Nothing changed, and commits that change nothing the target reads.
func TestUnaffected(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "docs/x": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	if res := r.check(deployed, deployed, nil, nil); res.Verdict != approval.VerdictUnaffected || len(res.Steps) != 0 {
		t.Errorf("the same commit: %s %v", res.Verdict, res.Steps)
	}
	tip := r.commit(map[string]string{"docs/x": "2\n"}, "docs")
	if res := r.check(deployed, tip, nil, approval.Dir("app")); res.Verdict != approval.VerdictUnaffected || verdicts(res) != "push:unaffected" {
		t.Errorf("a docs push, target app: %s %s", res.Verdict, verdicts(res))
	}
	if res := r.check(deployed, tip, nil, nil); res.Verdict != approval.VerdictRefused {
		t.Errorf("a docs push, the whole tree: %s", res.Verdict)
	}
}

// gitOut runs git in dir, its failure an error (a merge's conflicts).
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// A rebase merge of an approved pull request after a refused push is one
// step, refused for the push it carries, and its approved diff counts once
// the push is reverted.
func TestRebaseRunAfterARefusedPush(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n", "app/c": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	push := r.commit(map[string]string{"app/a": "evil\n"}, "direct push")
	r.branch("pr", push)
	r.commit(map[string]string{"app/b": "2\n"}, "pr one")
	head := r.commit(map[string]string{"app/c": "2\n"}, "pr two")
	last := r.mergePR("rebase", push, head)
	rec := &approval.Record{Pulls: []approval.Pull{pull(8, push, head, last, 2, review("alice", approval.Approved, head))}, Permissions: writers}
	res := r.check(deployed, last, rec, nil)
	if res.Verdict != approval.VerdictRefused || verdicts(res) != "push:refused pull:refused" || len(res.Steps[1].Commits) != 2 || res.Steps[1].Carries != push {
		t.Fatalf("%s %s %+v", res.Verdict, verdicts(res), res.Steps)
	}
	revert := r.commit(map[string]string{"app/a": "1\n"}, "revert the push")
	if res := r.check(deployed, revert, rec, nil); res.Verdict != approval.VerdictApproved {
		t.Errorf("after the revert: %s %s (%s)", res.Verdict, verdicts(res), res.Why)
	}
}

// A direct push just before a squash merge of a pull request of two
// commits is a step of its own, not the first commit of a rebase: the
// pull request's commits are matched by author, date and message. (The
// property test's seed 86: the push, then a squash whose second commit,
// pushed after the approval, undid it, passed as the approved diff of a
// two-commit rebase.)
func TestAPushBeforeASquashIsItsOwnStep(t *testing.T) {
	r := newRepo(t, map[string]string{"app/a": "1\n", "app/b": "1\n"})
	deployed := r.git("rev-parse", "HEAD")
	r.branch("pr", deployed)
	approved := r.commit(map[string]string{"app/b": "2\n"}, "pr one")
	r.git("checkout", "-q", "main")
	push := r.commit(map[string]string{"app/a": "evil\n"}, "direct push")
	r.git("checkout", "-q", "pr")
	r.git("merge", "-q", "--no-edit", "main")
	head := r.commit(map[string]string{"app/a": "1\n"}, "pr two: undo the push")
	squash := r.mergePR("squash", push, head)
	rec := &approval.Record{Pulls: []approval.Pull{pull(6, push, head, squash, 2, review("alice", approval.Approved, approved))}, Permissions: writers}
	res := r.check(deployed, squash, rec, nil)
	if res.Verdict != approval.VerdictRefused || verdicts(res) != "push:refused pull:refused" || res.Refused.Commit != push {
		t.Errorf("%s %s (%s)", res.Verdict, verdicts(res), res.Why)
	}
}
