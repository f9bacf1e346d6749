// Package status is the webhook's status page: what each target runs
// (the commit, the change, the approval verdict and its approver), its
// last deploys with their outcome and duration, what is queued and what
// drifted, served as HTML on the admin listener with a JSON twin. Board
// owns the record: the deployers feed it (it implements
// deployer.Status), the drift checks are read from liveplan.Drift, and
// Handler serves it.
//
// The record is in memory, bounded (Keep deploys per target): what a
// cluster runs survives a restart on its inventory object
// (deploy.State), which the deployers read before every deploy and
// resync and report here (Runs), so after a restart the page shows what
// each target runs again from the first resync, without the approval
// verdict, which only the deploy that applied it computed.
package status

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/deployreport"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/liveplan"
)

// DefaultKeep is how many deploys Board keeps per target when Keep is 0.
const DefaultKeep = 20

// maxMessage bounds a failure message kept (bytes): an error can quote a
// whole render.
const maxMessage = 2000

// maxFailures bounds the failed objects a deploy keeps, each error cut
// at maxFailure bytes.
const (
	maxFailures = 10
	maxFailure  = 400
)

// Board is the status page's record of every target. Its zero value is
// ready; set the fields before the deployers start.
type Board struct {
	// Keep is how many deploys are kept per target, newest first; 0 is
	// DefaultKeep.
	Keep int
	// Links are the forge's web pages of a repository (nil: no links).
	Links func(repo string) forge.Links
	// Drift is the drift checks' last results (nil: none run).
	Drift func() []liveplan.DriftStatus
	// Slots are the process's deploy slots (nil: not shown).
	Slots *deployer.Slots
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu      sync.Mutex
	targets map[string]*Target
}

var _ deployer.Status = (*Board)(nil)

// Target is one target's row: where it deploys, what it runs, what it
// is doing and its last deploys.
type Target struct {
	Key         string `json:"key"`
	Name        string `json:"name"`
	Repo        string `json:"repo"`
	Branch      string `json:"branch"`
	Overlay     string `json:"overlay"`
	Environment string `json:"environment"`
	Cluster     string `json:"cluster"`
	// Source is the repository file that declares the target, "" for a
	// target of the webhook's configuration.
	Source string `json:"source,omitempty"`
	// State is what it is doing (deployer.Activity: idle, queued,
	// deploying, waiting), Reason why, since Since.
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Runs is what its cluster runs; nil before the first look.
	Runs *Running `json:"runs,omitempty"`
	// Deploys are its last deploy attempts, newest first.
	Deploys []Deploy `json:"deploys"`
}

// Running is what a target's cluster runs: the commit its inventory
// records as last applied.
type Running struct {
	Commit
	Outcome string    `json:"outcome"`          // success or failure (applied, but objects failed)
	Reason  string    `json:"reason,omitempty"` // deployer.Reason
	At      time.Time `json:"at,omitzero"`
	// Approval is the verdict the deploy that applied it reached; nil
	// when not known here: deployed before this webhook started, by
	// another replica, or with no approval check.
	Approval *Approval `json:"approval,omitempty"`
}

// Commit is a commit and the change (pull request, merge request) it
// came from, with their pages on the forge.
type Commit struct {
	SHA        string `json:"sha"`
	Link       string `json:"link,omitempty"`
	Change     int    `json:"change,omitempty"` // 0: a push, or not known
	ChangeRef  string `json:"changeRef,omitempty"`
	ChangeLink string `json:"changeLink,omitempty"`
}

// Short is the commit's abbreviated SHA.
func (c Commit) Short() string { return deployreport.Short(c.SHA) }

// Approval is a deploy's comparison with what was approved
// (deployer.Review), in the words of the deploy comment and of `kplan
// approval`.
type Approval struct {
	// Verdict is deployer.Verdict: approved, unaffected, restored,
	// differs, not-approved, reviewed, plan-differs, not-reviewed,
	// refused or unknown.
	Verdict string `json:"verdict"`
	// Ok: requireReviewedPlan lets such a deploy apply.
	Ok bool `json:"ok"`
	// Says is the verdict in words ("applied exactly as approved in #12
	// at abc1234 by @alice").
	Says string `json:"says"`
	// By is the approver the verdict names; Approved the commit they
	// approved.
	By       string `json:"by,omitempty"`
	Approved string `json:"approved,omitempty"`
	// Acknowledged is who let it apply with the kplan/apply-unreviewed
	// label.
	Acknowledged string `json:"acknowledged,omitempty"`
	// Fix is what would let a refused deploy apply.
	Fix string `json:"fix,omitempty"`
}

// Deploy is one deploy attempt.
type Deploy struct {
	Commit
	// Outcome is deployed, failed (applied, or tried to, and failed),
	// refused (a check refused it before anything changed) or error
	// (failed before applying: fetch, render, targets, inventory).
	Outcome string `json:"outcome"`
	// Reason is deployer.Reason (Deployed, RenderFailed, Refused …);
	// Message the error, cluster addresses scrubbed.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Failures are the objects that failed, each with the API server's
	// error (at most maxFailures).
	Failures []Failure `json:"failures,omitempty"`
	Objects  string    `json:"objects,omitempty"` // "2 created, 1 configured, …"
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Seconds  float64   `json:"seconds"`
	Approval *Approval `json:"approval,omitempty"`
	// Override says who deployed it outside its deploy windows or freeze
	// (the deploy-now label), as the deploy comment records it.
	Override string `json:"override,omitempty"`
}

// Failure is one object a deploy failed on.
type Failure struct {
	Object string `json:"object"` // its key (inventory.ID.Key)
	Error  string `json:"error"`
}

// Duration is how long the deploy took, rounded for people.
func (d Deploy) Duration() string {
	s := time.Duration(d.Seconds * float64(time.Second))
	switch {
	case s < time.Second:
		return s.Round(time.Millisecond).String()
	case s < time.Minute:
		return s.Round(100 * time.Millisecond).String()
	}
	return s.Round(time.Second).String()
}

// Outcomes of a Deploy.
const (
	Deployed = "deployed"
	Failed   = "failed"
	Refused  = "refused"
	Error    = "error"
)

func (b *Board) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Board) keep() int { return cmp.Or(b.Keep, DefaultKeep) }

// row is t's row, made on first sight; b.mu is held.
func (b *Board) row(t deployer.Target) *Target {
	if b.targets == nil {
		b.targets = map[string]*Target{}
	}
	r := b.targets[t.Key()]
	if r == nil {
		r = &Target{Key: t.Key(), State: string(deployer.Idle), Deploys: []Deploy{}}
		b.targets[t.Key()] = r
	}
	// A repository's target may move (another overlay, environment or
	// cluster) at any commit: the row says where it deploys now.
	r.Name, r.Repo, r.Branch, r.Overlay, r.Environment = t.Name, t.Repo, t.Branch, t.Overlay, t.Environment
	r.Cluster, r.Source = ClusterName(t.Kubeconfig, t.Context), t.Source
	if t.Source == "" && t.Name == config.SourceName(t.Repo, t.Branch) {
		// A branch's stand-in, on which reading its targets file fails:
		// no cluster of its own.
		r.Cluster = "the targets of " + t.Overlay
	}
	return r
}

// Declare shows targets before their first deploy or resync: those of
// the webhook's configuration.
func (b *Board) Declare(targets ...deployer.Target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range targets {
		b.row(t)
	}
}

// Activity implements deployer.Status.
func (b *Board) Activity(t deployer.Target, state deployer.Activity, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.row(t)
	if r.State != string(state) || r.Reason != reason {
		r.Since = b.now()
	}
	r.State, r.Reason = string(state), reason
}

// Runs implements deployer.Status: the cluster's record replaces what
// the board believed, keeping the approval when it is of the same
// commit.
func (b *Board) Runs(t deployer.Target, s deploy.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.row(t)
	if s.SHA == "" {
		r.Runs = nil
		return
	}
	if r.Runs != nil && r.Runs.SHA == s.SHA {
		r.Runs.Outcome, r.Runs.Reason = s.Outcome, s.Reason
		if r.Runs.At.IsZero() {
			r.Runs.At = s.Time
		}
		return
	}
	r.Runs = &Running{Commit: b.commit(t, s.SHA, 0), Outcome: s.Outcome, Reason: s.Reason, At: s.Time}
}

// Finished implements deployer.Status.
func (b *Board) Finished(o deployer.Outcome) {
	change := o.PR
	if change == 0 && o.Review != nil {
		// A resync, or a push: the change the approval check found the
		// commit came from.
		change = o.Review.PR
	}
	d := Deploy{Commit: b.commit(o.Target, o.SHA, change), Outcome: outcome(o), Reason: string(cmp.Or(o.Reason, deployer.ReasonDeployed)),
		Objects: deployreport.Counts(o.Result), Started: o.Started, Finished: o.Finished, Seconds: o.Finished.Sub(o.Started).Seconds(),
		Approval: approvalOf(o.Review), Override: o.Override}
	if o.Err != nil {
		d.Message = liveplan.ScrubAddresses(deployreport.Clip(o.Err.Error(), maxMessage))
	}
	if o.Result != nil {
		for _, obj := range o.Result.Objects {
			if obj.Error != "" && len(d.Failures) < maxFailures {
				d.Failures = append(d.Failures, Failure{Object: obj.Key, Error: liveplan.ScrubAddresses(deployreport.Clip(obj.Error, maxFailure))})
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.row(o.Target)
	r.Deploys = slices.Insert(r.Deploys, 0, d)
	if len(r.Deploys) > b.keep() {
		r.Deploys = slices.Clip(r.Deploys[:b.keep()])
	}
	if o.Result != nil {
		// Applied: the cluster runs it now, as recorded on the inventory.
		run := &Running{Commit: d.Commit, Outcome: deployer.OutcomeSuccess, Reason: d.Reason, At: o.Finished, Approval: d.Approval}
		if o.Err != nil {
			run.Outcome = deployer.OutcomeFailure
		}
		r.Runs = run
	}
}

// Retired implements deployer.Status.
func (b *Board) Retired(t deployer.Target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.targets, t.Key())
}

// outcome is a deploy's outcome for people.
func outcome(o deployer.Outcome) string {
	switch {
	case o.Err == nil:
		return Deployed
	case o.Reason == deployer.ReasonRefused:
		return Refused
	case o.Result != nil || o.Reason == deployer.ReasonApplyFailed || o.Reason == deployer.ReasonObjectsFailed || o.Reason == deployer.ReasonInterrupted:
		return Failed
	}
	return Error
}

// commit links sha and change n of t's repository.
func (b *Board) commit(t deployer.Target, sha string, n int) Commit {
	c := Commit{SHA: sha, Change: n}
	if n != 0 {
		c.ChangeRef = deployer.ChangeRef(t.Forge, n)
	}
	if b.Links != nil {
		l := b.Links(t.Repo)
		c.Link, c.ChangeLink = l.Commit(sha), l.Change(n)
	}
	return c
}

// approvalOf is a review in the page's words; nil for none.
func approvalOf(r *deployer.Review) *Approval {
	if r == nil {
		return nil
	}
	a := &Approval{Verdict: string(r.Verdict), Ok: r.Ok() || r.Acknowledged != "", Says: liveplan.ScrubAddresses(r.Describe()),
		By: r.By, Approved: r.Commit, Acknowledged: r.Acknowledged, Fix: r.Fix}
	return a
}

// Object names an object for people, as the deploy comment does:
// "ConfigMap a (hook)" for the key ~G_v1_ConfigMap|hook|a; a key that
// does not parse as it is.
func Object(key string) string {
	id, err := inventory.ParseKey(key)
	if err != nil || id.Kind == "" {
		return key
	}
	s := id.Kind + " " + id.Name
	if id.Namespace != "" {
		s += " (" + id.Namespace + ")"
	}
	return s
}

// ClusterName names the cluster a target deploys to, for people: the
// kubeconfig file's name and its context, or "in-cluster".
func ClusterName(kubeconfig, context string) string {
	name := "in-cluster"
	if kubeconfig != "" {
		name = path.Base(strings.ReplaceAll(kubeconfig, "\\", "/"))
	}
	if context != "" {
		name += " (" + context + ")"
	}
	return name
}

// Page is the status page's content, and its JSON twin.
type Page struct {
	Generated time.Time `json:"generated"`
	// Targets are every target, by cluster, environment and name.
	Targets []Target `json:"targets"`
	// Queue are the targets with something to do: deploying, queued or
	// waiting, longest waiting first.
	Queue []QueueEntry `json:"queue"`
	// Slots are the deploys running and waiting for a slot, and the
	// limit (0: none); nil when not known.
	Slots *Slots `json:"slots,omitempty"`
	// Drift are the drift checks' last results, cluster addresses
	// scrubbed; Secret values never in them.
	Drift []liveplan.DriftStatus `json:"drift"`
	// Keep is how many deploys the page keeps per target.
	Keep int `json:"deploysKept"`
}

// QueueEntry is one target with something to do.
type QueueEntry struct {
	Target string    `json:"target"`
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// Slots are the process's deploy slots.
type Slots struct {
	Running int `json:"running"`
	Queued  int `json:"queued"`
	Limit   int `json:"limit"` // 0: no limit
}

// Page is the board now.
func (b *Board) Page() Page {
	p := Page{Generated: b.now(), Targets: []Target{}, Queue: []QueueEntry{}, Drift: []liveplan.DriftStatus{}, Keep: b.keep()}
	b.mu.Lock()
	for _, r := range b.targets {
		t := *r
		t.Deploys = slices.Clone(r.Deploys)
		if r.Runs != nil {
			run := *r.Runs
			t.Runs = &run
		}
		p.Targets = append(p.Targets, t)
		if t.State != string(deployer.Idle) && t.State != "" {
			p.Queue = append(p.Queue, QueueEntry{Target: t.Key, State: t.State, Reason: t.Reason, Since: t.Since})
		}
	}
	b.mu.Unlock()
	slices.SortFunc(p.Targets, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Environment, b.Environment), cmp.Compare(a.Key, b.Key))
	})
	slices.SortFunc(p.Queue, func(a, b QueueEntry) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Target, b.Target))
	})
	if b.Slots != nil {
		running, queued := b.Slots.Counts()
		p.Slots = &Slots{Running: running, Queued: queued, Limit: max(b.Slots.Limit(), 0)}
	}
	if b.Drift != nil {
		for _, d := range b.Drift() {
			d.Err, d.Note = liveplan.ScrubAddresses(d.Err), liveplan.ScrubAddresses(d.Note)
			p.Drift = append(p.Drift, d)
		}
	}
	return p
}
