package deployer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Reviews reads what the forge records of a merged pull request
// (internal/forge/github/deploys). What reviewers approved is anchored in the forge's
// own review record, never in a comment: anyone whose workflow can post
// as the plan's author could write a comment.
type Reviews interface {
	// Approvals are the approving reviews of the pull request sha merged
	// (pr, or found from the commit when 0).
	Approvals(ctx context.Context, t Target, sha string, pr int) (Approvals, error)
	// ReviewedPlan reads the reviewed-plan marker of kplan's plan comment
	// on pull request pr; nil when there is none. It is the reviewer's
	// view, and decides only for a pull request with no review at all.
	ReviewedPlan(ctx context.Context, t Target, pr int) (*markers.Reviewed, error)
	// CanWrite says whether login may push to t's repository: only such a
	// user's approval, or acknowledgement label, counts.
	CanWrite(ctx context.Context, t Target, login string) (bool, error)
}

// Approvals is the review record of a merged pull request.
type Approvals struct {
	PR int // 0: the commit came from no pull request
	// Reviews counts the pull request's reviews of any state: none at all
	// is a repository that does not review (the plan comment decides).
	Reviews int
	// Approved are the approvals that stand, newest first: each
	// reviewer's latest approving or change-requesting review, when it
	// approves, is not dismissed, and the reviewer may write to the
	// repository.
	Approved []Approval
}

// Approval is one standing approval: the head commit it was given on.
type Approval struct {
	Commit string
	By     string
}

// Verdict compares what a deploy applies with what was approved.
type Verdict string

const (
	// AsApproved: the merged render is what the approved head, merged
	// into the branch the merge was made on, renders.
	AsApproved Verdict = "approved"
	// Unaffected: the pull request does not change the target's render
	// (its closure meets none of the files the merge changed, or the
	// render equals the branch's before the merge).
	Unaffected Verdict = "unaffected"
	// Differs: the merged render is not what any standing approval
	// renders (pushed after the approval, or a merge no one reviewed).
	Differs Verdict = "differs"
	// NotApproved: the pull request has reviews but no standing approval
	// by a user with write access, or the commit came from no pull
	// request.
	NotApproved Verdict = "not-approved"
	// AsReviewed, for a pull request with no review at all: the merged
	// render is the one kplan's plan comment showed.
	AsReviewed Verdict = "reviewed"
	// PlanDiffers, for a pull request with no review at all: the merged
	// render is not the one the plan comment showed.
	PlanDiffers Verdict = "plan-differs"
	// NotReviewed, for a pull request with no review at all: no plan
	// comment, or its plan did not render the target (failed, absent) or
	// rendered it with other settings.
	NotReviewed Verdict = "not-reviewed"
	// Unknown: the forge could not be asked, or git could not merge.
	Unknown Verdict = "unknown"
)

// Review is a deploy's comparison with what was approved.
type Review struct {
	Verdict Verdict
	PR      int
	// Commit and By are the approval the merge was compared with (the
	// newest standing one when none matches).
	Commit, By string
	Reviewed   string // the plan comment's digest (PlanDiffers)
	Applied    string // the merged render's digest
	Head       string // the commit the plan comment rendered
	Err        string // why it could not be compared (Unknown, NotReviewed)
	// Note adds what the reviewer's view says besides the verdict: the
	// plan comment showed another render (the branch changed the target
	// after the plan), or rendered with other settings.
	Note string
	// Diff is how the merged render differs from the approved one (or,
	// with no review, from the plan comment's), objects and fields,
	// Secret values hidden; unless DiffErr says why it is not known.
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
func (r *Review) ref() string {
	if r.Forge == config.GitLab {
		return fmt.Sprintf("!%d", r.PR)
	}
	return fmt.Sprintf("#%d", r.PR)
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
	return r != nil && (r.Verdict == AsApproved || r.Verdict == Unaffected || r.Verdict == AsReviewed)
}

// Describe is the review in words, for the deploy's reports.
func (r *Review) Describe() string {
	s := r.verdict()
	if r.Note != "" {
		s += " (" + r.Note + ")"
	}
	if r.Acknowledged != "" {
		s += fmt.Sprintf("; applied without the reviewed-plan check: @%s added the label %s", r.Acknowledged, config.ApplyUnreviewedLabel)
	}
	return s
}

// Against names what the merge was compared with, for the reports'
// "how the merge differs from …".
func (r *Review) Against() string {
	if r.Verdict == PlanDiffers {
		return "the plan reviewed in " + r.ref()
	}
	return fmt.Sprintf("what was approved in %s at %s", r.ref(), short(r.Commit))
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
		return fmt.Sprintf("applied exactly as approved in %s at %s by @%s", r.ref(), short(r.Commit), r.By)
	case Unaffected:
		return "not changed by " + r.ref()
	case Differs:
		return fmt.Sprintf("differs from what was approved in %s at %s by @%s: the merge renders %s, which no standing approval renders on what the cluster runs (a push after the approval, or a commit no one approved between the one deployed and the merge)",
			r.ref(), short(r.Commit), r.By, markers.ShortDigest(r.Applied))
	case NotApproved:
		if r.PR == 0 {
			return "not approved (the commit came from no " + r.change() + ")"
		}
		return fmt.Sprintf("not approved: %s has no standing approval by a user with write access", r.ref())
	case AsReviewed:
		return fmt.Sprintf("%s has no review; applied exactly as its plan comment showed", r.ref())
	case PlanDiffers:
		return fmt.Sprintf("%s has no review; differs from the plan reviewed in %s: the plan rendered %s as %s, the merge renders %s",
			r.ref(), r.ref(), short(r.Head), r.Reviewed, markers.ShortDigest(r.Applied))
	case NotReviewed:
		return fmt.Sprintf("%s has no review; not reviewed: %s", r.ref(), r.Err)
	default:
		return "not compared with what was approved (" + r.Err + ")"
	}
}

// reviewTimeout bounds asking the forge for a merge's reviews.
const reviewTimeout = 20 * time.Second

// approvalTimeout bounds fetching, merging and rendering the approved
// commits of one target.
const approvalTimeout = 2 * time.Minute

// maxApprovedHeads bounds the distinct approved commits compared.
const maxApprovedHeads = 3

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

// review compares a merged render with what was approved on its pull
// request (nil when the deployer has no Reviews):
//
//  1. the pull request's standing approvals, from the forge;
//  2. the base is what the cluster runs: the commit the target last
//     applied, when the merge descends from it, else the merge's first
//     parent (a first deploy). So a commit in between that no one
//     approved (a merge refused before, a push to the branch) is never
//     applied under a later approval;
//  3. a target the merge does not change from the base is Unaffected,
//     whoever approved;
//  4. otherwise each approved head is merged into the base as git would,
//     and rendered with the target's own settings: a render equal to the
//     merge's is AsApproved; none equal is Differs, shown against the
//     newest;
//  5. a pull request with reviews but no standing approval is NotApproved,
//     and one with no review at all is compared with the plan comment.
func (d *Deployer) review(ctx context.Context, log *slog.Logger, t Target, m merged, pr int) *Review {
	if d.Reviews == nil || m.planned == nil {
		return nil
	}
	start := time.Now()
	r := d.compareApproved(ctx, log, t, m, pr)
	log.Info("compared with what was approved", "pr", r.PR, "verdict", r.Verdict, "took", time.Since(start).Round(time.Millisecond))
	return r
}

func (d *Deployer) compareApproved(ctx context.Context, log *slog.Logger, t Target, m merged, pr int) *Review {
	digest, err := m.planned.Digest()
	if err != nil {
		return &Review{Verdict: Unknown, Err: "the merged render's digest: " + err.Error(), Forge: t.Forge}
	}
	rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	ap, err := d.Reviews.Approvals(rctx, t, m.sha, pr)
	cancel()
	r := &Review{PR: cmp.Or(ap.PR, pr), Applied: digest, Forge: t.Forge}
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return r
	}
	if ap.PR == 0 {
		r.Verdict = NotApproved
		return r
	}
	actx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	parent, err := d.reviewBase(actx, m)
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return r
	}
	if same, err := d.unchanged(actx, t, m, parent); err != nil {
		log.Warn("cannot tell whether the merge changes the target", "err", err)
	} else if same {
		r.Verdict = Unaffected
		return r
	}
	switch {
	case len(ap.Approved) > 0:
		d.approved(actx, log, t, m, parent, r, ap)
		if r.Verdict == AsApproved {
			r.Note = d.planNote(ctx, t, r)
		}
	case ap.Reviews > 0:
		r.Verdict = NotApproved
	default:
		d.planComment(ctx, log, t, m, r)
	}
	return r
}

// reviewBase is the commit an approval is merged into: what the cluster
// runs (the commit last applied) when the merge descends from it, else
// the merge's first parent.
func (d *Deployer) reviewBase(ctx context.Context, m merged) (string, error) {
	if m.deployed != "" && m.deployed != m.sha && d.Mirrors.IsAncestor(ctx, m.dir, m.deployed, m.sha) {
		return m.deployed, nil
	}
	return d.Mirrors.FirstParent(ctx, m.dir, m.sha)
}

// planNote says what the plan comment, the reviewer's view, showed
// otherwise than the approved merge applies: another render of the
// target (the branch changed it after the plan) or other settings; ""
// when it agrees, or is not there to ask.
func (d *Deployer) planNote(ctx context.Context, t Target, r *Review) string {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	plan, err := d.Reviews.ReviewedPlan(ctx, t, r.PR)
	if err != nil || plan == nil {
		return ""
	}
	if diff := plan.Settings.Differ(t.RenderSettings()); diff != "" {
		return "the plan comment rendered with other settings: " + diff
	}
	if want, ok := plan.Digests[t.Overlay]; ok && want != markers.ShortDigest(r.Applied) {
		return "the plan comment showed another render of this target: the branch changed it after the plan"
	}
	return ""
}

// unchanged says whether merge m renders the target as commit base
// does: the closure of the overlay on both commits meets none of the
// files that differ (the plan's proof, without a render), or, for a
// closure that cannot be bounded, the two renders are equal.
func (d *Deployer) unchanged(ctx context.Context, t Target, m merged, base string) (bool, error) {
	ps, err := d.Mirrors.Snapshot(ctx, m.dir, base)
	if err != nil {
		return false, err
	}
	changed := snapshot.Changed(ps.Index, m.s.Index)
	bounded := true
	for _, s := range []*snapshot.Snapshot{ps, m.s} {
		c := closure.New(closure.SnapshotSource(ctx, s), closure.Options{EnableHelm: t.Render.EnableHelm}).Overlay(t.Overlay)
		if !c.Bounded() {
			bounded = false
			break
		}
		if c.Meets(changed) {
			return false, nil
		}
	}
	if bounded {
		return true, nil
	}
	before, err := d.render(ctx, t, m.dir, base)
	if err != nil {
		return false, err
	}
	return sameRender(before.Planned, m.planned)
}

func sameRender(a, b *inventory.ObjectSet) (bool, error) {
	da, err := a.Digest()
	if err != nil {
		return false, err
	}
	db, err := b.Digest()
	return da == db, err
}

// approved compares merge m with each standing approval's head merged
// into parent, newest first, and sets r's verdict.
func (d *Deployer) approved(ctx context.Context, log *slog.Logger, t Target, m merged, parent string, r *Review, ap Approvals) {
	tree, err := d.Mirrors.Tree(ctx, m.dir, m.sha)
	if err != nil {
		r.Verdict, r.Err = Unknown, err.Error()
		return
	}
	var (
		first *inventory.ObjectSet
		errs  []error
		tried []string
	)
	for _, a := range ap.Approved {
		if slices.Contains(tried, a.Commit) || len(tried) == maxApprovedHeads {
			continue
		}
		tried = append(tried, a.Commit)
		if len(tried) == 1 {
			r.Commit, r.By = a.Commit, a.By
		}
		if _, err := d.Mirrors.FetchCommit(ctx, t.CloneURL, a.Commit, r.PR); err != nil {
			errs = append(errs, err)
			continue
		}
		commit, mtree, err := d.Mirrors.Merge(ctx, m.dir, parent, a.Commit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mtree == tree {
			// The same tree renders the same: no render needed.
			r.Verdict, r.Commit, r.By = AsApproved, a.Commit, a.By
			return
		}
		p, err := d.render(ctx, t, m.dir, commit)
		if err != nil {
			errs = append(errs, fmt.Errorf("what %s approved does not render: %w", a.By, err))
			continue
		}
		if same, err := sameRender(p.Planned, m.planned); err == nil && same {
			r.Verdict, r.Commit, r.By = AsApproved, a.Commit, a.By
			return
		}
		if first == nil && len(tried) == 1 {
			first = p.Planned
		}
	}
	r.Verdict = Differs
	switch {
	case first != nil:
		r.Diff = reviewDiff(t, first, m.planned)
	case len(errs) > 0:
		r.DiffErr = errors.Join(errs...).Error()
		log.Warn("cannot show how the merge differs from what was approved", "pr", r.PR, "err", r.DiffErr)
	}
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

// planComment compares merge m with the plan comment of a pull request
// that has no review at all: a repository that does not review trusts the
// plan its author read (documented as the weaker check).
func (d *Deployer) planComment(ctx context.Context, log *slog.Logger, t Target, m merged, r *Review) {
	rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	plan, err := d.Reviews.ReviewedPlan(rctx, t, r.PR)
	cancel()
	switch {
	case err != nil:
		r.Verdict, r.Err = Unknown, err.Error()
		return
	case plan == nil:
		r.Verdict, r.Err = NotReviewed, r.ref()+" has no kplan plan comment"
		return
	}
	r.Head = plan.Head
	if diff := plan.Settings.Differ(t.RenderSettings()); diff != "" {
		r.Verdict, r.Err = NotReviewed, "the plan rendered with other settings than target "+t.Name+": "+diff
		return
	}
	want, ok := plan.Digests[t.Overlay]
	switch {
	case !ok && plan.WasSkipped(t.Overlay):
		// The plan proved the change cannot affect the overlay, and yet
		// the merge changes it: the branch moved after the plan.
		r.Verdict, r.Err = NotReviewed, fmt.Sprintf("the plan did not render %s (the change could not affect it then), but the merge changes it", t.Overlay)
	case !ok:
		r.Verdict, r.Err = NotReviewed, fmt.Sprintf("the plan has no render of %s on head (it failed or is absent)", t.Overlay)
	case want == markers.ShortDigest(r.Applied):
		r.Verdict, r.Reviewed = AsReviewed, want
	default:
		r.Verdict, r.Reviewed = PlanDiffers, want
		reviewed, err := d.reviewedRender(ctx, t, plan.Head, r.PR)
		if err != nil {
			r.DiffErr = err.Error()
			log.Warn("cannot show how the merge differs from the reviewed plan", "pr", r.PR, "reviewed", plan.Head, "err", err)
			return
		}
		r.Diff = reviewDiff(t, reviewed, m.planned)
	}
}

// explainTimeout bounds fetching and rendering the reviewed commit to
// show how a merge differs from it.
const explainTimeout = time.Minute

// reviewedRender renders the target's overlay at the commit a plan
// reviewed as the planner did (declared.Planned, in the target's
// namespace). The commit may be a pull request's content never merged:
// it renders without network access.
func (d *Deployer) reviewedRender(ctx context.Context, t Target, sha string, pr int) (*inventory.ObjectSet, error) {
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	if sha == "" {
		return nil, fmt.Errorf("the plan comment names no commit")
	}
	dir, err := d.Mirrors.FetchCommit(ctx, t.CloneURL, sha, pr)
	if err != nil {
		return nil, fmt.Errorf("the reviewed commit %s cannot be fetched: %w", short(sha), err)
	}
	s, err := d.Mirrors.Snapshot(ctx, dir, sha)
	if err != nil {
		return nil, fmt.Errorf("the reviewed commit %s: %w", short(sha), err)
	}
	settings := deploy.SettingsOf(t.Target)
	settings.Plan = true
	p, err := deploy.Prepare(ctx, deploy.FromSnapshot(s), settings, deploy.Offline)
	if err != nil {
		return nil, fmt.Errorf("the reviewed commit %s does not render %s here: %w", short(sha), t.Overlay, err)
	}
	return p.Planned, nil
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
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
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
// to go on.
func refusal(t Target, r *Review, ackErr error) error {
	label := ""
	if r.PR > 0 {
		label = fmt.Sprintf(", have a user with write access add the label %s to %s (applies this commit once, while it is the branch's tip)", config.ApplyUnreviewedLabel, r.ref())
	}
	why := ""
	if ackErr != nil {
		why = "; " + ackErr.Error()
	}
	return fmt.Errorf("refusing to apply (requireReviewedPlan): %s%s; the cluster is unchanged. To deploy: approve the %s's head and merge again (an empty commit is enough)%s, or set requireReviewedPlan: false for target %s",
		r.brief(), why, r.change(), label, t.Name)
}
