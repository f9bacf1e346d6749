package deployer

import (
	"context"
	"fmt"
	"time"

	"github.com/kplan-dev/kplan/internal/prcomment"
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
}

// Ok says whether requireReviewedPlan lets the deploy apply.
func (r *Review) Ok() bool { return r != nil && (r.Verdict == AsReviewed || r.Verdict == Unaffected) }

// Describe is the review in words, for the deploy's reports.
func (r *Review) Describe() string {
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

// review compares a merged render's digest with the plan reviewed on its
// pull request; nil when the deployer has no Reviews.
func (d *Deployer) review(ctx context.Context, t Target, sha string, pr int, digest string) *Review {
	if d.Reviews == nil {
		return nil
	}
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

// refusal is the error of a deploy requireReviewedPlan stops, saying how
// to go on.
func refusal(t Target, r *Review) error {
	return fmt.Errorf("refusing to apply (requireReviewedPlan): %s. The cluster is unchanged. To deploy, merge again through a pull request whose plan shows this state (an empty commit is enough), or set requireReviewedPlan: false for target %s", r.Describe(), t.Name)
}
