// Package prcomment keeps one "sticky" comment per kind on a pull request:
// the comment is found by a hidden marker among the token's own comments
// and edited in place on every run, so a PR carries one up-to-date plan
// instead of a comment per push.
package prcomment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/go-github/v60/github"
)

// PlanMarker identifies kplan's plan comment. Other comment kinds use
// markers of their own so they do not overwrite each other.
const PlanMarker = "<!-- kplan:plan -->"

// MaxBodyChars is GitHub's limit on a comment body, in characters, marker
// included.
const MaxBodyChars = 65536

// ErrNoPermission means the token may read but not write comments, as with
// the GITHUB_TOKEN of a pull request from a fork. Callers usually warn and
// carry on.
var ErrNoPermission = errors.New("token may not write comments")

// ErrTooLong means the body, with the marker, exceeds MaxBodyChars.
var ErrTooLong = errors.New("comment body too long")

// Result tells which comment holds the body.
type Result struct {
	CommentID int64
	URL       string
	// Created is true when no marked comment of Self's existed and one
	// was posted.
	Created bool
	// Unchanged is true when the marked comment already had this body, so
	// it was left alone (no "edited" noise on the PR).
	Unchanged bool
	// Self is the login whose marked comments were looked for, "" when
	// it was not known (then nothing was edited). Author is the login of
	// the comment that holds the body: when a created comment's Author is
	// not Self, the next run will not find it unless told whom it posts
	// as.
	Self, Author string
}

// Poster keeps sticky comments through one client. A marked comment is
// the client's only when the client's own identity wrote it: a marker in
// anyone else's comment (a stranger can post one first, then edit what
// kplan wrote into it) is never taken over. Make it with NewPoster; it is
// safe for concurrent use.
type Poster struct {
	gh *github.Client
	// as is the login to assume when GitHub will not say whom the token
	// is (see Self).
	as string

	mu sync.Mutex
	// self is the login learned: GET /user's, or the author of a comment
	// this Poster created.
	self string
}

// NewPoster makes a Poster writing through gh. as names whom the token
// posts as when GitHub will not tell: installation tokens (the workflow's
// GITHUB_TOKEN posts as "github-actions[bot]", an App's as
// "<app-slug>[bot]") get 403 from GET /user. "" means unknown.
func NewPoster(gh *github.Client, as string) *Poster {
	return &Poster{gh: gh, as: strings.TrimSpace(as)}
}

// Self is the login the client's comments are by: GET /user's answer
// when GitHub gives one (a user's token), else the login given to
// NewPoster, else the author of a comment this Poster created; "" when
// none of them is known. A 5xx or rate limit is an error rather than a
// guess.
func (p *Poster) Self(ctx context.Context) (string, error) {
	p.mu.Lock()
	self := p.self
	p.mu.Unlock()
	if self != "" {
		return self, nil
	}
	u, _, err := p.gh.Users.Get(ctx, "")
	if err == nil && u.GetLogin() != "" {
		p.learn(u.GetLogin())
		return u.GetLogin(), nil
	}
	var er *github.ErrorResponse
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.As(err, &er) && er.Response != nil && er.Response.StatusCode < http.StatusInternalServerError:
		// 403 for an installation token ("Resource not accessible by
		// integration"), 401 or 404 where the endpoint is not served
		// to it: GitHub will not say.
	case err != nil && !isHTTPError(err):
		// The transport could not authenticate a request about no
		// repository (an App without a fixed installation): neither.
	case err != nil:
		return "", fmt.Errorf("who the token is (GET /user): %w", err)
	}
	return p.as, nil
}

// isHTTPError is whether GitHub answered err (a status, a rate limit).
func isHTTPError(err error) bool {
	var er *github.ErrorResponse
	var rl *github.RateLimitError
	var arl *github.AbuseRateLimitError
	return errors.As(err, &er) || errors.As(err, &rl) || errors.As(err, &arl)
}

func (p *Poster) learn(login string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.self = login
}

// Upsert makes the first comment on issue or PR number whose body contains
// marker and whose author is Self say body, creating the comment when
// there is none, or when Self is not known. The marker is prepended to
// body when body lacks it, so the next run finds the comment.
func (p *Poster) Upsert(ctx context.Context, owner, repo string, number int, marker, body string) (Result, error) {
	if strings.TrimSpace(marker) == "" {
		// An empty marker would match, and overwrite, any comment.
		return Result{}, errors.New("prcomment: empty marker")
	}
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	if n := utf8.RuneCountInString(body); n > MaxBodyChars {
		return Result{}, fmt.Errorf("comment on %s/%s#%d: %w: %d characters, maximum %d", owner, repo, number, ErrTooLong, n, MaxBodyChars)
	}

	self, err := p.Self(ctx)
	if err != nil {
		return Result{}, err
	}
	// Whose comment it is cannot be told without knowing who we are:
	// then a new comment, never an edit of someone else's.
	var existing *github.IssueComment
	if self != "" {
		if existing, err = FindBy(ctx, p.gh, owner, repo, number, marker, self); err != nil {
			return Result{}, err
		}
	}

	if existing == nil {
		c, _, err := p.gh.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: &body})
		if err != nil {
			return Result{}, writeError(fmt.Sprintf("create comment on %s/%s#%d", owner, repo, number), err)
		}
		author := c.GetUser().GetLogin()
		if author != "" {
			// GitHub says whom the token posts as: that holds for this
			// Poster's next comments, whatever was assumed.
			p.learn(author)
		}
		return Result{CommentID: c.GetID(), URL: c.GetHTMLURL(), Created: true, Self: self, Author: author}, nil
	}

	res := Result{CommentID: existing.GetID(), URL: existing.GetHTMLURL(), Self: self, Author: existing.GetUser().GetLogin()}
	if existing.GetBody() == body {
		res.Unchanged = true
		return res, nil
	}
	c, _, err := p.gh.Issues.EditComment(ctx, owner, repo, existing.GetID(), &github.IssueComment{Body: &body})
	if err != nil {
		return Result{}, writeError(fmt.Sprintf("edit comment %d on %s/%s#%d", existing.GetID(), owner, repo, number), err)
	}
	res.URL = c.GetHTMLURL()
	return res, nil
}

// FindBy returns the oldest comment containing marker whose author is
// author (GitHub logins compare without case), or nil. A marker proves
// nothing by itself, anyone can post one: with no author nothing is
// found. It pages through all comments because a busy PR's marked comment
// can be far back.
func FindBy(ctx context.Context, gh *github.Client, owner, repo string, number int, marker, author string) (*github.IssueComment, error) {
	if author == "" {
		return nil, nil
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("list comments of %s/%s#%d (page %d): %w", owner, repo, number, max(opts.Page, 1), err)
		}
		for _, c := range cs {
			if strings.Contains(c.GetBody(), marker) && strings.EqualFold(c.GetUser().GetLogin(), author) {
				return c, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// writeError wraps a failed write, marking 403 and 404 as ErrNoPermission:
// GitHub answers a token without write access with one or the other.
// Rate limits come back as other error types and stay plain errors.
func writeError(what string, err error) error {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil &&
		(er.Response.StatusCode == http.StatusForbidden || er.Response.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("%s: %w: %w", what, ErrNoPermission, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
