package deployer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
)

// fakeReviews is the forge's record of the PR a merge came from: its
// approvals and its plan comment; writers may push to the repository.
type fakeReviews struct {
	approvals Approvals
	plan      *markers.Reviewed
	writers   map[string]bool
	err       error
}

func (f fakeReviews) Approvals(ctx context.Context, t Target, sha string, pr int) (Approvals, error) {
	a := f.approvals
	a.PR = pr
	return a, f.err
}

func (f fakeReviews) ReviewedPlan(ctx context.Context, t Target, pr int) (*markers.Reviewed, error) {
	return f.plan, f.err
}

func (f fakeReviews) CanWrite(ctx context.Context, t Target, login string) (bool, error) {
	return f.writers[login], f.err
}

// approvedAt is a PR approved by alice at commit.
func approvedAt(commit string) Approvals {
	return Approvals{Reviews: 1, Approved: []Approval{{Commit: commit, By: "alice"}}}
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

// A merge is compared with what was approved on its PR, in GitHub's
// review record: the approved head merged into the merge's first parent,
// rendered with the target's settings. With requireReviewedPlan only an
// approved render, a target the PR does not change, or (with no review
// at all) the plan comment's render is applied; a refusal leaves the
// cluster untouched and says how to go on.
func TestDeployAppliesWhatWasApproved(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	// main was b; the merge c of PR 3 renders "c". h is the PR's head as
	// approved (merged into b: mh, the same tree as c); p a push after
	// the approval (merged: mp, which renders "p"); u a merge that
	// changes nothing of the target's (its ConfigMap still says "c").
	world := func() *fakeMirror {
		m := newFakeMirror("c", overlay("c"))
		m.commit("b", "", overlay("b"))
		m.commit("c", "b", overlay("c"))
		m.commit("h", "b", overlay("c"))
		m.commit("mh", "b", overlay("c"))
		m.commit("p", "b", overlay("p"))
		m.commit("mp", "b", overlay("p"))
		m.merges = map[[2]string]string{{"b", "h"}: "mh", {"b", "p"}: "mp"}
		m.treeOf = map[string]string{"mh": "tree-c"}
		return m
	}
	digestOf := func(m *fakeMirror, sha string) string {
		d := New(nil, m, nil, nil, slog.New(slog.DiscardHandler))
		d.Reviews = fakeReviews{}
		p, err := d.render(context.Background(), prod, "mirror", sha)
		if err != nil || p.Planned == nil {
			t.Fatalf("render %s: %v", sha, err)
		}
		digest, err := p.Planned.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return markers.ShortDigest(digest)
	}
	planOf := func(m *fakeMirror, sha string) *markers.Reviewed {
		return &markers.Reviewed{Base: "b", Head: sha, Digests: map[string]string{"app": digestOf(m, sha)}}
	}
	for _, tc := range []struct {
		name     string
		reviews  func(m *fakeMirror) fakeReviews
		sha      string // the merge deployed (default c)
		pr       int    // default 3
		deployed string // the commit the cluster runs
		require  bool
		applied  []string
		verdict  Verdict
		says     string
	}{
		{name: "approved at the merged head", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: approvedAt("h")} },
			require: true, applied: []string{"c"}, verdict: AsApproved, says: "applied exactly as approved in #3 at h by @alice"},
		{name: "a push after the approval", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: approvedAt("p")} },
			verdict: Differs, applied: []string{"c"}, says: "differs from what was approved in #3 at p by @alice"},
		{name: "a push after the approval, requireReviewedPlan", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: approvedAt("p")} },
			require: true, verdict: Differs, says: "refusing to apply (requireReviewedPlan): differs from what was approved in #3 at p; the cluster is unchanged"},
		{name: "a commit no one approved between the one deployed and the merge", deployed: "b0",
			reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: approvedAt("h")} },
			require: true, verdict: Differs, says: "refusing to apply (requireReviewedPlan): differs from what was approved in #3 at h"},
		{name: "an older approval still matches", reviews: func(*fakeMirror) fakeReviews {
			return fakeReviews{approvals: Approvals{Reviews: 2, Approved: []Approval{{Commit: "p", By: "bob"}, {Commit: "h", By: "alice"}}}}
		}, require: true, applied: []string{"c"}, verdict: AsApproved, says: "approved in #3 at h by @alice"},
		{name: "approved on a head that does not merge", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: approvedAt("x")} },
			require: true, verdict: Differs, says: "refusing to apply (requireReviewedPlan): differs from what was approved in #3 at x"},
		{name: "reviews without approval (dismissed, changes requested)", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: Approvals{Reviews: 2}} },
			require: true, verdict: NotApproved, says: "not approved: #3 has no standing approval by a user with write access"},
		{name: "a target the merge does not change", sha: "u", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{approvals: Approvals{Reviews: 1}} },
			require: true, applied: []string{"c"}, verdict: Unaffected, says: "not changed by #3"},
		{name: "a push, not a pull request", pr: -1, reviews: func(*fakeMirror) fakeReviews { return fakeReviews{} },
			require: true, verdict: NotApproved, says: "not approved (the commit came from no pull request)"},
		{name: "no review at all: the plan comment's render", reviews: func(m *fakeMirror) fakeReviews { return fakeReviews{plan: planOf(m, "c")} },
			require: true, applied: []string{"c"}, verdict: AsReviewed, says: "#3 has no review; applied exactly as its plan comment showed"},
		{name: "no review at all: a plan that did not render the target", reviews: func(m *fakeMirror) fakeReviews {
			return fakeReviews{plan: &markers.Reviewed{Base: "b", Head: "c", Digests: map[string]string{}}}
		}, require: true, verdict: NotReviewed, says: "the plan has no render of app on head (it failed or is absent)"},
		{name: "no review at all: a plan that skipped the target the merge changes", reviews: func(m *fakeMirror) fakeReviews {
			return fakeReviews{plan: &markers.Reviewed{Base: "b", Head: "c", Digests: map[string]string{}, Skipped: []string{"app"}}}
		}, require: true, verdict: NotReviewed, says: "the plan did not render app (the change could not affect it then), but the merge changes it"},
		{name: "no review at all: a plan rendered with other settings", reviews: func(m *fakeMirror) fakeReviews {
			p := planOf(m, "c")
			p.Settings.Helm = true
			return fakeReviews{plan: p}
		}, require: true, verdict: NotReviewed, says: "the plan rendered with other settings than target prod: helm on in the plan, off here"},
		{name: "no review at all, no plan comment", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{} },
			require: true, verdict: NotReviewed, says: "#3 has no kplan plan comment"},
		{name: "GitHub down, requireReviewedPlan", reviews: func(*fakeMirror) fakeReviews { return fakeReviews{err: errors.New("GET …/reviews: 502")} },
			require: true, verdict: Unknown, says: "not compared with what was approved (GET …/reviews: 502)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := world()
			m.commit("u", "c", fstest.MapFS{"README.md": {Data: []byte("docs")}, "app/kustomization.yaml": overlay("c")["app/kustomization.yaml"],
				"app/cm.yaml": overlay("c")["app/cm.yaml"], "app/resourcegroup.yaml": overlay("c")["app/resourcegroup.yaml"]})
			sha, pr := cmp.Or(tc.sha, "c"), cmp.Or(tc.pr, 3)
			pr = max(pr, 0)
			m.tip = sha
			eng := &fakeEngine{}
			if tc.deployed != "" {
				// b0 ← b (a push no one approved) ← c; h merged into b0
				// is mh0, which lacks b's change.
				m.commit("b0", "", overlay("b0"))
				m.commit("b", "b0", overlay("c"))
				m.commit("mh0", "b0", overlay("h"))
				m.merges[[2]string{"b0", "h"}] = "mh0"
				eng.ann = map[string]string{deploy.AnnotationSHA: tc.deployed, deploy.AnnotationOutcome: OutcomeSuccess, deploy.AnnotationTarget: "prod"}
			}
			rep := &outcomes{}
			target := prod
			target.RequireReviewedPlan = tc.require
			d := New([]Target{target}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = tc.reviews(m)
			before := maps.Clone(eng.ann)
			if err := d.Submit("prod", Request{SHA: sha, PR: pr}); err != nil {
				t.Fatal(err)
			}
			d.drain(context.Background(), d.workers["prod"])
			if !slices.Equal(eng.applied, tc.applied) {
				t.Errorf("applied %q, want %q", eng.applied, tc.applied)
			}
			if len(rep.all) != 1 || rep.all[0].Review == nil || rep.all[0].Review.Verdict != tc.verdict {
				t.Fatalf("outcomes %+v, want one with verdict %s", rep.all, tc.verdict)
			}
			o := rep.all[0]
			said := o.Review.Describe()
			if o.Err != nil {
				said = o.Err.Error()
				if o.Reason != ReasonRefused || !maps.Equal(eng.ann, before) {
					t.Errorf("refused with reason %s, cluster annotations %v", o.Reason, eng.ann)
				}
			}
			if !strings.Contains(said, tc.says) {
				t.Errorf("the reports say %q, want %q", said, tc.says)
			}
			if tc.verdict == AsApproved && tc.name == "approved at the merged head" && slices.Contains(m.snapshotOf, "mh") {
				t.Errorf("the approved merge has the merge's tree, yet it was rendered: read %q", m.snapshotOf)
			}
		})
	}
}

// withSecret adds a Secret holding value to a commit's overlay.
func withSecret(tree fstest.MapFS, value string) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range tree {
		out[k] = v
	}
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
// commit that cannot be fetched or rendered is said.
func TestReviewShowsHowTheMergeDiffers(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	for _, tc := range []struct {
		name     string
		approved fstest.MapFS // the tree of the approved head merged into a, "mr"
		merged   fstest.MapFS // the tree of the merge, "c"
		unserved bool         // the approved commit cannot be fetched
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
		{name: "the approved commit cannot be fetched", approved: overlay("r"), merged: overlay("c"), unserved: true, verdict: Differs,
			diffErr: "fetch commit r from https://git.example/octo/cfg.git"},
		{name: "the approved commit does not render", approved: broken(), merged: overlay("c"), verdict: Differs,
			diffErr: "what alice approved does not render"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMirror("c", tc.merged)
			m.commit("a", "", overlay("a"))
			m.commit("c", "a", tc.merged)
			m.commit("r", "a", tc.approved)
			m.commit("mr", "a", tc.approved)
			m.merges = map[[2]string]string{{"a", "r"}: "mr"}
			if tc.unserved {
				m.unserved = map[string]bool{"r": true}
			}
			eng := &fakeEngine{}
			rep := &outcomes{}
			d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = fakeReviews{approvals: approvedAt("r")}
			d.Submit("prod", Request{SHA: "c", PR: 3})
			d.drain(context.Background(), d.workers["prod"])
			if len(rep.all) != 1 || rep.all[0].Review == nil {
				t.Fatalf("outcomes %+v", rep.all)
			}
			r := rep.all[0].Review
			if r.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s (%s)", r.Verdict, tc.verdict, r.Describe())
			}
			eq := func(what string, got, want []string) {
				if !slices.Equal(got, want) {
					t.Errorf("%s: %q, want %q", what, got, want)
				}
			}
			eq("the difference", diffLines(r), tc.diff)
			if !strings.Contains(r.DiffErr, tc.diffErr) || (tc.diffErr == "") != (r.DiffErr == "") {
				t.Errorf("DiffErr %q, want %q", r.DiffErr, tc.diffErr)
			}
			// The merge applies either way (no requireReviewedPlan).
			eq("applied", slices.DeleteFunc(eng.applied, func(c string) bool { return c == "" }), []string{"c"})
			if r.Diff != nil {
				if all := fmt.Sprintf("%+v", *r.Diff); strings.Contains(all, "hunter2") || strings.Contains(all, "correct-horse") {
					t.Errorf("a Secret value in the difference: %s", all)
				}
			}
		})
	}
}

// The label kplan/apply-unreviewed on the merged PR applies a refused
// merge once, while it is the branch's tip, and the reports say who
// acknowledged it; once the branch moved, the tip is checked as usual.
func TestApplyUnreviewedLabel(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app", Settings: config.Settings{RequireReviewedPlan: true}},
		Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	// PR 3 was reviewed, never approved; alice may write, mallory only
	// label.
	reviews := fakeReviews{approvals: Approvals{Reviews: 1}, writers: map[string]bool{"alice": true}}
	for _, tc := range []struct {
		name     string
		requests []Request // each drained in turn
		tip      string    // the branch moves here before the last request
		applied  []string
		says     []string // what each outcome's review or error says
	}{
		{"refused, then acknowledged",
			[]Request{{SHA: "c", PR: 3}, {SHA: "c", PR: 3, Acknowledged: "alice"}}, "", []string{"c"},
			[]string{"refusing to apply (requireReviewedPlan): not approved: #3 has no standing approval",
				"not approved: #3 has no standing approval by a user with write access; applied without the reviewed-plan check: @alice added the label"}},
		{"the refusal names the label",
			[]Request{{SHA: "c", PR: 3}}, "", nil,
			[]string{"have a user with write access add the label kplan/apply-unreviewed to #3 (applies this commit once"}},
		{"a label from someone who may not write counts for nothing",
			[]Request{{SHA: "c", PR: 3, Acknowledged: "mallory"}}, "", nil,
			[]string{"@mallory added the label kplan/apply-unreviewed but may not write to octo/cfg"}},
		{"acknowledged, then a resync: applied once",
			[]Request{{SHA: "c", PR: 3, Acknowledged: "alice"}, {}}, "", []string{"c"},
			[]string{"applied without the reviewed-plan check: @alice added the label kplan/apply-unreviewed"}},
		{"the merge's delivery after the label's keeps it",
			[]Request{{SHA: "c", PR: 3, Acknowledged: "alice"}}, "", []string{"c"},
			[]string{"@alice added the label"}},
		{"the branch moved past the acknowledged commit",
			[]Request{{SHA: "c", PR: 3}, {SHA: "c", PR: 3, Acknowledged: "alice"}}, "d", nil,
			[]string{"refusing to apply", "refusing to apply (requireReviewedPlan): not approved (the commit came from no pull request)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMirror("c", overlay("c"))
			m.commit("b", "", overlay("b"))
			m.commit("c", "b", overlay("c"))
			m.commit("d", "c", overlay("d"))
			eng := &fakeEngine{}
			rep := &outcomes{}
			d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = reviewsByPR{3: reviews}
			for i, r := range tc.requests {
				if i == len(tc.requests)-1 && tc.tip != "" {
					m.mu.Lock()
					m.tip = tc.tip
					m.mu.Unlock()
				}
				d.Submit("prod", r)
				if tc.name == "the merge's delivery after the label's keeps it" {
					d.Submit("prod", Request{SHA: "c", PR: 3})
				}
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

// reviewsByPR is the review record of each PR; a push (PR 0) has none.
type reviewsByPR map[int]fakeReviews

func (f reviewsByPR) Approvals(ctx context.Context, t Target, sha string, pr int) (Approvals, error) {
	if pr == 0 {
		return Approvals{}, nil
	}
	return f[pr].Approvals(ctx, t, sha, pr)
}

func (f reviewsByPR) ReviewedPlan(ctx context.Context, t Target, pr int) (*markers.Reviewed, error) {
	return f[pr].plan, nil
}

func (f reviewsByPR) CanWrite(ctx context.Context, t Target, login string) (bool, error) {
	for _, r := range f {
		return r.CanWrite(ctx, t, login)
	}
	return false, nil
}
