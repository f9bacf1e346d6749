package deployer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
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
		_, digest, err := d.render(context.Background(), prod, "mirror", sha)
		if err != nil || digest == "" {
			t.Fatalf("render %s: %q %v", sha, digest, err)
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
		{"no plan comment, requireReviewedPlan", fakeReviews{}, true, nil, NoPlan, "no reviewed plan (#3 has no kplan plan comment). The cluster is unchanged"},
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
