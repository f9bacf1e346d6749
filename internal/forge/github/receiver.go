package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/forge"
)

// Receiver reads GitHub's webhook deliveries: signed with the webhook's
// secret (X-Hub-Signature-256, HMAC-SHA256 of the body), named by
// X-GitHub-Delivery and X-GitHub-Event, their payload JSON or a form's
// payload field.
type Receiver struct{}

var _ forge.Receiver = Receiver{}

// Delivery implements forge.Receiver. Only SHA-256 signatures are taken:
// go-github would also accept sha1= and sha512=.
func (Receiver) Delivery(h http.Header) (forge.Delivery, error) {
	d := forge.Delivery{ID: h.Get("X-GitHub-Delivery"), Event: h.Get("X-GitHub-Event"), Credential: h.Get("X-Hub-Signature-256"), Forge: "github"}
	if !strings.HasPrefix(d.Credential, "sha256=") {
		return d, fmt.Errorf("%w: missing X-Hub-Signature-256 (sha256=...) signature: set the webhook's secret in GitHub", forge.ErrUnsigned)
	}
	return d, nil
}

// Verify implements forge.Receiver: the check github.ValidateSignature
// makes, done over the body's chunks (Delivery checked the prefix).
func (Receiver) Verify(d forge.Delivery, body func(yield func([]byte)), secret []byte) bool {
	want, err := hex.DecodeString(strings.TrimPrefix(d.Credential, "sha256="))
	if err != nil || len(want) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	body(func(p []byte) { mac.Write(p) })
	return hmac.Equal(mac.Sum(nil), want)
}

// Decode implements forge.Receiver for the events kplan acts on (ping,
// push, pull_request); others decode as forge.Other when their payload
// is JSON.
func (Receiver) Decode(d forge.Delivery, contentType string, body []byte) (forge.Event, error) {
	payload, err := payloadOf(contentType, body)
	if err != nil {
		return forge.Event{}, err
	}
	switch d.Event {
	case "":
		return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: errors.New("missing X-GitHub-Event header")}
	case "ping", "push", "pull_request":
	default:
		if !json.Valid(payload) {
			return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: errors.New("malformed JSON payload")}
		}
		return forge.Event{Kind: forge.Other}, nil
	}
	ev, err := github.ParseWebHook(d.Event, payload)
	if err != nil {
		return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: fmt.Errorf("malformed %s payload: %w", d.Event, err)}
	}
	switch e := ev.(type) {
	case *github.PingEvent:
		return forge.Event{Kind: forge.Ping, Repo: e.GetRepo().GetFullName()}, nil
	case *github.PushEvent:
		return forge.Event{Kind: forge.Push, Repo: e.GetRepo().GetFullName(), Ref: e.GetRef(), SHA: e.GetAfter(), Deleted: e.GetDeleted()}, nil
	case *github.PullRequestEvent:
		c := change(e.GetRepo(), e.GetPullRequest())
		if n := e.GetNumber(); n != 0 {
			c.Number = n
		}
		return forge.Event{Kind: forge.Review, Repo: e.GetRepo().GetFullName(), Change: &c,
			Action: forge.ChangeAction(e.GetAction()), Label: e.GetLabel().GetName(), Sender: e.GetSender().GetLogin()}, nil
	}
	return forge.Event{Kind: forge.Other}, nil
}

// ForwardHeader implements forge.Receiver: GitHub's X-GitHub-* and
// X-Hub-Signature* headers.
func (Receiver) ForwardHeader(canonical string) bool {
	return strings.HasPrefix(canonical, "X-Github-") || strings.HasPrefix(canonical, "X-Hub-Signature")
}

// change is a pull request as the forge seam names it.
func change(repo *github.Repository, pr *github.PullRequest) forge.Change {
	c := forge.Change{
		Repo: repo.GetFullName(), Number: pr.GetNumber(),
		HeadSHA: pr.GetHead().GetSHA(), HeadRef: pr.GetHead().GetRef(),
		BaseRef: pr.GetBase().GetRef(), BaseSHA: pr.GetBase().GetSHA(),
		MergeSHA: pr.GetMergeCommitSHA(), Merged: pr.GetMerged(), Author: pr.GetUser().GetLogin(),
	}
	head, base := pr.GetHead().GetRepo().GetFullName(), pr.GetBase().GetRepo().GetFullName()
	// A fork that was deleted has no head repository: still a fork.
	c.Fork = head == "" || !strings.EqualFold(head, base)
	for _, l := range pr.Labels {
		c.Labels = append(c.Labels, l.GetName())
	}
	return c
}

// payloadOf extracts the JSON payload: GitHub sends it as the body or,
// for webhooks set to application/x-www-form-urlencoded, as the payload
// form field.
func payloadOf(contentType string, body []byte) ([]byte, error) {
	mt := "application/json"
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return nil, &forge.DecodeError{Status: http.StatusUnsupportedMediaType, Err: fmt.Errorf("bad Content-Type: %w", err)}
		}
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &forge.DecodeError{Status: http.StatusBadRequest, Err: fmt.Errorf("bad form body: %w", err)}
		}
		return []byte(form.Get("payload")), nil
	}
	return nil, &forge.DecodeError{Status: http.StatusUnsupportedMediaType, Err: fmt.Errorf("unsupported Content-Type %q: set the webhook's content type to application/json", mt)}
}
