package gitlab

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/forge"
)

// GitLab's event names (X-Gitlab-Event) kplan acts on.
const (
	MergeRequestHook = "Merge Request Hook"
	PushHook         = "Push Hook"
)

// Receiver reads GitLab's webhook deliveries: authenticated by the
// webhook's secret token, sent as it is in X-Gitlab-Token (GitLab signs
// nothing), named by Idempotency-Key (the same on GitLab's retries of
// one delivery), else X-Gitlab-Event-UUID, and X-Gitlab-Event; their
// payload JSON.
type Receiver struct{}

var _ forge.Receiver = Receiver{}

// Delivery implements forge.Receiver: a request without X-Gitlab-Token
// is refused before its body is read.
func (Receiver) Delivery(h http.Header) (forge.Delivery, error) {
	d := forge.Delivery{ID: h.Get("Idempotency-Key"), Event: h.Get("X-Gitlab-Event"), Credential: h.Get("X-Gitlab-Token"), Forge: "gitlab"}
	if d.ID == "" {
		d.ID = h.Get("X-Gitlab-Event-UUID")
	}
	if d.Credential == "" {
		return d, fmt.Errorf("%w: missing X-Gitlab-Token: set the webhook's secret token in GitLab", forge.ErrUnsigned)
	}
	return d, nil
}

// Verify implements forge.Receiver: the token is the secret, compared in
// constant time (hashed first, so that neither length shows). The body
// proves nothing: GitLab does not sign it.
func (Receiver) Verify(d forge.Delivery, _ func(yield func([]byte)), secret []byte) bool {
	if len(secret) == 0 {
		return false
	}
	got, want := sha256.Sum256([]byte(d.Credential)), sha256.Sum256(secret)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// Decode implements forge.Receiver for Merge Request Hook and Push Hook;
// other events decode as forge.Other when their payload is JSON.
func (Receiver) Decode(d forge.Delivery, contentType string, body []byte) (forge.Event, error) {
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return forge.Event{}, &forge.DecodeError{Status: http.StatusUnsupportedMediaType, Err: fmt.Errorf("bad Content-Type: %w", err)}
		}
		if mt != "application/json" {
			return forge.Event{}, &forge.DecodeError{Status: http.StatusUnsupportedMediaType, Err: fmt.Errorf("unsupported Content-Type %q: GitLab sends application/json", mt)}
		}
	}
	switch d.Event {
	case "":
		return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: errors.New("missing X-Gitlab-Event header")}
	case MergeRequestHook, PushHook:
	default:
		if !json.Valid(body) {
			return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: errors.New("malformed JSON payload")}
		}
		return forge.Event{Kind: forge.Other}, nil
	}
	ev, err := gitlab.ParseWebhook(gitlab.EventType(d.Event), body)
	if err != nil {
		return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: fmt.Errorf("malformed %s payload: %w", d.Event, err)}
	}
	switch e := ev.(type) {
	case *gitlab.PushEvent:
		return forge.Event{Kind: forge.Push, Repo: e.Project.PathWithNamespace, Ref: e.Ref, SHA: e.After,
			Deleted: strings.Trim(e.After, "0") == "", Sender: e.UserUsername}, nil
	case *gitlab.MergeEvent:
		c := changeOf(e, squashCommit(body))
		ev := forge.Event{Kind: forge.Review, Repo: e.Project.PathWithNamespace, Change: &c, Action: action(e)}
		if e.User != nil {
			ev.Sender = e.User.Username
		}
		if ev.Action == forge.Labeled {
			ev.Label = addedLabel(e)
		}
		return ev, nil
	}
	return forge.Event{Kind: forge.Other}, nil
}

// ForwardHeader implements forge.Receiver: GitLab's X-Gitlab-* headers
// and Idempotency-Key.
func (Receiver) ForwardHeader(canonical string) bool {
	return strings.HasPrefix(canonical, "X-Gitlab-") || canonical == "Idempotency-Key"
}

// action names what a Merge Request Hook says happened as the seam does:
// open and reopen, update with new commits (oldrev), labels added, merge
// and close; GitLab's other actions (approved, an update of the title)
// are passed as GitLab spells them.
func action(e *gitlab.MergeEvent) forge.ChangeAction {
	a := e.ObjectAttributes.Action
	switch {
	case a == "open":
		return forge.Opened
	case a == "reopen":
		return forge.Reopened
	case a == "merge", a == "close":
		return forge.Closed
	case a == "update" && e.ObjectAttributes.OldRev != "":
		return forge.Updated
	case a == "update" && addedLabel(e) != "":
		return forge.Labeled
	}
	return forge.ChangeAction(a)
}

// addedLabel is the first label an update added, "" for none.
func addedLabel(e *gitlab.MergeEvent) string {
	for _, cur := range e.Changes.Labels.Current {
		if cur == nil {
			continue
		}
		added := true
		for _, prev := range e.Changes.Labels.Previous {
			if prev != nil && prev.Title == cur.Title {
				added = false
			}
		}
		if added {
			return cur.Title
		}
	}
	return ""
}

// squashCommit is the commit a squashed merge request became,
// object_attributes.squash_commit_sha, which client-go's MergeEvent does
// not read; "" when there is none.
func squashCommit(body []byte) string {
	var p struct {
		ObjectAttributes struct {
			SquashCommitSHA string `json:"squash_commit_sha"`
		} `json:"object_attributes"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.ObjectAttributes.SquashCommitSHA
}

// changeOf is a merge request as the forge seam names it. A merge
// request merged without a merge commit points the target branch at its
// squash commit (squashed by fast-forward), else at its last commit
// (fast-forward).
func changeOf(e *gitlab.MergeEvent, squash string) forge.Change {
	a := e.ObjectAttributes
	c := forge.Change{
		Repo: e.Project.PathWithNamespace, Number: int(a.IID),
		HeadSHA: a.LastCommit.ID, HeadRef: a.SourceBranch, BaseRef: a.TargetBranch,
		MergeSHA: a.MergeCommitSHA, Merged: a.State == "merged" || a.Action == "merge",
		// A merge request whose source project is not the target is a
		// fork's: untrusted content, as a fork's pull request on GitHub.
		Fork: a.SourceProjectID != a.TargetProjectID,
	}
	if c.Merged && c.MergeSHA == "" {
		c.MergeSHA = cmp.Or(squash, c.HeadSHA)
	}
	labels := e.Labels
	if len(labels) == 0 {
		labels = a.Labels
	}
	for _, l := range labels {
		if l != nil {
			c.Labels = append(c.Labels, l.Title)
		}
	}
	return c
}
