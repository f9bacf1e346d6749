// Package prcomment keeps one "sticky" comment per kind on a pull request:
// the comment is found by a hidden marker and edited in place on every run,
// so a PR carries one up-to-date plan instead of a comment per push.
package prcomment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	// Created is true when no marked comment existed and one was posted.
	Created bool
	// Unchanged is true when the marked comment already had this body, so
	// it was left alone (no "edited" noise on the PR).
	Unchanged bool
}

// Upsert makes the first comment on issue or PR number whose body contains
// marker say body, creating the comment when there is none. The marker is
// prepended to body when body lacks it, so the next run finds the comment.
func Upsert(ctx context.Context, gh *github.Client, owner, repo string, number int, marker, body string) (Result, error) {
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

	existing, err := find(ctx, gh, owner, repo, number, marker)
	if err != nil {
		return Result{}, err
	}

	if existing == nil {
		c, _, err := gh.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: &body})
		if err != nil {
			return Result{}, writeError(fmt.Sprintf("create comment on %s/%s#%d", owner, repo, number), err)
		}
		return Result{CommentID: c.GetID(), URL: c.GetHTMLURL(), Created: true}, nil
	}

	if existing.GetBody() == body {
		return Result{CommentID: existing.GetID(), URL: existing.GetHTMLURL(), Unchanged: true}, nil
	}
	c, _, err := gh.Issues.EditComment(ctx, owner, repo, existing.GetID(), &github.IssueComment{Body: &body})
	if err != nil {
		return Result{}, writeError(fmt.Sprintf("edit comment %d on %s/%s#%d", existing.GetID(), owner, repo, number), err)
	}
	return Result{CommentID: c.GetID(), URL: c.GetHTMLURL()}, nil
}

// find returns the oldest comment containing marker, or nil. It pages
// through all comments because a busy PR's marked comment can be far back.
func find(ctx context.Context, gh *github.Client, owner, repo string, number int, marker string) (*github.IssueComment, error) {
	return FindBy(ctx, gh, owner, repo, number, marker, "")
}

// FindBy returns the oldest comment containing marker whose author is
// author ("" for anyone), or nil: a marker in someone else's comment is
// not kplan's.
func FindBy(ctx context.Context, gh *github.Client, owner, repo string, number int, marker, author string) (*github.IssueComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("list comments of %s/%s#%d (page %d): %w", owner, repo, number, max(opts.Page, 1), err)
		}
		for _, c := range cs {
			if strings.Contains(c.GetBody(), marker) && (author == "" || c.GetUser().GetLogin() == author) {
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
