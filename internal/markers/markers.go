// Package markers is what kplan hides in the comments it writes on a
// change under review, whatever the forge: the markers that find its
// "sticky" comments (one per kind, edited in place by forge.Commenter)
// and the reviewed-plan record the webhook compares a merge with.
package markers

// PlanMarker identifies kplan's plan comment. Other comment kinds use
// markers of their own so they do not overwrite each other.
const PlanMarker = "<!-- kplan:plan -->"
