package github

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/forge"
)

// NewClient is a go-github client of the API at apiURL ("" is
// api.github.com; GitHub Enterprise Server and tests name theirs),
// authenticating through rt (ghauth.Transport); nil rt sends no
// credentials.
func NewClient(apiURL string, rt http.RoundTripper) (*github.Client, error) {
	gh := github.NewClient(&http.Client{Timeout: 30 * time.Second, Transport: rt})
	if apiURL == "" {
		return gh, nil
	}
	u, err := url.Parse(strings.TrimSuffix(apiURL, "/") + "/")
	if err != nil {
		return nil, err
	}
	gh.BaseURL = u
	return gh, nil
}

// NewCommenter is the Action's Poster: token's comments through the API
// at apiURL, as NewPoster says of as.
func NewCommenter(apiURL, token, as string) (*Poster, error) {
	gh, err := NewClient(apiURL, nil)
	if err != nil {
		return nil, err
	}
	return NewPoster(gh.WithAuthToken(token), as), nil
}

// DecodeEvent reads the payload of the event a workflow ran on
// (GITHUB_EVENT_PATH): a push (forge.Push: Repo, Ref, SHA) or a
// pull_request or pull_request_target (forge.Review: Repo and Change).
// Repo is the repository's owner login and name.
func DecodeEvent(name string, payload []byte) (forge.Event, error) {
	switch name {
	case "push":
		var ev github.PushEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return forge.Event{}, err
		}
		return forge.Event{Kind: forge.Push, Repo: fullName(ev.GetRepo().GetOwner().GetLogin(), ev.GetRepo().GetName()), Ref: ev.GetRef(), SHA: ev.GetAfter()}, nil
	case "pull_request", "pull_request_target":
		var ev github.PullRequestEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return forge.Event{}, err
		}
		repo := ev.GetRepo()
		c := change(repo, ev.GetPullRequest())
		c.Repo = fullName(repo.GetOwner().GetLogin(), repo.GetName())
		c.DefaultBranch = cmp.Or(repo.GetDefaultBranch(), ev.GetPullRequest().GetBase().GetRepo().GetDefaultBranch())
		return forge.Event{Kind: forge.Review, Repo: c.Repo, Change: &c, Action: forge.ChangeAction(ev.GetAction())}, nil
	}
	return forge.Event{}, fmt.Errorf("event %q: want push, pull_request or pull_request_target", name)
}

func fullName(owner, name string) string {
	if owner == "" && name == "" {
		return ""
	}
	return owner + "/" + name
}
