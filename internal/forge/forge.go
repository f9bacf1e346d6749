// Package forge is what kplan needs of a code forge (GitHub, GitLab),
// in the forge's absence: a change under review, a delivery
// decoded into an event, and a comment kept up to date on a change. The
// consumers (the Action, the webhook's ingress and its forwarder, the
// live plan) hold these types and interfaces; one package per forge
// (internal/forge/github, internal/forge/gitlab) implements them and is
// the only one that speaks the forge's API. The deploy reports
// (statuses, deployments, the reviewed plan, approvals) are the
// deployer's own interfaces, deployer.Reporter and deployer.Reviews,
// implemented in the forge's subpackage (internal/forge/*/deploys).
//
// See docs/forge.md for what a new forge implements.
package forge

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
)

// Change is a change under review: GitHub's pull request, GitLab's merge
// request.
type Change struct {
	Repo   string // owner/name (GitLab: the project's full path)
	Number int    // as the forge numbers changes in Repo
	// HeadSHA is the change's tip; HeadRef its branch (in the fork when
	// Fork).
	HeadSHA, HeadRef string
	// BaseRef is the branch it merges into; BaseSHA that branch's commit
	// the forge compared against, "" when it does not say.
	BaseRef, BaseSHA string
	// DefaultBranch is the repository's default branch, "" when the
	// forge does not say.
	DefaultBranch string
	// MergeSHA is the commit the forge made to merge it: a test merge
	// while open, the merge once merged; "" when there is none.
	MergeSHA string
	// Fork says the head is in another repository than Repo: its content
	// is untrusted (renders fetch only what fork-remote-hosts allows).
	Fork   bool
	Merged bool
	Labels []string
	Author string // the login that opened it
}

// HasLabel says whether the change carries the label (forges compare
// label names without case).
func (c Change) HasLabel(name string) bool {
	return slices.ContainsFunc(c.Labels, func(l string) bool { return strings.EqualFold(l, name) })
}

// DeployTarget names one target's deploys as kplan's webhook records
// them on the forge (internal/forge/*/deploys: a GitHub Deployment, a
// GitLab deployment), for a plan that asks what the target's cluster
// runs.
type DeployTarget struct {
	Repo   string // owner/name (GitLab: the project's full path)
	Branch string // the branch it deploys from
	Name   string
	// Key is the name the webhook's deploys carry (deployer.Target.Key):
	// Name for a target of the webhook's configuration,
	// "<repo>@<branch>/<name>" for one .kplan.yaml declares.
	Key string
	// Environment is what the deploys are recorded under
	// (deployreport.Environment): the target's environment, else its
	// name.
	Environment string
	Overlay     string
}

// Commenter keeps one marked comment per kind on a change: the first
// comment holding marker whose author is the token's own identity is
// edited in place, else one is created. A marker in anyone else's comment
// is never taken over (a stranger can post one first).
type Commenter interface {
	Upsert(ctx context.Context, repo string, number int, marker, body string) (CommentResult, error)
}

// CommentResult tells which comment holds the body.
type CommentResult struct {
	CommentID int64
	URL       string
	// Created is true when no marked comment of Self's existed and one
	// was posted.
	Created bool
	// Unchanged is true when the marked comment already had this body, so
	// it was left alone (no "edited" noise on the change).
	Unchanged bool
	// Self is the login whose marked comments were looked for, "" when
	// it was not known (then nothing was edited). Author is the login of
	// the comment that holds the body: when a created comment's Author is
	// not Self, the next run will not find it unless told whom it posts
	// as.
	Self, Author string
}

// ErrNoPermission means the token may read but not write comments, as with
// the GITHUB_TOKEN of a pull request from a fork. Callers usually warn and
// carry on.
var ErrNoPermission = errors.New("token may not write comments")

// ErrTooLong means the body, with the marker, exceeds the forge's limit.
var ErrTooLong = errors.New("comment body too long")

// CutChars is s cut to at most n characters, never inside one: forges
// count a comment's limit in characters (each forge package's
// MaxCommentChars), and a cut by bytes could split a UTF-8 sequence into
// a body the forge refuses or shows as garbage.
func CutChars(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n { // no more characters than bytes
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// Receiver is a forge's side of the webhook ingress: what its deliveries
// look like. The ingress (internal/webhook) and the forwarder of a
// replica that does not lead (internal/leader) bound, read and
// deduplicate the bodies; the receiver says who sent them and what they
// mean.
type Receiver interface {
	// Delivery reads a request's headers: its ID, event and credential.
	// An error (wrapping ErrUnsigned) refuses the request before its body
	// is read; the error's text is the answer.
	Delivery(h http.Header) (Delivery, error)
	// Verify says whether the body, given as its chunks in order (each
	// passed to the yield function), is signed by secret as the
	// delivery's credential says. It compares in constant time.
	Verify(d Delivery, body func(yield func([]byte)), secret []byte) bool
	// Decode reads a verified body into an Event. An error means the
	// body is not what its event says it is (answered 400 or 415 as
	// Status says).
	Decode(d Delivery, contentType string, body []byte) (Event, error)
	// ForwardHeader says whether a request header (canonical) belongs to
	// the delivery: a replica that does not lead forwards those (and
	// Content-Type) to the leader, no others.
	ForwardHeader(canonical string) bool
}

// ErrUnsigned refuses a delivery without the forge's credential header.
var ErrUnsigned = errors.New("delivery not signed")

// DecodeError is a body Decode refuses, with the HTTP status to answer.
type DecodeError struct {
	Status int // 400 or 415
	Err    error
}

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Delivery is one webhook request as its headers describe it.
type Delivery struct {
	ID    string // the forge's delivery ID (deduplicated), "" when none
	Event string // the forge's event name, for logs and metrics
	// Forge names the forge that sent it as the webhook's configuration
	// does ("github", "gitlab"): a delivery deploys only repositories
	// configured on its forge.
	Forge string
	// Credential is the signature (or token) the headers carry, for
	// Verify; never logged.
	Credential string
}

// EventKind says what a delivery is about.
type EventKind int

const (
	Other  EventKind = iota // an event kplan does not act on
	Ping                    // the forge testing the hook
	Push                    // a branch (or tag) moved
	Review                  // a change under review: Event.Action says what happened
)

// ChangeAction is what happened to a change under review.
type ChangeAction string

const (
	Opened   ChangeAction = "opened"      // opened, or reopened
	Updated  ChangeAction = "synchronize" // its head moved
	Closed   ChangeAction = "closed"      // closed, merged or not (Change.Merged)
	Labeled  ChangeAction = "labeled"     // a label added: Event.Label
	Reopened ChangeAction = "reopened"
)

// Event is a verified delivery decoded.
type Event struct {
	Kind EventKind
	Repo string // owner/name
	// Push: Ref as the forge names it ("refs/heads/main"), SHA the commit
	// it points to now, Deleted when it was deleted.
	Ref     string
	SHA     string
	Deleted bool
	// Review: the change, what happened to it (forge actions kplan does
	// not name are passed as the forge spells them), the label added and
	// who did it.
	Change *Change
	Action ChangeAction
	Label  string
	Sender string
}
