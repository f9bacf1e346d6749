package deployer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/prcomment"
	"github.com/kplan-dev/kplan/internal/render"
)

// Reviews finds the plan a merged pull request's comment showed
// (ghreport.Reporter): the hidden marker of the plan comment kplan's
// Action posted. pr 0 means the PR is to be found from the commit; plan
// nil means there is none. number is the PR it looked at (0: none).
type Reviews interface {
	ReviewedPlan(ctx context.Context, t Target, sha string, pr int) (plan *prcomment.Reviewed, number int, err error)
}

// Verdict compares what a deploy applies with the plan reviewed.
type Verdict string

const (
	// AsReviewed: the merged render is exactly the reviewed head render.
	AsReviewed Verdict = "reviewed"
	// Unaffected: the reviewed plan did not render the target's overlay,
	// because the pull request cannot affect it.
	Unaffected Verdict = "unaffected"
	// Differs: the merged render is not the one reviewed (the base moved
	// and touched it after the plan, or the plan is stale).
	Differs Verdict = "differs"
	// NoPlan: no plan comment of kplan's on the PR, or no PR (a push).
	NoPlan Verdict = "none"
	// Unknown: GitHub could not be asked.
	Unknown Verdict = "unknown"
)

// Review is a deploy's comparison with the plan reviewed.
type Review struct {
	Verdict  Verdict
	PR       int
	Reviewed string // the plan's digest of the overlay (128 bits)
	Applied  string // the merged render's digest
	Head     string // the commit the plan rendered
	Err      string // why GitHub could not be asked (Unknown)
	// Diff is how the merged render differs from the reviewed one (the
	// plan's head commit rendered again as the base side), objects and
	// fields, Secret values hidden; for Differs, unless DiffErr says why
	// the reviewed commit could not be fetched or rendered.
	Diff    *inventorydiff.Overlay
	DiffErr string
	// Acknowledged is who added config.ApplyUnreviewedLabel: the deploy
	// applied though requireReviewedPlan refuses it.
	Acknowledged string
}

// Ok says whether requireReviewedPlan lets the deploy apply.
func (r *Review) Ok() bool { return r != nil && (r.Verdict == AsReviewed || r.Verdict == Unaffected) }

// Describe is the review in words, for the deploy's reports.
func (r *Review) Describe() string {
	s := r.verdict()
	if r.Acknowledged != "" {
		s += fmt.Sprintf("; applied without the reviewed-plan check: @%s added the label %s", r.Acknowledged, config.ApplyUnreviewedLabel)
	}
	return s
}

// brief is the verdict without its details, for a refusal that must fit
// a commit status and a table cell (the review's own line has them).
func (r *Review) brief() string {
	if r.Verdict == Differs {
		return fmt.Sprintf("differs from the plan reviewed in #%d", r.PR)
	}
	return r.verdict()
}

func (r *Review) verdict() string {
	switch r.Verdict {
	case AsReviewed:
		return fmt.Sprintf("applied exactly as reviewed in #%d", r.PR)
	case Unaffected:
		return fmt.Sprintf("not changed by #%d (its plan did not need to render this target)", r.PR)
	case Differs:
		return fmt.Sprintf("differs from the plan reviewed in #%d: the plan rendered %s as %s, the merge renders %s (the base branch changed this target after the plan)",
			r.PR, short(r.Head), r.Reviewed, prcomment.ShortDigest(r.Applied))
	case NoPlan:
		if r.PR == 0 {
			return "no reviewed plan (the commit came from no pull request)"
		}
		return fmt.Sprintf("no reviewed plan (#%d has no kplan plan comment)", r.PR)
	default:
		return "not compared with the reviewed plan (" + r.Err + ")"
	}
}

// reviewTimeout bounds the search for the plan reviewed.
const reviewTimeout = 20 * time.Second

// explainTimeout bounds fetching and rendering the reviewed commit to
// show how a merge differs from it.
const explainTimeout = time.Minute

// review compares a merged render (planned: its inventory as a plan
// computes it) with the plan reviewed on its pull request, and when they
// differ, says how; nil when the deployer has no Reviews.
func (d *Deployer) review(ctx context.Context, log *slog.Logger, t Target, sha string, pr int, planned *inventory.Inventory) *Review {
	if d.Reviews == nil || planned == nil {
		return nil
	}
	digest, err := planned.Digest()
	if err != nil {
		return &Review{Verdict: Unknown, Err: "the merged render's digest: " + err.Error()}
	}
	r := d.compare(ctx, t, sha, pr, digest)
	if r.Verdict == Differs {
		d.explain(ctx, log, t, r, planned)
	}
	return r
}

// compare compares a merged render's digest with the plan reviewed.
func (d *Deployer) compare(ctx context.Context, t Target, sha string, pr int, digest string) *Review {
	// GitHub slow or down must not hold the deploy: the comparison is
	// then unknown (and refused only under requireReviewedPlan).
	rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	plan, n, err := d.Reviews.ReviewedPlan(rctx, t, sha, pr)
	r := &Review{PR: n, Applied: digest}
	switch {
	case err != nil:
		r.Verdict, r.Err = Unknown, err.Error()
	case plan == nil:
		r.Verdict = NoPlan
	default:
		r.Head = plan.Head
		want, planned := plan.Digests[t.Overlay]
		switch {
		case !planned:
			r.Verdict = Unaffected
		case want == prcomment.ShortDigest(digest):
			r.Verdict, r.Reviewed = AsReviewed, want
		default:
			r.Verdict, r.Reviewed = Differs, want
		}
	}
	return r
}

// explain renders the commit the plan reviewed (fetched by SHA: a test
// merge no branch reaches) and compares it with the merged render, so
// the reports show which objects and fields differ. It costs a fetch
// and a render, only when the digests differ; what fails is said in
// DiffErr and the deploy goes on.
func (d *Deployer) explain(ctx context.Context, log *slog.Logger, t Target, r *Review, merged *inventory.Inventory) {
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	reviewed, err := d.reviewedRender(ctx, t, r.Head, r.PR)
	if err != nil {
		r.DiffErr = err.Error()
		log.Warn("cannot show how the merge differs from the reviewed plan", "pr", r.PR, "reviewed", r.Head, "err", err)
		return
	}
	o := inventorydiff.CompareOne(t.Overlay, inventorydiff.Side{Inventory: reviewed}, true, inventorydiff.Side{Inventory: merged}, true)
	// Kept with the outcome until the PR's comment is replaced: keys and
	// field changes only, no YAML.
	o.AddedYAML, o.PrunedYAML, o.Dangerous = nil, nil, nil
	for i := range o.Changed {
		o.Changed[i].Unified = ""
	}
	r.Diff = &o
}

// reviewedRender renders the target's overlay at the commit a plan
// reviewed as the planner did (deploy.Planned, in the target's
// namespace). The commit may be a pull request's content never merged:
// it renders without network access.
func (d *Deployer) reviewedRender(ctx context.Context, t Target, sha string, pr int) (*inventory.Inventory, error) {
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
	none, err := netpolicy.New(nil, "")
	if err != nil {
		return nil, err
	}
	res, files, err := renderOverlay(ctx, s, t.Overlay, render.Options{Remote: none, EnableHelm: t.EnableHelm})
	if err != nil {
		return nil, fmt.Errorf("the reviewed commit %s does not render %s here: %w", short(sha), t.Overlay, err)
	}
	return deploy.Planned(res, files, cmp.Or(t.Namespace, deploy.DefaultNamespace))
}

// refusal is the error of a deploy requireReviewedPlan stops, saying how
// to go on.
func refusal(t Target, r *Review) error {
	label := ""
	if r.PR > 0 {
		label = fmt.Sprintf(", add the label %s to #%d (applies this commit once, while it is the branch's tip)", config.ApplyUnreviewedLabel, r.PR)
	}
	return fmt.Errorf("refusing to apply (requireReviewedPlan): %s; the cluster is unchanged. To deploy: re-run the plan and merge (an empty commit is enough)%s, or set requireReviewedPlan: false for target %s",
		r.brief(), label, t.Name)
}
