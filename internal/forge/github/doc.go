// Package github is kplan's GitHub forge: with its subpackage deploys
// (the deploy reports), the only code that speaks GitHub's API
// (go-github). It implements the forge seam (internal/forge): the pull
// request comments (Poster, a forge.Commenter), the webhook's deliveries
// (Receiver, a forge.Receiver), and the Action's event and client
// (DecodeEvent, NewCommenter). See docs/forge.md.
package github
