package deployer

import (
	"context"
	"errors"

	"github.com/kplan-dev/kplan/internal/deploy"
)

// Reason says why a deploy ended as it did, as Flux's condition reasons
// do: one of a fixed set, so that metrics labels stay bounded and a
// report can say what kind of failure it was without parsing messages.
// It is recorded on the inventory object (AnnotationReason) next to the
// outcome.
type Reason string

const (
	// ReasonDeployed: applied, every object reconciled.
	ReasonDeployed Reason = "Deployed"
	// ReasonFetchFailed: the branch could not be fetched.
	ReasonFetchFailed Reason = "FetchFailed"
	// ReasonRenderFailed: the overlay did not render, uses a remote base
	// it may not, or names no inventory.
	ReasonRenderFailed Reason = "RenderFailed"
	// ReasonTargetsInvalid: the repository's targets file is missing or
	// invalid, or declares a target the webhook cannot deploy (an
	// environment it does not map, a name its configuration uses).
	ReasonTargetsInvalid Reason = "TargetsInvalid"
	// ReasonInventoryConflict: another target of the cluster applies
	// through the same inventory.
	ReasonInventoryConflict Reason = "InventoryConflict"
	// ReasonRefused: the apply was refused before changing anything: by
	// a pre-apply check (deploy.Checks: it would prune every object its
	// inventory holds, a copied inventory or an empty render), or because
	// requireReviewedPlan found the merged render not the one reviewed.
	ReasonRefused Reason = "Refused"
	// ReasonApplyFailed: the apply failed (the cluster unreachable, a
	// request refused).
	ReasonApplyFailed Reason = "ApplyFailed"
	// ReasonObjectsFailed: applied, but objects failed, were skipped or did
	// not reconcile in time.
	ReasonObjectsFailed Reason = "ObjectsFailed"
	// ReasonInterrupted: the deploy was cut short because the webhook
	// stopped or lost its leadership; the next run deploys again.
	ReasonInterrupted Reason = "Interrupted"
)

// Reasons lists every Reason, for metrics and documentation.
func Reasons() []Reason {
	return []Reason{ReasonDeployed, ReasonFetchFailed, ReasonRenderFailed, ReasonTargetsInvalid, ReasonInventoryConflict,
		ReasonRefused, ReasonApplyFailed, ReasonObjectsFailed, ReasonInterrupted}
}

// Describe is the reason in words, for reports.
func (r Reason) Describe() string {
	switch r {
	case ReasonDeployed:
		return "deployed"
	case ReasonFetchFailed:
		return "fetch failed"
	case ReasonRenderFailed:
		return "render failed"
	case ReasonTargetsInvalid:
		return "targets invalid"
	case ReasonInventoryConflict:
		return "inventory conflict"
	case ReasonRefused:
		return "refused"
	case ReasonApplyFailed:
		return "apply failed"
	case ReasonObjectsFailed:
		return "objects failed"
	case ReasonInterrupted:
		return "interrupted"
	}
	return string(r)
}

// applyReason classifies the end of an apply: err is the apply's error,
// res its result, ctx the run's context.
func applyReason(ctx context.Context, res *deploy.Result, err error) Reason {
	switch {
	case err == nil && res != nil && res.Failed():
		return ReasonObjectsFailed
	case err == nil:
		return ReasonDeployed
	case ctx.Err() != nil:
		return ReasonInterrupted
	case errors.Is(err, deploy.ErrRefused):
		return ReasonRefused
	}
	return ReasonApplyFailed
}
