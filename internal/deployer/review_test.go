package deployer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/prcomment"
)

// fakeReviews is the plan comment of the PR a merge came from.
type fakeReviews struct {
	plan *prcomment.Reviewed
	err  error
}

func (f fakeReviews) ReviewedPlan(ctx context.Context, t Target, sha string, pr int) (*prcomment.Reviewed, int, error) {
	return f.plan, pr, f.err
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

// A merge is compared with the plan reviewed on its PR; with
// requireReviewedPlan, only the reviewed render (or a target the PR could
// not change) is applied, and a refusal leaves the cluster untouched and
// says how to go on.
func TestDeployAppliesWhatWasReviewed(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	m := newFakeMirror("c", overlay("c"))
	m.commit("b", "", overlay("b"))
	// What the plan of each commit recorded: the same rule as the planner.
	digestOf := func(sha string) string {
		d := New(nil, m, nil, nil, slog.New(slog.DiscardHandler))
		d.Reviews = fakeReviews{}
		_, planned, err := d.render(context.Background(), prod, "mirror", sha)
		if err != nil || planned == nil {
			t.Fatalf("render %s: %v", sha, err)
		}
		digest, err := planned.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return prcomment.ShortDigest(digest)
	}
	planned := func(overlay, sha string) *prcomment.Reviewed {
		return &prcomment.Reviewed{Base: "b", Head: sha, Digests: map[string]string{overlay: digestOf(sha)}}
	}
	for _, tc := range []struct {
		name    string
		reviews fakeReviews
		require bool
		applied []string
		verdict Verdict
		says    string
	}{
		{"the reviewed render", fakeReviews{plan: planned("app", "c")}, true, []string{"c"}, AsReviewed, "applied exactly as reviewed in #3"},
		{"the base moved after the plan", fakeReviews{plan: planned("app", "b")}, false, []string{"c"}, Differs, "differs from the plan reviewed in #3"},
		{"the base moved, requireReviewedPlan", fakeReviews{plan: planned("app", "b")}, true, nil, Differs, "refusing to apply (requireReviewedPlan): differs from the plan reviewed in #3"},
		{"a target the PR cannot change", fakeReviews{plan: planned("other", "c")}, true, []string{"c"}, Unaffected, "not changed by #3"},
		{"no plan comment, requireReviewedPlan", fakeReviews{}, true, nil, NoPlan, "no reviewed plan (#3 has no kplan plan comment); the cluster is unchanged"},
		{"GitHub down, requireReviewedPlan", fakeReviews{err: errors.New("GET …/comments: 502")}, true, nil, Unknown, "not compared with the reviewed plan (GET …/comments: 502)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{}
			rep := &outcomes{}
			target := prod
			target.RequireReviewedPlan = tc.require
			d := New([]Target{target}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = tc.reviews
			if err := d.Submit("prod", Request{SHA: "c", PR: 3}); err != nil {
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
				if o.Reason != ReasonRefused || eng.ann != nil {
					t.Errorf("refused with reason %s, cluster annotations %v", o.Reason, eng.ann)
				}
			}
			if !strings.Contains(said, tc.says) {
				t.Errorf("the reports say %q, want %q", said, tc.says)
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

// A merge that differs from the plan reviewed says how: the reviewed
// commit is fetched and rendered again, and compared object by object
// and field by field, Secret values hidden; a reviewed commit that cannot
// be fetched is said, the digests still shown. The render of the reviewed
// commit happens only when the digests differ.
func TestReviewShowsHowTheMergeDiffers(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	reviewedOf := func(m *fakeMirror, sha string) *prcomment.Reviewed {
		d := New(nil, m, nil, nil, slog.New(slog.DiscardHandler))
		d.Reviews = fakeReviews{}
		_, planned, err := d.render(context.Background(), prod, "mirror", sha)
		if err != nil {
			t.Fatalf("render %s: %v", sha, err)
		}
		digest, _ := planned.Digest()
		return &prcomment.Reviewed{Base: "a", Head: sha, Digests: map[string]string{"app": prcomment.ShortDigest(digest)}}
	}
	for _, tc := range []struct {
		name     string
		reviewed fstest.MapFS // the tree of the commit the plan rendered, "r"
		merged   fstest.MapFS // the tree of the merge, "c"
		unserved bool         // the reviewed commit cannot be fetched
		verdict  Verdict
		diff     []string
		diffErr  string
	}{
		{name: "the same render", reviewed: overlay("c"), merged: overlay("c"), verdict: AsReviewed},
		{name: "a field changed", reviewed: overlay("r"), merged: overlay("c"), verdict: Differs,
			diff: []string{`~ ConfigMap settings (app): ~ data.commit: "r" → "c"`}},
		{name: "an object added", reviewed: overlay("c"), merged: withSecret(overlay("c"), "hunter2"), verdict: Differs,
			diff: []string{"+ Secret creds (app)"}},
		{name: "an object removed", reviewed: withSecret(overlay("c"), "hunter2"), merged: overlay("c"), verdict: Differs,
			diff: []string{"- Secret creds (app)"}},
		{name: "a Secret value changed", reviewed: withSecret(overlay("c"), "hunter2"), merged: withSecret(overlay("c"), "correct-horse"), verdict: Differs,
			diff: []string{"~ Secret creds (app): ~ stringData.password (value hidden)"}},
		{name: "the reviewed commit cannot be fetched", reviewed: overlay("r"), merged: overlay("c"), unserved: true, verdict: Differs,
			diffErr: "the reviewed commit r cannot be fetched: fetch commit r from https://git.example/octo/cfg.git"},
		{name: "the reviewed commit does not render", reviewed: broken(), merged: overlay("c"), verdict: Differs,
			diffErr: "the reviewed commit r does not render app here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMirror("c", tc.merged)
			m.commit("r", "", tc.reviewed)
			plan := &prcomment.Reviewed{Base: "a", Head: "r", Digests: map[string]string{"app": "sha256:00000000000000000000000000000000"}}
			if tc.reviewed["app/cm.yaml"] != nil {
				plan = reviewedOf(m, "r")
			}
			if tc.unserved {
				m.unserved = map[string]bool{"r": true}
			}
			m.snapshotOf = nil
			eng := &fakeEngine{}
			rep := &outcomes{}
			d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = fakeReviews{plan: plan}
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
			if !strings.HasPrefix(r.DiffErr, tc.diffErr) || (tc.diffErr == "") != (r.DiffErr == "") {
				t.Errorf("DiffErr %q, want %q", r.DiffErr, tc.diffErr)
			}
			// The merge applies either way (no requireReviewedPlan).
			eq("applied", slices.DeleteFunc(eng.applied, func(c string) bool { return c == "" }), []string{"c"})
			// The reviewed commit is fetched and read only to explain a
			// difference.
			wantRead := []string{"c"}
			if tc.verdict == Differs && !tc.unserved {
				wantRead = []string{"c", "r"}
			}
			eq("commits read", m.snapshotOf, wantRead)
			if tc.verdict == AsReviewed {
				eq("commits fetched by SHA", m.fetched, nil)
			}
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
	stale := &prcomment.Reviewed{Base: "a", Head: "r", Digests: map[string]string{"app": "sha256:00000000000000000000000000000000"}}
	for _, tc := range []struct {
		name     string
		requests []Request // each drained in turn
		tip      string    // the branch moves here before the last request
		applied  []string
		says     []string // what each outcome's review or error says
	}{
		{"refused, then acknowledged",
			[]Request{{SHA: "c", PR: 3}, {SHA: "c", PR: 3, Acknowledged: "alice"}}, "", []string{"c"},
			[]string{"refusing to apply (requireReviewedPlan): differs from the plan reviewed in #3",
				"differs from the plan reviewed in #3: the plan rendered r as sha256:00000000000000000000000000000000, the merge renders"}},
		{"the refusal names the label",
			[]Request{{SHA: "c", PR: 3}}, "", nil,
			[]string{"add the label kplan/apply-unreviewed to #3 (applies this commit once"}},
		{"acknowledged, then a resync: applied once",
			[]Request{{SHA: "c", PR: 3, Acknowledged: "alice"}, {}}, "", []string{"c"},
			[]string{"applied without the reviewed-plan check: @alice added the label kplan/apply-unreviewed"}},
		{"the merge's delivery after the label's keeps it",
			[]Request{{SHA: "c", PR: 3, Acknowledged: "alice"}}, "", []string{"c"},
			[]string{"@alice added the label"}},
		{"the branch moved past the acknowledged commit",
			[]Request{{SHA: "c", PR: 3}, {SHA: "c", PR: 3, Acknowledged: "alice"}}, "d", nil,
			[]string{"refusing to apply", "refusing to apply (requireReviewedPlan): no reviewed plan (the commit came from no pull request)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMirror("c", overlay("c"))
			m.commit("r", "", overlay("r"))
			m.commit("d", "c", overlay("d"))
			eng := &fakeEngine{}
			rep := &outcomes{}
			d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Reviews = reviewsByPR{3: stale}
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

// reviewsByPR is the plan comment of each PR; a push (PR 0) has none.
type reviewsByPR map[int]*prcomment.Reviewed

func (f reviewsByPR) ReviewedPlan(ctx context.Context, t Target, sha string, pr int) (*prcomment.Reviewed, int, error) {
	return f[pr], pr, nil
}
