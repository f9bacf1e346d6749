package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/forge"
)

// MaxCommentChars is GitHub's limit on an issue or pull request
// comment's body, in characters, marker included: whoever fits a body for
// GitHub (the plan comment, the deploy and live plan comments) fits it
// in this.
const MaxCommentChars = 65536

// MaxSummaryBytes is GitHub's limit on one step's job summary: 1 MiB, in
// bytes.
const MaxSummaryBytes = 1 << 20

// Poster keeps sticky comments through one client: forge.Commenter for
// GitHub's issue comments. A marked comment is
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

// Upsert makes the first comment on issue or PR number of fullName (owner/name) whose body contains
// marker and whose author is Self say body, creating the comment when
// there is none, or when Self is not known. The marker is prepended to
// body when body lacks it, so the next run finds the comment.
func (p *Poster) Upsert(ctx context.Context, fullName string, number int, marker, body string) (forge.CommentResult, error) {
	owner, repo, ok := strings.Cut(fullName, "/")
	if !ok {
		return forge.CommentResult{}, fmt.Errorf("repository %q is not owner/name", fullName)
	}
	if strings.TrimSpace(marker) == "" {
		// An empty marker would match, and overwrite, any comment.
		return forge.CommentResult{}, errors.New("comment: empty marker")
	}
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	if n := utf8.RuneCountInString(body); n > MaxCommentChars {
		return forge.CommentResult{}, fmt.Errorf("comment on %s/%s#%d: %w: %d characters, maximum %d", owner, repo, number, forge.ErrTooLong, n, MaxCommentChars)
	}

	self, err := p.Self(ctx)
	if err != nil {
		return forge.CommentResult{}, err
	}
	// Whose comment it is cannot be told without knowing who we are:
	// then a new comment, never an edit of someone else's.
	var existing *github.IssueComment
	if self != "" {
		if existing, err = FindBy(ctx, p.gh, owner, repo, number, marker, self); err != nil {
			return forge.CommentResult{}, err
		}
	}

	if existing == nil {
		c, _, err := p.gh.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: &body})
		if err != nil {
			return forge.CommentResult{}, writeError(fmt.Sprintf("create comment on %s/%s#%d", owner, repo, number), err)
		}
		author := c.GetUser().GetLogin()
		if author != "" {
			// GitHub says whom the token posts as: that holds for this
			// Poster's next comments, whatever was assumed.
			p.learn(author)
		}
		return forge.CommentResult{CommentID: c.GetID(), URL: c.GetHTMLURL(), Created: true, Self: self, Author: author}, nil
	}

	res := forge.CommentResult{CommentID: existing.GetID(), URL: existing.GetHTMLURL(), Self: self, Author: existing.GetUser().GetLogin()}
	if existing.GetBody() == body {
		res.Unchanged = true
		return res, nil
	}
	c, _, err := p.gh.Issues.EditComment(ctx, owner, repo, existing.GetID(), &github.IssueComment{Body: &body})
	if err != nil {
		return forge.CommentResult{}, writeError(fmt.Sprintf("edit comment %d on %s/%s#%d", existing.GetID(), owner, repo, number), err)
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

// writeError wraps a failed write, marking 403 and 404 as forge.ErrNoPermission:
// GitHub answers a token without write access with one or the other.
// Rate limits come back as other error types and stay plain errors.
func writeError(what string, err error) error {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil &&
		(er.Response.StatusCode == http.StatusForbidden || er.Response.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("%s: %w: %w", what, forge.ErrNoPermission, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

var _ forge.Commenter = (*Poster)(nil)
