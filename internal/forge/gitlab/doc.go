// Package gitlab is kplan's GitLab forge: with its subpackage deploys
// (the deploy reports), the only code that speaks GitLab's API
// (gitlab.com/gitlab-org/api/client-go). It implements the forge seam
// (internal/forge): the merge request notes (Poster, a
// forge.Commenter), the webhook's deliveries (Receiver, a
// forge.Receiver), and what GitLab CI's predefined variables say of a
// merge request pipeline (FromCI). See docs/forge.md and docs/gitlab.md.
package gitlab
