package deployer

import "github.com/kplan-dev/kplan/internal/deploy"

// Status is told what each target is doing and what it did, for the
// webhook's status page (internal/status). A nil Deployer.Status tells
// no one. Its methods must not block: the workers call them.
type Status interface {
	// Activity says what t is doing now: one of the Activity states,
	// and why in words ("commit abc1234 of #12 waits for a deploy
	// slot").
	Activity(t Target, state Activity, reason string)
	// Runs says what t's cluster records it runs: its inventory
	// object's record of the last deploy, read before each deploy and
	// resync (the zero State: nothing deployed yet).
	Runs(t Target, s deploy.State)
	// Finished records a deploy attempt that ended, applied or not (a
	// refusal, a render that failed).
	Finished(o Outcome)
	// Retired says t is no longer deployed: the repository's file no
	// longer declares it, or it moved to another deployer's cluster.
	Retired(t Target)
}

// Activity is what a target's worker is doing.
type Activity string

const (
	// Idle: nothing to do until the next merge or resync.
	Idle Activity = "idle"
	// Queued: a commit waits for a deploy slot (Slots), or for the
	// deploy running now to end.
	Queued Activity = "queued"
	// Deploying: fetching, rendering, checking and applying.
	Deploying Activity = "deploying"
	// Waiting: held back by something other than a slot (an ordered
	// rollout's earlier target, a deploy window); the reason says what.
	Waiting Activity = "waiting"
)

// tell tells the status, if any, what t is doing. The worker's own
// calls hold its lock, so that what a target does is told in order.
func (d *Deployer) tell(t Target, a Activity, reason string) {
	if d.Status != nil {
		d.Status.Activity(t, a, reason)
	}
}

// describe says what a request asks, for an activity's reason.
func describe(t Target, r Request) string {
	if r.SHA == "" {
		return "the branch's tip (resync)"
	}
	s := "commit " + short(r.SHA)
	if r.PR != 0 {
		s += " of " + ChangeRef(t.Forge, r.PR)
	}
	return s
}

// ChangeRef is how a forge (config.GitHub, config.GitLab) writes change
// n: #12 on GitHub, !12 on GitLab.
func ChangeRef(forge string, n int) string {
	return (&Review{Forge: forge}).refOf(n)
}
