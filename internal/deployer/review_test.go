package deployer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/githttp"
)

// fakeReviews is the forge's record of a branch's merged pull requests:
// each with its reviews, merger and plan comment; writers may push, and
// the permission of an unreadable login cannot be read (GitHub's 404 for
// bots and deleted users).
type fakeReviews struct {
	mu         sync.Mutex
	pulls      []approval.Pull
	plans      map[int]*markers.Reviewed
	writers    map[string]bool
	unreadable map[string]bool
	err        error
	asked      [][]string // the commits each Pulls call asked about
}

func (f *fakeReviews) Pulls(ctx context.Context, t Target, commits []string) ([]approval.Pull, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, commits)
	if f.err != nil {
		return nil, f.err
	}
	var out []approval.Pull
	for _, p := range f.pulls {
		if slices.Contains(commits, p.Merge) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeReviews) ReviewedPlan(ctx context.Context, t Target, pr int) (*markers.Reviewed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plans[pr], f.err
}

func (f *fakeReviews) CanWrite(ctx context.Context, t Target, login string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unreadable[login] {
		return false, fmt.Errorf("the permission of @%s: 404 Not Found", login)
	}
	return f.writers[login], f.err
}

// world is a config repository served over smart HTTP, its main branch
// built merge by merge, and the forge's review record of it.
type world struct {
	t    *testing.T
	repo string
	url  string
	m    GitMirror
	rev  *fakeReviews
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "cfg.git")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	srv := githttp.Serve(t, root, "tok")
	w := &world{t: t, repo: repo, url: srv.URL + "/octo/cfg.git", m: GitMirror{&gitmirror.Mirrors{Dir: t.TempDir(), Token: []byte("tok")}},
		rev: &fakeReviews{plans: map[int]*markers.Reviewed{}, writers: map[string]bool{"alice": true, "bob": true, "lead": true}, unreadable: map[string]bool{}}}
	w.commitOn("main", "", overlay("a"), "a")
	return w
}

// commitOn commits files (the app overlay replaced, README.md kept) on
// branch, created at from when given.
func (w *world) commitOn(branch, from string, files fstest.MapFS, msg string) string {
	w.t.Helper()
	if from != "" {
		git(w.t, w.repo, "checkout", "-q", "-B", branch, from)
	} else if git(w.t, w.repo, "branch", "--show-current") != branch {
		git(w.t, w.repo, "checkout", "-q", branch)
	}
	for name := range files {
		if strings.HasPrefix(name, "app/") {
			os.RemoveAll(filepath.Join(w.repo, "app"))
			break
		}
	}
	for name, f := range files {
		os.MkdirAll(filepath.Join(w.repo, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(w.repo, name), f.Data, 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	git(w.t, w.repo, "add", "-A")
	git(w.t, w.repo, "commit", "-q", "--allow-empty", "-m", msg)
	return git(w.t, w.repo, "rev-parse", "HEAD")
}

func (w *world) main() string { return git(w.t, w.repo, "rev-parse", "main") }

// branch is pull request n's head: files committed on a branch of main.
func (w *world) branch(n int, files fstest.MapFS) string {
	return w.commitOn(fmt.Sprintf("pr-%d", n), w.main(), files, fmt.Sprintf("PR %d", n))
}

// merge merges head into main as pull request n, merged by lead; the
// forge records it with the reviews given.
func (w *world) merge(n int, head string, reviews ...approval.Review) string {
	w.t.Helper()
	base := w.main()
	git(w.t, w.repo, "checkout", "-q", "main")
	git(w.t, w.repo, "merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge #%d", n), head)
	sha := w.main()
	w.rev.mu.Lock()
	w.rev.pulls = append(w.rev.pulls, approval.Pull{Number: n, Base: approval.Ref{Ref: "main", SHA: base}, Head: approval.Ref{SHA: head},
		Merge: sha, MergedAt: "2026-11-01T10:00:00Z", Commits: 1, MergedBy: approval.User{Login: "lead"}, Reviews: reviews})
	w.rev.mu.Unlock()
	return sha
}

// approved is by's approval of commit.
func approved(by, commit string) approval.Review {
	return approval.Review{User: approval.User{Login: by}, State: approval.Approved, CommitID: commit}
}

// push commits files straight to main.
func (w *world) push(files fstest.MapFS) string { return w.commitOn("main", "", files, "a push") }

func (w *world) target(require bool) Target {
	return Target{Target: config.Target{Name: "prod", Overlay: "app", Settings: config.Settings{RequireReviewedPlan: require}},
		Repo: "octo/cfg", Branch: "main", CloneURL: w.url}
}

// deploy delivers the tip (merged as pr) to a target whose cluster runs
// deployed ("": a first deploy), once per request, and returns what was
// applied and reported.
func (w *world) deploy(tg Target, deployed string, reqs ...Request) (*fakeEngine, *outcomes) {
	w.t.Helper()
	eng := &fakeEngine{}
	if deployed != "" {
		eng.ann = map[string]string{deploy.AnnotationSHA: deployed, deploy.AnnotationOutcome: OutcomeSuccess, deploy.AnnotationTarget: "prod"}
	}
	rep := &outcomes{}
	d := New([]Target{tg}, w.m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
	d.Reviews = w.rev
	for _, r := range reqs {
		if err := d.Submit("prod", r); err != nil {
			w.t.Fatal(err)
		}
		d.drain(context.Background(), d.workers["prod"])
	}
	return eng, rep
}

// digestOf is the short digest of the target's render at sha, as kplan's
// plan comment records it.
func (w *world) digestOf(sha string) string {
	w.t.Helper()
	d := New(nil, w.m, nil, nil, slog.New(slog.DiscardHandler))
	d.Reviews = w.rev
	if _, _, err := w.m.Fetch(context.Background(), w.url, "main"); err != nil {
		w.t.Fatal(err)
	}
	dir, err := w.m.FetchCommit(context.Background(), w.url, sha, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := d.render(context.Background(), w.target(false), dir, sha)
	if err != nil || p.Planned == nil {
		w.t.Fatalf("render %s: %v", sha, err)
	}
	digest, err := p.Planned.Digest()
	if err != nil {
		w.t.Fatal(err)
	}
	return markers.ShortDigest(digest)
}

// outcomes records each finished deploy whole.
type outcomes struct {
	fakeReporter
	mu  sync.Mutex
	all []Outcome
}

func (o *outcomes) Finished(ctx context.Context, out Outcome) {
	o.mu.Lock()
	o.all = append(o.all, out)
	o.mu.Unlock()
	o.fakeReporter.Finished(ctx, out)
}

// A merge is checked against the forge's review record with the rule of
// internal/approval, on a real git history: what may be applied is what
// the cluster runs plus changes each of which a writer approved as a
// diff. With requireReviewedPlan only such a tip is applied; a refusal
// leaves the cluster untouched and says how to go on, never "merge an
// empty commit".
func TestDeployAppliesWhatWasApproved(t *testing.T) {
	t.Parallel()
	type setup struct {
		deployed, tip string // the commit the cluster runs; main's tip
		pr            int
	}
	for _, tc := range []struct {
		name    string
		build   func(w *world) setup
		require bool
		applied []string
		verdict Verdict
		says    []string
		diff    []string
	}{
		{name: "approved at the merged head", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h, approved("alice", h)), 3}
		}, require: true, applied: []string{"c"}, verdict: AsApproved, says: []string{"applied exactly as approved in #3 at ", " by @alice"}},
		{name: "a push after the approval", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			p := w.commitOn("pr-3", "", overlay("p"), "pushed after the approval")
			return setup{a, w.merge(3, p, approved("alice", h)), 3}
		}, verdict: Differs, applied: []string{"p"}, says: []string{"differs from what was approved in #3 at ", "by @alice"},
			diff: []string{`~ ConfigMap settings (app): ~ data.commit: "c" → "p"`}},
		{name: "a push after the approval, requireReviewedPlan", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			p := w.commitOn("pr-3", "", overlay("p"), "pushed after the approval")
			return setup{a, w.merge(3, p, approved("alice", h)), 3}
		}, require: true, verdict: Differs, says: []string{"refusing to apply (requireReviewedPlan): differs from what was approved in #3", "the cluster is unchanged",
			"have a writer approve #3 at"}},
		{name: "a push no one approved, then an approved merge: not laundered", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, fstest.MapFS{"README.md": {Data: []byte("typo fixed\n")}, "app/kustomization.yaml": overlay("a")["app/kustomization.yaml"],
				"app/cm.yaml": overlay("a")["app/cm.yaml"], "app/resourcegroup.yaml": overlay("a")["app/resourcegroup.yaml"]})
			w.push(overlay("evil"))
			return setup{a, w.merge(3, h, approved("alice", h)), 3}
		}, require: true, verdict: NotApproved, says: []string{"not approved: the push ", "came from no pull request and changes what the target reads"},
			diff: []string{`~ ConfigMap settings (app): ~ data.commit: "a" → "evil"`}},
		{name: "an older approval still matches", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			p := w.commitOn("pr-3", "", overlay("p"), "pushed")
			back := w.commitOn("pr-3", "", overlay("c"), "pushed back")
			return setup{a, w.merge(3, back, approved("alice", h), approved("bob", p)), 3}
		}, require: true, applied: []string{"c"}, verdict: AsApproved, says: []string{"approved in #3 at ", "by @alice"}},
		{name: "approved on a commit the repository does not have", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h, approved("alice", strings.Repeat("e", 40))), 3}
		}, require: true, verdict: Differs, says: []string{"differs from what was approved in #3 at eeeeeee", "not in the repository"}},
		{name: "reviews without approval (changes requested)", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h, approval.Review{User: approval.User{Login: "alice"}, State: approval.ChangesRequested, CommitID: h}), 3}
		}, require: true, verdict: NotApproved, says: []string{"not approved: #3 has no standing approval by a user with write access"}},
		{name: "approved by a user who may not write", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h, approved("mallory", h)), 3}
		}, require: true, verdict: NotApproved, says: []string{"not approved: #3 has no standing approval"}},
		{name: "one approver's permission unreadable, a writer's approval still counts", build: func(w *world) setup {
			w.rev.unreadable["dependabot[bot]"] = true
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h, approved("dependabot[bot]", h), approved("alice", h)), 3}
		}, require: true, applied: []string{"c"}, verdict: AsApproved, says: []string{"by @alice", "the permission of @dependabot[bot] could not be read: counted as not a writer"}},
		{name: "a target the merge does not change", build: func(w *world) setup {
			a := w.main()
			h := w.commitOn("pr-3", a, fstest.MapFS{"README.md": {Data: []byte("docs\n")}}, "docs")
			return setup{a, w.merge(3, h), 3}
		}, require: true, applied: []string{"a"}, verdict: Unaffected, says: []string{"not changed by #3"}},
		{name: "a push, not a pull request", build: func(w *world) setup {
			a := w.main()
			return setup{a, w.push(overlay("p")), 0}
		}, require: true, verdict: NotApproved, says: []string{"not approved: the push", "came from no pull request", "revert"}},
		{name: "two approved merges back to back (a merge queue): the tip deploys", build: func(w *world) setup {
			a := w.main()
			h3 := w.branch(3, fstest.MapFS{"app/kustomization.yaml": {Data: []byte("resources: [cm.yaml, extra.yaml]\n")}, "app/cm.yaml": overlay("a")["app/cm.yaml"],
				"app/resourcegroup.yaml": overlay("a")["app/resourcegroup.yaml"], "app/extra.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: app}\ndata: {commit: extra}\n")}})
			git(w.t, w.repo, "checkout", "-q", "main")
			h4 := w.branch(4, overlay("d"))
			w.merge(3, h3, approved("alice", h3))
			return setup{a, w.merge(4, h4, approved("bob", h4)), 4}
		}, require: true, applied: []string{"d", "extra"}, verdict: AsApproved, says: []string{"applied exactly as approved in #4 at", "by @bob, after 1 earlier change, itself approved"}},
		{name: "a first deploy checks the merge against the branch before it", build: func(w *world) setup {
			w.push(overlay("b"))
			h := w.branch(3, overlay("c"))
			return setup{"", w.merge(3, h, approved("alice", h)), 3}
		}, require: true, applied: []string{"c"}, verdict: AsApproved, says: []string{"applied exactly as approved in #3"}},
		{name: "a force-push: history that does not descend from what runs", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			deployed := w.merge(3, h, approved("alice", h))
			if _, _, err := w.m.Fetch(context.Background(), w.url, "main"); err != nil { // the deploy of #3 fetched it
				w.t.Fatal(err)
			}
			git(w.t, w.repo, "checkout", "-q", "main")
			git(w.t, w.repo, "reset", "-q", "--hard", a)
			h4 := w.branch(4, fstest.MapFS{"README.md": {Data: []byte("docs\n")}, "app/kustomization.yaml": overlay("a")["app/kustomization.yaml"],
				"app/cm.yaml": overlay("a")["app/cm.yaml"], "app/resourcegroup.yaml": overlay("a")["app/resourcegroup.yaml"]})
			w.commitOn("main", "", overlay("rewritten"), "rewritten")
			return setup{deployed, w.merge(4, h4, approved("alice", h4)), 4}
		}, require: true, verdict: Refused, says: []string{"refused: the history at", "the branch was rewritten (a force-push)", "does not descend from"}},
		{name: "no review at all: the merger approved what the plan comment showed", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.plans[3] = &markers.Reviewed{Base: a, Head: h, Digests: map[string]string{"app": w.digestOf(h)}}
			return setup{a, w.merge(3, h), 3}
		}, require: true, applied: []string{"c"}, verdict: AsReviewed, says: []string{"#3 has no review; applied exactly as its plan comment showed"}},
		{name: "no review at all: pushed after the plan", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.plans[3] = &markers.Reviewed{Base: a, Head: h, Digests: map[string]string{"app": w.digestOf(h)}}
			return setup{a, w.merge(3, w.commitOn("pr-3", "", overlay("late"), "late")), 3}
		}, require: true, verdict: PlanDiffers, says: []string{"#3 has no review; differs from the plan reviewed in #3 at"},
			diff: []string{`~ ConfigMap settings (app): ~ data.commit: "c" → "late"`}},
		{name: "no review at all: a plan that did not render the target", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.plans[3] = &markers.Reviewed{Base: a, Head: h, Digests: map[string]string{}}
			return setup{a, w.merge(3, h), 3}
		}, require: true, verdict: NotReviewed, says: []string{"the plan has no render of app on head (it failed or is absent)"}},
		{name: "no review at all: a plan that skipped the target the merge changes", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.plans[3] = &markers.Reviewed{Base: a, Head: h, Digests: map[string]string{}, Skipped: []string{"app"}}
			return setup{a, w.merge(3, h), 3}
		}, require: true, verdict: NotReviewed, says: []string{"the plan did not render app (the change could not affect it then), but the merge changes it"}},
		{name: "no review at all: a plan rendered with other settings", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.plans[3] = &markers.Reviewed{Base: a, Head: h, Digests: map[string]string{"app": "x"}, Settings: inventorydiff.Settings{Helm: true}}
			return setup{a, w.merge(3, h), 3}
		}, require: true, verdict: NotReviewed, says: []string{"the plan rendered with other settings than target prod: helm on in the plan, off here"}},
		{name: "no review at all, no plan comment", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			return setup{a, w.merge(3, h), 3}
		}, require: true, verdict: NotReviewed, says: []string{"#3 has no kplan plan comment"}},
		{name: "the forge down, requireReviewedPlan", build: func(w *world) setup {
			a := w.main()
			h := w.branch(3, overlay("c"))
			w.rev.err = errors.New("GET …/pulls: 502")
			return setup{a, w.merge(3, h, approved("alice", h)), 3}
		}, require: true, verdict: Unknown, says: []string{"not compared with what was approved (GET …/pulls: 502)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := tc.build(w)
			eng, rep := w.deploy(w.target(tc.require), s.deployed, Request{SHA: s.tip, PR: s.pr})
			if slices.Sort(eng.applied); !slices.Equal(eng.applied, tc.applied) {
				t.Errorf("applied %q, want %q", eng.applied, tc.applied)
			}
			if len(rep.all) != 1 || rep.all[0].Review == nil {
				t.Fatalf("outcomes %+v, want one with a review", rep.all)
			}
			o := rep.all[0]
			if o.Review.Verdict != tc.verdict {
				t.Errorf("verdict %s (%s; %v), want %s", o.Review.Verdict, o.Review.Describe(), o.Err, tc.verdict)
			}
			// The deploy comment shows both: the error, and the review's line.
			said := o.Review.Describe()
			if o.Err != nil {
				said = o.Err.Error() + " | " + said
				if o.Reason != ReasonRefused || len(eng.applied) != 0 {
					t.Errorf("refused with reason %s, applied %q", o.Reason, eng.applied)
				}
			}
			for _, want := range tc.says {
				if !strings.Contains(said, want) {
					t.Errorf("the reports say %q, want %q", said, want)
				}
			}
			if strings.Contains(said, "empty commit") {
				t.Errorf("the reports advise an empty commit, which no approval covers: %q", said)
			}
			if got := diffLines(o.Review); tc.diff != nil && !slices.Equal(got, tc.diff) {
				t.Errorf("the difference %q, want %q", got, tc.diff)
			}
		})
	}
}

// withSecret adds a Secret holding value to a commit's overlay.
func withSecret(tree fstest.MapFS, value string) fstest.MapFS {
	out := maps.Clone(tree)
	out["app/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources: [cm.yaml, secret.yaml]\n")}
	out["app/secret.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: app}\nstringData: {password: " + value + "}\n")}
	return out
}

// diffLines flattens a review's difference: "+ key" added by the merge,
// "- key" gone from it, "~ key: field change" per field.
func diffLines(r *Review) []string {
	if r == nil || r.Diff == nil {
		return nil
	}
	var out []string
	for _, k := range r.Diff.Added {
		out = append(out, "+ "+inventorydiff.Name(k))
	}
	for _, k := range append(slices.Clone(r.Diff.Pruned), r.Diff.Detached...) {
		out = append(out, "- "+inventorydiff.Name(k))
	}
	for _, c := range r.Diff.Changed {
		for _, f := range c.Fields {
			out = append(out, "~ "+inventorydiff.Name(c.Key)+": "+f.Header())
		}
	}
	return out
}

// A merge that differs from what was approved says how: the approved
// head merged into the merge's first parent is rendered and compared
// object by object and field by field, Secret values hidden; an approved
// commit that does not render is said.
func TestReviewShowsHowTheMergeDiffers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		approved fstest.MapFS // the approved head's overlay
		merged   fstest.MapFS // what was pushed after it, and merged
		verdict  Verdict
		diff     []string
		diffErr  string
	}{
		{name: "the same render", approved: overlay("c"), merged: overlay("c"), verdict: AsApproved},
		{name: "a field changed", approved: overlay("r"), merged: overlay("c"), verdict: Differs,
			diff: []string{`~ ConfigMap settings (app): ~ data.commit: "r" → "c"`}},
		{name: "an object added", approved: overlay("c"), merged: withSecret(overlay("c"), "hunter2"), verdict: Differs,
			diff: []string{"+ Secret creds (app)"}},
		{name: "an object removed", approved: withSecret(overlay("c"), "hunter2"), merged: overlay("c"), verdict: Differs,
			diff: []string{"- Secret creds (app)"}},
		{name: "a Secret value changed", approved: withSecret(overlay("c"), "hunter2"), merged: withSecret(overlay("c"), "correct-horse"), verdict: Differs,
			diff: []string{"~ Secret creds (app): ~ stringData.password (value hidden)"}},
		{name: "the approved commit does not render", approved: broken(), merged: overlay("c"), verdict: Differs,
			diffErr: "does not render"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			a := w.main()
			r := w.branch(3, tc.approved)
			c := w.commitOn("pr-3", "", tc.merged, "pushed after the approval")
			merge := w.merge(3, c, approved("alice", r))
			eng, rep := w.deploy(w.target(false), a, Request{SHA: merge, PR: 3})
			if len(rep.all) != 1 || rep.all[0].Review == nil {
				t.Fatalf("outcomes %+v", rep.all)
			}
			rv := rep.all[0].Review
			if rv.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s (%s)", rv.Verdict, tc.verdict, rv.Describe())
			}
			if got := diffLines(rv); !slices.Equal(got, tc.diff) {
				t.Errorf("the difference: %q, want %q", got, tc.diff)
			}
			if !strings.Contains(rv.DiffErr, tc.diffErr) || (tc.diffErr == "") != (rv.DiffErr == "") {
				t.Errorf("DiffErr %q, want %q", rv.DiffErr, tc.diffErr)
			}
			// The merge applies either way (no requireReviewedPlan).
			if len(eng.applied) == 0 {
				t.Error("nothing applied without requireReviewedPlan")
			}
			if rv.Diff != nil {
				if all := fmt.Sprintf("%+v", *rv.Diff); strings.Contains(all, "hunter2") || strings.Contains(all, "correct-horse") {
					t.Errorf("a Secret value in the difference: %s", all)
				}
			}
		})
	}
}

// The label kplan/apply-unreviewed on the merged PR applies a refused
// merge once, while it is the branch's tip, and the reports say who
// acknowledged it; once the branch moved, the tip is checked as usual.
// An applied override is what runs from then on: the next approved
// merge is checked from it.
func TestApplyUnreviewedLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		requests func(c string) []Request // each drained in turn
		moves    bool                     // a push moves the branch before the last request
		applied  []string
		says     []string // what each outcome's review or error says
	}{
		{"refused, then acknowledged",
			func(c string) []Request { return []Request{{SHA: c, PR: 3}, {SHA: c, PR: 3, Acknowledged: "alice"}} }, false, []string{"c"},
			[]string{"refusing to apply (requireReviewedPlan): not approved: #3 has no standing approval",
				"not approved: #3 has no standing approval by a user with write access; applied without the reviewed-plan check: @alice added the label"}},
		{"the refusal names the label",
			func(c string) []Request { return []Request{{SHA: c, PR: 3}} }, false, nil,
			[]string{"a user with write access adds the label kplan/apply-unreviewed to #3, which applies this commit once"}},
		{"a label from someone who may not write counts for nothing",
			func(c string) []Request { return []Request{{SHA: c, PR: 3, Acknowledged: "mallory"}} }, false, nil,
			[]string{"@mallory added the label kplan/apply-unreviewed but may not write to octo/cfg"}},
		{"acknowledged, then a resync: applied once",
			func(c string) []Request { return []Request{{SHA: c, PR: 3, Acknowledged: "alice"}, {}} }, false, []string{"c"},
			[]string{"applied without the reviewed-plan check: @alice added the label kplan/apply-unreviewed"}},
		{"the branch moved past the acknowledged commit",
			func(c string) []Request { return []Request{{SHA: c, PR: 3}, {SHA: c, PR: 3, Acknowledged: "alice"}} }, true, nil,
			[]string{"refusing to apply", "refusing to apply (requireReviewedPlan): not approved: #3 has no standing approval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			a := w.main()
			h := w.branch(3, overlay("c"))
			c := w.merge(3, h, approval.Review{User: approval.User{Login: "bob"}, State: approval.Commented, CommitID: h})
			eng := &fakeEngine{ann: map[string]string{deploy.AnnotationSHA: a, deploy.AnnotationOutcome: OutcomeSuccess, deploy.AnnotationTarget: "prod"}}
			rep := &outcomes{}
			d := New([]Target{w.target(true)}, w.m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = w.rev
			reqs := tc.requests(c)
			for i, r := range reqs {
				if i == len(reqs)-1 && tc.moves {
					w.push(fstest.MapFS{"README.md": {Data: []byte("docs\n")}, "app/kustomization.yaml": overlay("c")["app/kustomization.yaml"],
						"app/cm.yaml": overlay("c")["app/cm.yaml"], "app/resourcegroup.yaml": overlay("c")["app/resourcegroup.yaml"]})
				}
				d.Submit("prod", r)
				d.drain(context.Background(), d.workers["prod"])
			}
			if !slices.Equal(eng.applied, tc.applied) {
				t.Errorf("applied %q, want %q", eng.applied, tc.applied)
			}
			if len(rep.all) != len(tc.says) {
				t.Fatalf("%d outcomes, want %d: %+v", len(rep.all), len(tc.says), rep.all)
			}
			for i, o := range rep.all {
				said := o.Review.Describe()
				if o.Err != nil {
					said = o.Err.Error()
				}
				if !strings.Contains(said, tc.says[i]) {
					t.Errorf("outcome %d says %q, want %q", i, said, tc.says[i])
				}
				if o.Err == nil && o.Review.Acknowledged != "alice" {
					t.Errorf("outcome %d applied without acknowledgment: %+v", i, o.Review)
				}
			}
		})
	}
}

// The deploy asks the forge about the steps since what runs, once per
// deploy: the first-parent commits, not the whole history.
func TestReviewAsksAboutTheStepsSinceWhatRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for i := range 5 {
		w.push(overlay(fmt.Sprint("old", i)))
	}
	a := w.main()
	h3 := w.branch(3, overlay("c"))
	m3 := w.merge(3, h3, approved("alice", h3))
	h4 := w.branch(4, overlay("d"))
	m4 := w.merge(4, h4, approved("alice", h4))
	_, rep := w.deploy(w.target(true), a, Request{SHA: m4, PR: 4})
	if len(rep.all) != 1 || rep.all[0].Err != nil {
		t.Fatalf("outcomes %+v", rep.all)
	}
	if len(w.rev.asked) != 1 || !slices.Equal(w.rev.asked[0], []string{m3, m4}) {
		t.Errorf("asked the forge about %q, want once about [%s %s]", w.rev.asked, m3[:7], m4[:7])
	}
	_ = time.Second
}
