package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/forge"
)

// MaxCommentChars is GitLab's limit on a note's body, in characters,
// marker included (1,000,000: a note is not cut at GitHub's 65,536).
const MaxCommentChars = 1_000_000

// Poster keeps marked notes on merge requests through one client:
// forge.Commenter for GitLab. A marked note is the client's only when
// the token's own user wrote it (GET /user: a project or group access
// token is a bot user of its own); a marker in anyone else's note is
// never taken over. Safe for concurrent use.
type Poster struct {
	gl *gitlab.Client

	mu   sync.Mutex
	self string // the token's username, once learned
}

// NewPoster makes a Poster writing through gl.
func NewPoster(gl *gitlab.Client) *Poster { return &Poster{gl: gl} }

// NewCommenter is the CI entry point's Poster: token's notes through the
// API at apiURL.
func NewCommenter(apiURL, token string) (*Poster, error) {
	gl, err := NewClient(apiURL, token)
	if err != nil {
		return nil, err
	}
	return NewPoster(gl), nil
}

// Self is the username the token's notes are by (GET /user); "" when
// GitLab will not say (401, 403), an error when it fails otherwise.
func (p *Poster) Self(ctx context.Context) (string, error) {
	p.mu.Lock()
	self := p.self
	p.mu.Unlock()
	if self != "" {
		return self, nil
	}
	u, _, err := p.gl.Users.CurrentUser(gitlab.WithContext(ctx))
	switch {
	case err == nil && u.Username != "":
		p.mu.Lock()
		p.self = u.Username
		p.mu.Unlock()
		return u.Username, nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	case Status(err) == http.StatusUnauthorized || Status(err) == http.StatusForbidden:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("who the token is (GET /user): %w", err)
	}
	return "", nil
}

// Upsert makes the first note on merge request iid of project (its full
// path) whose body contains marker and whose author is Self say body,
// creating it when there is none, or when Self is not known. The marker
// is prepended to body when body lacks it.
func (p *Poster) Upsert(ctx context.Context, project string, iid int, marker, body string) (forge.CommentResult, error) {
	if strings.TrimSpace(marker) == "" {
		return forge.CommentResult{}, errors.New("note: empty marker")
	}
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	if n := utf8.RuneCountInString(body); n > MaxCommentChars {
		return forge.CommentResult{}, fmt.Errorf("note on %s!%d: %w: %d characters, maximum %d", project, iid, forge.ErrTooLong, n, MaxCommentChars)
	}
	self, err := p.Self(ctx)
	if err != nil {
		return forge.CommentResult{}, err
	}
	var existing *gitlab.Note
	if self != "" {
		if existing, err = FindBy(ctx, p.gl, project, iid, marker, self); err != nil {
			return forge.CommentResult{}, err
		}
	}
	if existing == nil {
		n, _, err := p.gl.Notes.CreateMergeRequestNote(project, int64(iid), &gitlab.CreateMergeRequestNoteOptions{Body: &body}, gitlab.WithContext(ctx))
		if err != nil {
			return forge.CommentResult{}, writeError(fmt.Sprintf("create a note on %s!%d", project, iid), err)
		}
		author := n.Author.Username
		if author != "" && self == "" {
			p.mu.Lock()
			p.self = author
			p.mu.Unlock()
		}
		return forge.CommentResult{CommentID: n.ID, URL: noteURL(project, iid, n.ID), Created: true, Self: self, Author: author}, nil
	}
	res := forge.CommentResult{CommentID: existing.ID, URL: noteURL(project, iid, existing.ID), Self: self, Author: existing.Author.Username}
	if existing.Body == body {
		res.Unchanged = true
		return res, nil
	}
	if _, _, err := p.gl.Notes.UpdateMergeRequestNote(project, int64(iid), existing.ID, &gitlab.UpdateMergeRequestNoteOptions{Body: &body}, gitlab.WithContext(ctx)); err != nil {
		return forge.CommentResult{}, writeError(fmt.Sprintf("edit note %d on %s!%d", existing.ID, project, iid), err)
	}
	return res, nil
}

// noteURL names a note as a path of the project (the API does not give
// its web address).
func noteURL(project string, iid int, id int64) string {
	return fmt.Sprintf("%s/-/merge_requests/%d#note_%d", project, iid, id)
}

// FindBy returns the oldest note of merge request iid containing marker
// whose author is author (usernames compare without case), or nil;
// system notes never count. It pages through every note: a busy merge
// request's marked note can be far back.
func FindBy(ctx context.Context, gl *gitlab.Client, project string, iid int, marker, author string) (*gitlab.Note, error) {
	if author == "" {
		return nil, nil
	}
	asc, by := "asc", "created_at"
	opts := &gitlab.ListMergeRequestNotesOptions{ListOptions: gitlab.ListOptions{PerPage: 100, Page: 1}, Sort: &asc, OrderBy: &by}
	for {
		ns, resp, err := gl.Notes.ListMergeRequestNotes(project, int64(iid), opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("list the notes of %s!%d (page %d): %w", project, iid, opts.Page, err)
		}
		for _, n := range ns {
			if !n.System && strings.Contains(n.Body, marker) && strings.EqualFold(n.Author.Username, author) {
				return n, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// Status is the HTTP status GitLab answered err with, 0 for none: one
// reading of client-go's errors for the notes and the deploy reports.
func Status(err error) int {
	var er *gitlab.ErrorResponse
	switch {
	case errors.As(err, &er) && er.Response != nil:
		return er.Response.StatusCode
	case errors.Is(err, gitlab.ErrNotFound):
		// client-go answers 404 with this sentinel, not an ErrorResponse.
		return http.StatusNotFound
	}
	return 0
}

// writeError wraps a failed write, marking 403 and 404 as
// forge.ErrNoPermission: GitLab answers a token that may not write
// notes (a job token, a reporter's) with one or the other.
func writeError(what string, err error) error {
	if s := Status(err); s == http.StatusForbidden || s == http.StatusNotFound {
		return fmt.Errorf("%s: %w: %w", what, forge.ErrNoPermission, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

var _ forge.Commenter = (*Poster)(nil)
