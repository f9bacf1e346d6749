package deployer

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/deploy"
)

// fixedClock is a Clock that stands still; its timers never fire.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                            { return c.now }
func (fixedClock) AfterFunc(time.Duration, func()) func() bool { return func() bool { return true } }

// A frozen target (or one outside its windows) deploys only with a
// writer's deploy-now label, on the commit that is still the branch's
// tip; whoever else adds it, or a webhook that cannot ask the forge, is
// refused and the target keeps waiting, saying why.
func TestDeployNowLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		label     string // DeployNowLabel; "" the default
		noReviews bool
		moves     bool // a push moves the branch past the labelled commit
		request   func(c string) Request
		applied   []string
		says      string // the outcome's Waiting, or Override
	}{
		{"frozen", "", false, false, func(c string) Request { return Request{SHA: c, PR: 3} }, nil,
			"frozen: freeze is set for prod in the webhook's configuration (it deploys once unset; to deploy now, a user with write access adds the label kplan/deploy-now to the merged pull request)"},
		{"a writer's label", "", false, false, func(c string) Request { return Request{SHA: c, PR: 3, DeployNow: "alice"} }, []string{"c"},
			"deployed though the target is frozen: @alice added the label kplan/deploy-now"},
		{"a reader's label", "", false, false, func(c string) Request { return Request{SHA: c, PR: 3, DeployNow: "mallory"} }, nil,
			"frozen: freeze is set for prod in the webhook's configuration; @mallory added the label kplan/deploy-now but may not write to octo/cfg"},
		{"no forge to ask", "", true, false, func(c string) Request { return Request{SHA: c, PR: 3, DeployNow: "alice"} }, nil,
			"@alice added the label kplan/deploy-now, but the webhook has no access to the forge to check that they may write to octo/cfg: not deployed"},
		{"a label of another name", "ship-it", false, false, func(c string) Request { return Request{SHA: c, PR: 3, DeployNow: "alice"} }, []string{"c"},
			"deployed though the target is frozen: @alice added the label ship-it"},
		{"the branch moved past the labelled commit", "", false, true, func(c string) Request { return Request{SHA: c, PR: 3, DeployNow: "alice"} }, nil,
			"frozen: freeze is set for prod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			a := w.main()
			c := w.push(overlay("c"))
			if tc.moves {
				w.push(overlay("d"))
			}
			eng := &fakeEngine{ann: map[string]string{deploy.AnnotationSHA: a, deploy.AnnotationOutcome: OutcomeSuccess, deploy.AnnotationTarget: "prod"}}
			rep := &outcomes{}
			target := w.target(false)
			target.Freeze = true
			d := New([]Target{target}, w.m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
			d.Clock, d.DeployNowLabel = fixedClock{time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}, tc.label
			if !tc.noReviews {
				d.Reviews = w.rev
			}
			d.Submit("prod", tc.request(c))
			d.drain(context.Background(), d.workers["prod"])
			if !slices.Equal(eng.applied, tc.applied) {
				t.Errorf("applied %q, want %q", eng.applied, tc.applied)
			}
			if len(rep.all) != 1 {
				t.Fatalf("%d outcomes, want 1: %+v", len(rep.all), rep.all)
			}
			o := rep.all[0]
			said := o.Waiting
			if tc.applied != nil {
				said = o.Override
				if o.Err != nil || o.Waiting != "" {
					t.Errorf("the override's outcome: %+v", o)
				}
			}
			if !strings.Contains(said, tc.says) {
				t.Errorf("the outcome says %q, want %q", said, tc.says)
			}
			st := d.States()
			if tc.applied == nil && (len(st) != 1 || st[0].Waiting != o.Waiting || st[0].SHA == "") {
				t.Errorf("the state while waiting: %+v", st)
			}
		})
	}
}
