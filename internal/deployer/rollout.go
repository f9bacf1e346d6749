package deployer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
)

// Clock is the time the deployer reads: deploy windows open on it. Tests
// give a clock they move; nil is the system's.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop
	// cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (d *Deployer) clock() Clock {
	if d.Clock == nil {
		return systemClock{}
	}
	return d.Clock
}

// TargetState is what a target of the deployer is doing about its
// branch, for an operator's view (States): the commit it waits to
// deploy and why, and how its last deploy ended. Plain fields, read by
// the status page.
type TargetState struct {
	Target string // the target's key
	// SHA and PR are the commit waiting to deploy, when Waiting is set.
	SHA string
	PR  int
	// Waiting says why the commit is not applied yet, as the reports say
	// it: "waiting on staging", "waiting on staging's failure", "waiting
	// for the window at …", "frozen: …"; "" when nothing waits.
	Waiting string
	// WaitingOn is the target it waits on (dependsOn), "" when none.
	WaitingOn string
	// WindowOpens is when the deploy window it waits for opens; zero
	// when it does not wait for one.
	WindowOpens time.Time
	// LastSHA and LastOK are the last deploy's commit and whether it
	// succeeded; Override says who deployed it outside its window or
	// freeze with the deploy-now label ("" when no one).
	LastSHA  string
	LastOK   bool
	Override string
}

// States is what each target waits for and how its last deploy ended,
// sorted by target.
func (d *Deployer) States() []TargetState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]TargetState, 0, len(d.states))
	for _, s := range d.states {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b TargetState) int { return cmp.Compare(a.Target, b.Target) })
	return out
}

// waitingWhy is what target key waits for ("" for nothing).
func (d *Deployer) waitingWhy(key string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.states[key]; s != nil {
		return s.Waiting
	}
	return ""
}

// state returns t's state; d.mu is held.
func (d *Deployer) state(key string) *TargetState {
	s := d.states[key]
	if s == nil {
		s = &TargetState{Target: key}
		d.states[key] = s
	}
	return s
}

// settle records how target t ended at sha, and wakes the targets that
// depend on it when that changed: they wait for it.
func (d *Deployer) settle(t Target, sha string, ok bool, override string) {
	if sha == "" {
		return
	}
	d.mu.Lock()
	s := d.state(t.Key())
	changed := s.LastSHA != sha || s.LastOK != ok
	s.LastSHA, s.LastOK = sha, ok
	if override != "" || changed {
		s.Override = override
	}
	s.SHA, s.PR, s.Waiting, s.WaitingOn, s.WindowOpens = "", 0, "", "", time.Time{}
	delete(d.waitReported, t.Key())
	delete(d.parked, t.Key())
	var superseded []Request
	if ok {
		// The commits that waited are in the one deployed (the branch's
		// newer tip): their reports say so instead of waiting forever.
		for _, w := range d.waited[t.Key()] {
			if w.SHA != sha {
				superseded = append(superseded, w)
			}
		}
		delete(d.waited, t.Key())
	}
	if stop := d.timers[t.Key()]; stop != nil {
		stop()
		delete(d.timers, t.Key())
	}
	var wake []Request
	var keys []string
	if changed {
		for k, w := range d.workers {
			dt := w.target()
			if w.src == nil && dt.Source == t.Source && slices.Contains(dt.DependsOn, t.Name) {
				keys = append(keys, k)
				wake = append(wake, d.parked[k])
			}
		}
	}
	d.mu.Unlock()
	for _, w := range superseded {
		d.Report.Finished(context.WithoutCancel(d.runContext()), Outcome{Target: t, SHA: w.SHA, PR: w.PR, Superseded: sha,
			Started: d.clock().Now(), Finished: d.clock().Now()})
	}
	for i, k := range keys {
		d.Submit(k, wake[i])
	}
}

// maxWaited bounds the waiting commits a target remembers, to report
// them superseded.
const maxWaited = 20

// runContext is the run's context, or the background before Run.
func (d *Deployer) runContext() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.runCtx == nil {
		return context.Background()
	}
	return d.runCtx
}

// waitingOn says which target t waits on to deploy sha: the first of
// its dependsOn that has not deployed sha, and whether that one failed
// there.
func (d *Deployer) waitingOn(t Target, sha string) (dep string, failed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range t.DependsOn {
		key := Target{Target: config.Target{Name: name}, Source: t.Source}.Key()
		s := d.states[key]
		switch {
		case s == nil || s.LastSHA != sha:
			return name, false
		case !s.LastOK:
			return name, true
		}
	}
	return "", false
}

// gate holds back a deploy its dependencies or its deploy windows do
// not let apply yet, reporting why once; it returns the override to
// record ("" for none) and whether the deploy goes on.
func (d *Deployer) gate(ctx context.Context, log *slog.Logger, t Target, r Request) (string, bool) {
	if dep, failed := d.waitingOn(t, r.SHA); dep != "" {
		why := "waiting on " + dep + ": it deploys this commit first (dependsOn)"
		if failed {
			why = "waiting on " + dep + "'s failure: " + dep + " failed to deploy this commit, so " + t.Name + " is not applied (dependsOn); fix " + dep + " and merge again"
		}
		d.wait(ctx, log, t, r, why, dep, time.Time{})
		return "", false
	}
	now := d.clock().Now()
	ok, opens := t.DeployAllowed(now)
	if ok {
		return "", true
	}
	label := cmp.Or(d.DeployNowLabel, config.DefaultDeployNowLabel)
	var refused string
	if r.DeployNow != "" {
		err := d.mayDeployNow(ctx, t, r.DeployNow, label)
		if err == nil {
			override := fmt.Sprintf("deployed outside its deploy windows: @%s added the label %s", r.DeployNow, label)
			if t.Freeze {
				override = fmt.Sprintf("deployed though the target is frozen: @%s added the label %s", r.DeployNow, label)
			}
			log.Warn("deploying outside the deploy windows, as the label says", "label", label, "by", r.DeployNow, "sha", r.SHA, "pr", r.PR)
			return override, true
		}
		refused = "; " + err.Error()
	}
	// What it waits for first: a commit status shows 140 characters.
	how := fmt.Sprintf("to deploy now, a user with write access adds the label %s to the merged pull request", label)
	var why string
	if t.Freeze {
		why = fmt.Sprintf("frozen: freeze is set for %s in the webhook's configuration%s (it deploys once unset; %s)", t.Name, refused, how)
	} else {
		why = fmt.Sprintf("waiting for the window at %s%s (deploy windows: %s; %s)", opens.In(t.Windows[0].Location).Format("2006-01-02 15:04 MST"), refused, windows(t.Windows), how)
	}
	d.wait(ctx, log, t, r, why, "", opens)
	return "", false
}

func windows(ws []config.Window) string {
	s := ""
	for i, w := range ws {
		if i > 0 {
			s += "; "
		}
		s += w.String()
	}
	return s
}

// wait records that t waits to deploy r, reports it once, and, for a
// window, asks again when it opens: the newest request then deploys.
func (d *Deployer) wait(ctx context.Context, log *slog.Logger, t Target, r Request, why, on string, opens time.Time) {
	key := t.Key()
	d.mu.Lock()
	s := d.state(key)
	if s.SHA != r.SHA || r.PR != 0 {
		s.PR = r.PR
	}
	s.SHA, s.Waiting, s.WaitingOn, s.WindowOpens = r.SHA, why, on, opens
	// A newer request (a merge while waiting) replaces the parked one.
	parked := r
	parked.DeployNow = ""
	if prev, ok := d.parked[key]; ok && prev.SHA == r.SHA && r.PR == 0 {
		parked.PR = prev.PR // a resync of the same commit keeps its pull request
	}
	d.parked[key] = parked
	repeated := d.waitReported[key] == r.SHA+"\x00"+why
	d.waitReported[key] = r.SHA + "\x00" + why
	if !slices.ContainsFunc(d.waited[key], func(w Request) bool { return w.SHA == r.SHA }) && len(d.waited[key]) < maxWaited {
		d.waited[key] = append(d.waited[key], Request{SHA: r.SHA, PR: r.PR})
	}
	if stop := d.timers[key]; stop != nil {
		stop()
		delete(d.timers, key)
	}
	if !opens.IsZero() {
		d.timers[key] = d.clock().AfterFunc(opens.Sub(d.clock().Now()), func() {
			d.mu.Lock()
			p := d.parked[key]
			d.mu.Unlock()
			d.Submit(key, p)
		})
	}
	d.mu.Unlock()
	if repeated {
		log.Debug("still waiting", "sha", r.SHA, "why", why)
		return
	}
	log.Info("not deploying yet", "sha", r.SHA, "pr", r.PR, "why", why)
	d.Report.Finished(ctx, Outcome{Target: t, SHA: r.SHA, PR: r.PR, Waiting: why, Started: d.clock().Now(), Finished: d.clock().Now()})
}

// mayDeployNow checks that login, who added the deploy-now label, may
// write to the repository: a label is a triage permission, and anyone
// less would move a deploy into a freeze. Without the forge's API to
// ask, no one may.
func (d *Deployer) mayDeployNow(ctx context.Context, t Target, login, label string) error {
	if d.Reviews == nil {
		return fmt.Errorf("@%s added the label %s, but the webhook has no access to the forge to check that they may write to %s: not deployed", login, label, t.Repo)
	}
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	ok, err := d.Reviews.CanWrite(ctx, t, login)
	switch {
	case err != nil:
		return fmt.Errorf("cannot check that @%s, who added the label %s, may write to %s: %w", login, label, t.Repo, err)
	case !ok:
		return fmt.Errorf("@%s added the label %s but may not write to %s: only a user with write access can deploy outside the windows", login, label, t.Repo)
	}
	return nil
}

// stopTimers stops the windows' timers when the run ends.
func (d *Deployer) stopTimers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, stop := range d.timers {
		stop()
		delete(d.timers, k)
	}
}
