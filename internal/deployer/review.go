package deployer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Reviews reads what the forge records of the pull requests a branch
// merged (internal/forge/github/deploys, internal/forge/gitlab/deploys).
// What reviewers approved is anchored in the forge's own review record,
// never in a comment: anyone whose workflow can post as the plan's author
// could write a comment.
type Reviews interface {
	// Pulls are the merged pull requests the commits (the branch's
	// first-parent steps from what runs to the tip) came from, each with
	// its reviews and merger, in the shapes of the forge's API
	// (approval.Pull); commits no pull request merged are left out.
	Pulls(ctx context.Context, t Target, commits []string) ([]approval.Pull, error)
	// ReviewedPlan reads the reviewed-plan marker of kplan's plan comment
	// on pull request pr; nil when there is none. It is the reviewer's
	// view, and decides only for a pull request with no review at all.
	ReviewedPlan(ctx context.Context, t Target, pr int) (*markers.Reviewed, error)
	// CanWrite says whether login may push to t's repository: only such a
	// user's approval, or acknowledgement label, counts.
	CanWrite(ctx context.Context, t Target, login string) (bool, error)
}

// Verdict compares what a deploy applies with what was approved.
type Verdict string

const (
	// AsApproved: every change the target sees since what runs was
	// approved as a diff (approval.Check); the newest is named.
	AsApproved Verdict = "approved"
	// Unaffected: nothing the target reads changed since what runs.
	Unaffected Verdict = "unaffected"
	// Restored: the changes since what runs return the target to a state
	// that was approved (a revert), or a writer let them apply.
	Restored Verdict = "restored"
	// Differs: a merged pull request is not what any standing approval
	// of it, applied to the branch, gives (a push after the approval, a
	// change made in the merge).
	Differs Verdict = "differs"
	// NotApproved: a merged pull request with reviews but no standing
	// approval by a user with write access, or a push that came from no
	// pull request, changes the target.
	NotApproved Verdict = "not-approved"
	// AsReviewed: as AsApproved, the newest change a pull request with no
	// review at all, merged by a writer as its plan comment showed it.
	AsReviewed Verdict = "reviewed"
	// PlanDiffers, for a pull request with no review at all: the merge is
	// not what its plan comment showed.
	PlanDiffers Verdict = "plan-differs"
	// NotReviewed, for a pull request with no review at all: no plan
	// comment, or its plan did not render the target (failed, absent) or
	// rendered it with other settings.
	NotReviewed Verdict = "not-reviewed"
	// Refused: the history from what runs is not approved for another
	// reason (a force-push; a change refused earlier still in the tree).
	Refused Verdict = "refused"
	// Unknown: the forge could not be asked, or git could not merge.
	Unknown Verdict = "unknown"
)

// Review is a deploy's comparison with what was approved: the verdict of
// approval.Check on the history from what the cluster runs to the tip.
type Review struct {
	Verdict Verdict
	// PR is the pull request the verdict names: the newest approved one,
	// or the first refused step's (0: a push).
	PR int
	// Commit and By are the approval the verdict names (the newest
	// standing one of PR when none matches).
	Commit, By string
	Reviewed   string // the plan comment's digest (PlanDiffers)
	Applied    string // the merged render's digest
	Head       string // the commit the plan comment rendered
	Err        string // why it could not be compared (Unknown, NotReviewed)
	// Why and Fix are the rule's words for a refusal: which step no
	// approval covers, and what would let it apply.
	Why, Fix string
	// Step is the commit of the step the verdict is about (a refused
	// push, a refused merge).
	Step string
	// Steps are the verdicts of each step from what runs to the tip.
	Steps []approval.Step
	// Unreadable are approvers whose permission could not be read: their
	// approvals counted as not a writer's.
	Unreadable []string
	// Note adds what the reviewer's view says besides the verdict: the
	// plan comment showed another render (the branch changed the target
	// after the plan), or rendered with other settings.
	Note string
	// Diff is how the refused step differs from what was approved (or,
	// for a push, what it changed), objects and fields, Secret values
	// hidden; unless DiffErr says why it is not known.
	Diff    *inventorydiff.Overlay
	DiffErr string
	// Acknowledged is who added config.ApplyUnreviewedLabel: the deploy
	// applied though requireReviewedPlan refuses it.
	Acknowledged string
	// Forge is the target's forge, which names the change in the words
	// of its reports: #12 and "pull request" on GitHub, !12 and "merge
	// request" on GitLab.
	Forge string
}

// ref is how the forge's users write the reviewed change.
func (r *Review) ref() string { return r.refOf(r.PR) }

func (r *Review) refOf(pr int) string {
	if r.Forge == config.GitLab {
		return fmt.Sprintf("!%d", pr)
	}
	return fmt.Sprintf("#%d", pr)
}

// change is what the forge calls a change under review.
func (r *Review) change() string {
	if r.Forge == config.GitLab {
		return "merge request"
	}
	return "pull request"
}

// Ok says whether requireReviewedPlan lets the deploy apply.
func (r *Review) Ok() bool {
	return r != nil && (r.Verdict == AsApproved || r.Verdict == Unaffected || r.Verdict == AsReviewed || r.Verdict == Restored)
}

// Describe is the review in words, for the deploy's reports.
func (r *Review) Describe() string {
	s := r.verdict()
	if r.Note != "" {
		s += " (" + r.Note + ")"
	}
	if n := len(r.Unreadable); n > 0 {
		s += fmt.Sprintf("; the permission of @%s could not be read: counted as not a writer", strings.Join(r.Unreadable, ", @"))
	}
	if r.Acknowledged != "" {
		s += fmt.Sprintf("; applied without the reviewed-plan check: @%s added the label %s", r.Acknowledged, config.ApplyUnreviewedLabel)
	}
	return s
}

// Against names what the refused step was compared with, for the
// reports' "how … differs from …".
func (r *Review) Against() string {
	switch {
	case r.Verdict == PlanDiffers:
		return "the plan reviewed in " + r.ref()
	case r.Verdict == NotApproved && r.PR == 0:
		return "what ran before it"
	}
	return fmt.Sprintf("what was approved in %s at %s", r.ref(), short(r.Commit))
}

// Subject names what the diff is of: the merge, or the push no one
// approved.
func (r *Review) Subject() string {
	if r.Verdict == NotApproved && r.PR == 0 {
		return "the push " + short(r.Step)
	}
	return "the merge"
}

// brief is the verdict without its details, for a refusal that must fit
// a commit status and a table cell (the review's own line has them).
func (r *Review) brief() string {
	switch r.Verdict {
	case Differs, PlanDiffers:
		return "differs from " + r.Against()
	}
	return r.verdict()
}

func (r *Review) verdict() string {
	switch r.Verdict {
	case AsApproved:
		return fmt.Sprintf("applied exactly as approved in %s at %s by @%s%s", r.ref(), short(r.Commit), r.By, r.earlier())
	case Unaffected:
		if r.PR == 0 {
			return "nothing the target reads changed"
		}
		return "not changed by " + r.ref()
	case Restored:
		return "the target returns to a state that was approved" + r.earlier()
	case Differs:
		return fmt.Sprintf("differs from what was approved in %s at %s by @%s: %s", r.ref(), short(r.Commit), r.By, r.Why)
	case NotApproved:
		if r.PR == 0 {
			return fmt.Sprintf("not approved: the push %s came from no %s and changes what the target reads", short(r.Step), r.change())
		}
		return fmt.Sprintf("not approved: %s has no standing approval by a user with write access", r.ref())
	case AsReviewed:
		return fmt.Sprintf("%s has no review; applied exactly as its plan comment showed%s", r.ref(), r.earlier())
	case PlanDiffers:
		return fmt.Sprintf("%s has no review; differs from the plan reviewed in %s at %s", r.ref(), r.ref(), short(r.Head))
	case NotReviewed:
		return fmt.Sprintf("%s has no review; not reviewed: %s", r.ref(), r.Err)
	case Refused:
		return "refused: " + r.Why
	default:
		return "not compared with what was approved (" + r.Err + ")"
	}
}

// earlier counts the other changes the verdict covers.
func (r *Review) earlier() string {
	n := 0
	for _, s := range r.Steps {
		if s.Verdict != approval.VerdictUnaffected && !(s.Kind == approval.KindPull && s.PR == r.PR) {
			n++
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return ", after 1 earlier change, itself approved"
	}
	return fmt.Sprintf(", after %d earlier changes, each approved", n)
}

// approvalTimeout bounds reading the review record, fetching, merging
// and rendering the approved commits of one target.
const approvalTimeout = 2 * time.Minute

// maxSteps bounds the first-parent steps a deploy checks: each costs
// forge calls, and a branch that far from what runs is refused, to be
// deployed by a writer's override.
const maxSteps = 200

// merged is a merge's render on its way to the cluster: the commit, its
// snapshot and its inventory as a plan computes it (declared.Planned).
type merged struct {
	dir, sha string
	s        *snapshot.Snapshot
	planned  *inventory.ObjectSet
	// deployed is the commit the target's inventory records as last
	// applied ("" for none): what the cluster runs.
	deployed string
}

// review checks the merged commit against what was approved (nil when
// the deployer has no Reviews), with the rule of internal/approval: what
// may be applied is what the cluster runs plus changes each of which
// reviewers approved as a diff.
func (d *Deployer) review(ctx context.Context, log *slog.Logger, t Target, m merged, pr int) *Review {
	if d.Reviews == nil || m.planned == nil {
		return nil
	}
	start := time.Now()
	r := d.compareApproved(ctx, log, t, m, pr)
	log.Info("compared with what was approved", "pr", r.PR, "verdict", r.Verdict, "steps", len(r.Steps), "took", time.Since(start).Round(time.Millisecond))
	return r
}

func (d *Deployer) compareApproved(ctx context.Context, log *slog.Logger, t Target, m merged, pr int) *Review {
	r := &Review{PR: pr, Forge: t.Forge}
	digest, err := m.planned.Digest()
	if err != nil {
		r.Verdict, r.Err = Unknown, "the merged render's digest: "+err.Error()
		return r
	}
	r.Applied = digest
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	g := d.Mirrors.Git(m.dir)
	from, chain, err := d.history(ctx, log, g, t, m)
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return r
	}
	rec, err := d.reviewRecord(ctx, log, t, chain)
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return r
	}
	scope := &targetScope{d: d, t: t, dir: m.dir, g: g, digests: map[string]renderDigest{}, closures: map[string]*closure.Closure{}}
	res, err := approval.Check(ctx, g, approval.Input{Deployed: from, Tip: m.sha, Record: rec, Scope: scope, Ref: r.refOf})
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return r
	}
	r.Steps, r.Unreadable = res.Steps, res.Unreadable
	d.conclude(ctx, log, t, m, r, res, rec)
	if m.deployed == "" && from != "" {
		r.Note = strings.TrimPrefix(r.Note+"; ", "; ") + fmt.Sprintf("a first deploy: kplan records nothing applied to this target, so the branch before the merge (%s) is taken as it is", short(from))
	}
	return r
}

// history is where the check starts and the first-parent commits from
// there to the merge. A target the inventory records no commit for (a
// first deploy) starts from the merge's first parent: kplan knows no
// earlier state of it, and a history before kplan deployed is the
// operator's to vouch for.
func (d *Deployer) history(ctx context.Context, log *slog.Logger, g approval.Git, t Target, m merged) (from string, chain []string, err error) {
	from = m.deployed
	if from == "" {
		if from, err = g.FirstParent(ctx, m.sha); err != nil {
			return "", nil, err
		}
	} else if _, err := g.Tree(ctx, from); err != nil {
		// A mirror made after a force-push removed what runs: GitHub
		// still serves it by SHA for a while.
		d.fetch(ctx, log, t, from, 0)
		if _, err := g.Tree(ctx, from); err != nil {
			return "", nil, fmt.Errorf("the commit the cluster runs, %s, is not in the repository any more (a force-push removed it?), so what changed since cannot be told: have a user with write access override the tip", short(from))
		}
	}
	base := from
	if from != "" {
		ok, err := g.IsAncestor(ctx, from, m.sha)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			if base, err = g.MergeBase(ctx, from, m.sha); err != nil {
				return "", nil, err
			}
		}
	}
	if chain, err = g.FirstParents(ctx, base, m.sha); err != nil {
		return "", nil, fmt.Errorf("the history from %s to %s: %w", short(base), short(m.sha), err)
	}
	if len(chain) > maxSteps {
		return "", nil, fmt.Errorf("%d commits on the branch since %s, which the cluster runs: more than the %d a deploy checks; have a user with write access override the tip", len(chain), short(from), maxSteps)
	}
	return from, chain, nil
}

// reviewRecord reads the review record of the steps: the merged pull requests
// from the forge, for one with no review at all the head its plan
// comment showed, the permission of every user whose approval the rule
// reads, and the approved commits brought into the mirror.
func (d *Deployer) reviewRecord(ctx context.Context, log *slog.Logger, t Target, chain []string) (*approval.Record, error) {
	pulls, err := d.Reviews.Pulls(ctx, t, chain)
	if err != nil {
		return nil, err
	}
	rec := &approval.Record{Pulls: pulls, Permissions: map[string]string{}}
	users := map[string]bool{}
	for i := range rec.Pulls {
		p := &rec.Pulls[i]
		for _, rv := range p.Reviews {
			if rv.State == approval.Approved {
				users[rv.User.Login] = true
				d.fetch(ctx, log, t, rv.CommitID, p.Number)
			}
		}
		if len(p.Reviews) == 0 && p.MergedBy.Login != "" {
			if p.PlanHead = d.planHead(ctx, log, t, p.Number); p.PlanHead != "" {
				users[p.MergedBy.Login] = true
				d.fetch(ctx, log, t, p.PlanHead, p.Number)
			}
		}
		// A rebase merge is told from pushes by the pull request's own
		// commits.
		if p.Commits > 1 {
			d.fetch(ctx, log, t, p.Head.SHA, p.Number)
		}
	}
	for _, login := range slices.Sorted(maps.Keys(users)) {
		ok, err := d.Reviews.CanWrite(ctx, t, login)
		switch {
		case err != nil:
			// Counted as not a writer; the verdict says so.
			log.Warn("cannot read a reviewer's permission; their approval does not count", "user", login, "err", err)
		case ok:
			rec.Permissions[login] = "write"
		default:
			rec.Permissions[login] = "read"
		}
	}
	return rec, nil
}

// fetch brings an approved commit into the mirror; one that cannot be
// fetched is said by the rule ("not in the repository").
func (d *Deployer) fetch(ctx context.Context, log *slog.Logger, t Target, sha string, pr int) {
	if sha == "" {
		return
	}
	if _, err := d.Mirrors.FetchCommit(ctx, t.CloneURL, sha, pr); err != nil {
		log.Warn("cannot fetch an approved commit", "pr", pr, "commit", sha, "err", err)
	}
}

// planHead is the head kplan's plan comment on pull request pr rendered,
// when it rendered the target with the target's own settings; "" when it
// did not (a plan comment by anyone but kplan's Action counts for
// nothing: ReviewedPlan reads only the plan author's).
func (d *Deployer) planHead(ctx context.Context, log *slog.Logger, t Target, pr int) string {
	plan, err := d.Reviews.ReviewedPlan(ctx, t, pr)
	if err != nil || plan == nil {
		if err != nil {
			log.Warn("cannot read the plan comment", "pr", pr, "err", err)
		}
		return ""
	}
	if plan.Settings.Differ(t.RenderSettings()) != "" {
		return ""
	}
	if _, ok := plan.Digests[t.Overlay]; !ok {
		return ""
	}
	return plan.Head
}

// conclude turns the rule's result into the deploy's review.
func (d *Deployer) conclude(ctx context.Context, log *slog.Logger, t Target, m merged, r *Review, res *approval.Result, rec *approval.Record) {
	switch res.Verdict {
	case approval.VerdictUnaffected:
		r.Verdict = Unaffected
		return
	case approval.VerdictApproved:
		r.Verdict = Restored
		for i := len(res.Steps) - 1; i >= 0; i-- {
			s := res.Steps[i]
			if s.Verdict != approval.VerdictApproved || s.Approval == nil {
				continue
			}
			r.Verdict, r.PR, r.Commit, r.By = AsApproved, s.PR, s.Approval.Commit, s.Approval.By
			if s.Approval.Plan {
				r.Verdict = AsReviewed
			} else {
				r.Note = d.planNote(ctx, t, r)
			}
			break
		}
		return
	}
	s := *res.Refused
	r.PR, r.Step, r.Why, r.Fix = s.PR, s.Commit, s.Why, s.Fix
	var pull *approval.Pull
	for i := range rec.Pulls {
		if rec.Pulls[i].Number == s.PR && s.Kind == approval.KindPull {
			pull = &rec.Pulls[i]
		}
	}
	switch {
	case s.Kind == approval.KindPush && s.Carries == "":
		r.Verdict = NotApproved
		r.Diff, r.DiffErr = d.stepDiff(ctx, t, m, s.Parent, s.Commit)
	case pull == nil || s.Carries != "":
		r.Verdict, r.Why = Refused, res.Why
	case len(pull.Reviews) == 0:
		d.unreviewed(ctx, log, t, m, r, s, pull)
	default:
		// The rule found no standing approval whose diff is the step: the
		// newest standing one is what the step is shown against.
		approvals, _ := rec.Standing(*pull)
		if len(approvals) == 0 {
			r.Verdict = NotApproved
			return
		}
		a := approvals[len(approvals)-1]
		r.Verdict, r.Commit, r.By = Differs, a.Commit, a.By
		r.Diff, r.DiffErr = d.approvedDiff(ctx, t, m, s, a.Commit)
	}
}

// unreviewed sets the verdict of a refused pull request with no review at
// all: it had no plan comment that rendered the target, or was not what
// its plan showed.
func (d *Deployer) unreviewed(ctx context.Context, log *slog.Logger, t Target, m merged, r *Review, s approval.Step, p *approval.Pull) {
	plan, err := d.Reviews.ReviewedPlan(ctx, t, p.Number)
	switch {
	case err != nil:
		r.Verdict, r.Err = Unknown, err.Error()
		return
	case plan == nil:
		r.Verdict, r.Err = NotReviewed, r.ref()+" has no kplan plan comment"
		return
	}
	r.Head = plan.Head
	_, rendered := plan.Digests[t.Overlay]
	switch diff := plan.Settings.Differ(t.RenderSettings()); {
	case diff != "":
		r.Verdict, r.Err = NotReviewed, "the plan rendered with other settings than target "+t.Name+": "+diff
	case !rendered && plan.WasSkipped(t.Overlay):
		// The plan proved the change cannot affect the overlay, and yet
		// the merge changes it: the branch moved after the plan.
		r.Verdict, r.Err = NotReviewed, fmt.Sprintf("the plan did not render %s (the change could not affect it then), but the merge changes it", t.Overlay)
	case !rendered:
		r.Verdict, r.Err = NotReviewed, fmt.Sprintf("the plan has no render of %s on head (it failed or is absent)", t.Overlay)
	case p.MergedBy.Login == "":
		r.Verdict, r.Err = NotReviewed, "the forge does not say who merged "+r.ref()
	default:
		r.Verdict, r.Reviewed = PlanDiffers, plan.Digests[t.Overlay]
		r.Diff, r.DiffErr = d.approvedDiff(ctx, t, m, s, plan.Head)
		if r.DiffErr != "" {
			log.Warn("cannot show how the merge differs from the reviewed plan", "pr", r.PR, "reviewed", plan.Head, "err", r.DiffErr)
		}
	}
}

// approvedDiff is how step s differs from the approved commit merged into
// the step's first parent, as the target renders them.
func (d *Deployer) approvedDiff(ctx context.Context, t Target, m merged, s approval.Step, approved string) (*inventorydiff.Overlay, string) {
	if _, err := d.Mirrors.FetchCommit(ctx, t.CloneURL, approved, s.PR); err != nil {
		return nil, err.Error()
	}
	commit, _, err := d.Mirrors.Merge(ctx, m.dir, s.Parent, approved)
	if err != nil {
		return nil, err.Error()
	}
	return d.stepDiff(ctx, t, m, commit, s.Commit)
}

// stepDiff is how commit b renders the target otherwise than commit a.
func (d *Deployer) stepDiff(ctx context.Context, t Target, m merged, a, b string) (*inventorydiff.Overlay, string) {
	before, err := d.render(ctx, t, m.dir, a)
	if err != nil {
		return nil, fmt.Sprintf("%s does not render: %v", short(a), err)
	}
	after := m.planned
	if b != m.sha {
		p, err := d.render(ctx, t, m.dir, b)
		if err != nil {
			return nil, fmt.Sprintf("%s does not render: %v", short(b), err)
		}
		after = p.Planned
	}
	return reviewDiff(t, before.Planned, after), ""
}

// planNote says what the plan comment, the reviewer's view, showed
// otherwise than the approved merge applies: another render of the
// target (the branch changed it after the plan) or other settings; ""
// when it agrees, or is not there to ask.
func (d *Deployer) planNote(ctx context.Context, t Target, r *Review) string {
	plan, err := d.Reviews.ReviewedPlan(ctx, t, r.PR)
	if err != nil || plan == nil {
		return ""
	}
	if diff := plan.Settings.Differ(t.RenderSettings()); diff != "" {
		return "the plan comment rendered with other settings: " + diff
	}
	if want, ok := plan.Digests[t.Overlay]; ok && want != markers.ShortDigest(r.Applied) && len(r.Steps) <= 1 {
		return "the plan comment showed another render of this target: the branch changed it after the plan"
	}
	return ""
}

// targetScope is what a target reads, for the approval rule: two trees
// differ for it when they render it differently (the deploy's own
// settings, declared.Planned's digest), which is asked only when the
// overlay's closure on either tree meets a path that differs, or cannot
// be bounded. A tree that does not render differs from every other.
type targetScope struct {
	d        *Deployer
	t        Target
	dir      string
	g        approval.CLI
	digests  map[string]renderDigest
	closures map[string]*closure.Closure
}

type renderDigest struct {
	digest string
	err    error
}

// Differs implements approval.Scope.
func (s *targetScope) Differs(ctx context.Context, a, b string, paths []string) (bool, error) {
	changed := map[string]bool{}
	for _, p := range paths {
		changed[p] = true
	}
	meets := false
	for _, tree := range []string{a, b} {
		c, err := s.closure(ctx, tree)
		if err != nil {
			return false, err
		}
		if !c.Bounded() || c.Meets(changed) {
			meets = true
			break
		}
	}
	if !meets {
		return false, nil
	}
	da, db := s.digest(ctx, a), s.digest(ctx, b)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if da.err != nil || db.err != nil {
		return true, nil
	}
	return da.digest != db.digest, nil
}

// closure is the overlay's closure on tree, computed once per tree: the
// rule compares each step with every tree the target may run.
func (s *targetScope) closure(ctx context.Context, tree string) (*closure.Closure, error) {
	if c, ok := s.closures[tree]; ok {
		return c, nil
	}
	commit, err := s.commit(ctx, tree)
	if err != nil {
		return nil, err
	}
	snap, err := s.d.Mirrors.Snapshot(ctx, s.dir, commit)
	if err != nil {
		return nil, err
	}
	c := closure.New(closure.SnapshotSource(ctx, snap), closure.Options{EnableHelm: s.t.Render.EnableHelm}).Overlay(s.t.Overlay)
	s.closures[tree] = c
	return c, nil
}

func (s *targetScope) String() string { return s.t.Overlay }

// commit is a commit of tree in the mirror, for what reads commits.
func (s *targetScope) commit(ctx context.Context, tree string) (string, error) {
	return s.g.CommitOf(ctx, tree)
}

func (s *targetScope) digest(ctx context.Context, tree string) renderDigest {
	if d, ok := s.digests[tree]; ok {
		return d
	}
	var out renderDigest
	c, err := s.commit(ctx, tree)
	if err == nil {
		var p *deploy.Prepared
		if p, err = s.d.render(ctx, s.t, s.dir, c); err == nil {
			out.digest, err = p.Planned.Digest()
		}
	}
	out.err = err
	if ctx.Err() == nil {
		s.digests[tree] = out
	}
	return out
}

// reviewDiff is how merged differs from reviewed: keys and field changes
// only, no YAML, kept with the outcome until the PR's comment is replaced.
func reviewDiff(t Target, reviewed, merged *inventory.ObjectSet) *inventorydiff.Overlay {
	o := inventorydiff.CompareOne(t.Overlay, inventorydiff.Side{Inventory: reviewed}, true, inventorydiff.Side{Inventory: merged}, true)
	o.AddedYAML, o.PrunedYAML, o.Dangerous = nil, nil, nil
	for i := range o.Changed {
		o.Changed[i].Unified = ""
	}
	return &o
}

// RenderSettings are the render settings the target's deploys use, to compare
// with those a plan recorded.
func (t Target) RenderSettings() inventorydiff.Settings {
	s := inventorydiff.Settings{Helm: t.Render.EnableHelm}
	if p, err := netpolicy.New(t.RemoteHosts, ""); err == nil {
		s.RemoteHosts = p.Names()
	}
	return s
}

// acknowledged checks that login, who added the apply-unreviewed label,
// may write to the repository: a label is a triage permission, and an
// acknowledgement from anyone less would let them skip the review.
func (d *Deployer) acknowledged(ctx context.Context, t Target, login string) error {
	if d.Reviews == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	ok, err := d.Reviews.CanWrite(ctx, t, login)
	switch {
	case err != nil:
		return fmt.Errorf("cannot check that @%s, who added the label %s, may write to %s: %w", login, config.ApplyUnreviewedLabel, t.Repo, err)
	case !ok:
		return fmt.Errorf("@%s added the label %s but may not write to %s: only a user with write access can acknowledge", login, config.ApplyUnreviewedLabel, t.Repo)
	}
	return nil
}

// refusal is the error of a deploy requireReviewedPlan stops, saying how
// to go on: the rule's fix, never a new commit on top (no approval of a
// later change carries a refused one).
func refusal(t Target, r *Review, ackErr error, pr int) error {
	why := ""
	if ackErr != nil {
		why = "; " + ackErr.Error()
	}
	fix := r.Fix
	if fix == "" {
		fix = "fix the cause above; a resync checks again"
	}
	label := ""
	if pr > 0 {
		// How a writer overrides, on the forge.
		label = fmt.Sprintf(" (to override: a user with write access adds the label %s to %s, which applies this commit once, while it is the branch's tip)", config.ApplyUnreviewedLabel, r.refOf(pr))
	}
	return fmt.Errorf("refusing to apply (requireReviewedPlan): %s%s; the cluster is unchanged. To deploy: %s%s; or set requireReviewedPlan: false for target %s",
		r.brief(), why, fix, label, t.Name)
}
