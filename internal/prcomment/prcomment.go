// Package prcomment is what kplan writes into comments on a change under
// review, whatever the forge: the hidden markers that find its "sticky"
// comments (one per kind, edited in place by forge.Commenter) and the
// reviewed-plan record the webhook compares a merge with.
package prcomment

// PlanMarker identifies kplan's plan comment. Other comment kinds use
// markers of their own so they do not overwrite each other.
const PlanMarker = "<!-- kplan:plan -->"

// MaxBodyChars is GitHub's limit on a comment body, in characters, marker
// included.
const MaxBodyChars = 65536
