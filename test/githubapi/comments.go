package githubapi

import (
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// MaxCommentChars is GitHub's limit on an issue comment body, in characters.
const MaxCommentChars = 65536

// User is the user object GitHub embeds in comments, statuses and
// deployments.
type User struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

// Comment is an issue (or pull request) comment, in GitHub's JSON shape.
type Comment struct {
	ID                int64     `json:"id"`
	NodeID            string    `json:"node_id"`
	URL               string    `json:"url"`
	HTMLURL           string    `json:"html_url"`
	IssueURL          string    `json:"issue_url"`
	Body              string    `json:"body"`
	User              User      `json:"user"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	AuthorAssociation string    `json:"author_association"`
}

// Comments returns copies of the comments on an issue, oldest first.
func (s *Server) Comments(owner, repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyAll(s.comments[issueKey{repoKey{owner, repo}, number}])
}

// SeedComment adds a pre-existing comment by login (a "[bot]" suffix makes
// it a Bot) and returns it.
func (s *Server) SeedComment(owner, repo string, number int, login, body string) Comment {
	id := Identity{Login: login, Type: userType(login)}
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addComment(s.srv.URL, issueKey{repoKey{owner, repo}, number}, id, body)
}

// addComment stores a new comment; the caller holds s.mu.
func (s *Server) addComment(base string, k issueKey, author Identity, body string) *Comment {
	id := s.newID()
	t := now()
	issueURL := fmt.Sprintf("%s/repos/%s/%s/issues/%d", base, k.owner, k.repo, k.number)
	c := &Comment{
		ID:                id,
		NodeID:            fmt.Sprintf("IC_fake%d", id),
		URL:               fmt.Sprintf("%s/repos/%s/%s/issues/comments/%d", base, k.owner, k.repo, id),
		HTMLURL:           fmt.Sprintf("%s/%s/%s/pull/%d#issuecomment-%d", base, k.owner, k.repo, k.number, id),
		IssueURL:          issueURL,
		Body:              body,
		User:              userOf(author),
		CreatedAt:         t,
		UpdatedAt:         t,
		AuthorAssociation: "NONE",
	}
	s.comments[k] = append(s.comments[k], c)
	return c
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	n, ok := pathInt(w, r, "number")
	if !ok {
		return
	}
	s.mu.Lock()
	all := copyAll(s.comments[issueKey{repoOf(r), int(n)}])
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page(w, r, all))
}

type commentRequest struct {
	Body *string `json:"body"`
}

// validBody applies GitHub's checks on a comment body and answers 422 when
// one fails.
func validBody(w http.ResponseWriter, req commentRequest) bool {
	switch {
	case req.Body == nil:
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"body\" wasn't supplied.")
		return false
	case *req.Body == "":
		writeValidation(w, fieldError{Resource: "IssueComment", Code: "missing_field", Field: "body"})
		return false
	case utf8.RuneCountInString(*req.Body) > MaxCommentChars:
		writeValidation(w, fieldError{
			Resource: "IssueComment", Code: "custom", Field: "body",
			Message: fmt.Sprintf("body is too long (maximum is %d characters)", MaxCommentChars),
		})
		return false
	}
	return true
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	n, ok := pathInt(w, r, "number")
	if !ok {
		return
	}
	id, ok := writable(w, r)
	if !ok {
		return
	}
	var req commentRequest
	if !decodeBody(w, r, &req) || !validBody(w, req) {
		return
	}
	s.mu.Lock()
	c := *s.addComment(baseOf(r), issueKey{repoOf(r), int(n)}, id, *req.Body)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request) {
	cid, ok := pathInt(w, r, "id")
	if !ok {
		return
	}
	if _, ok := writable(w, r); !ok {
		return
	}
	var req commentRequest
	if !decodeBody(w, r, &req) || !validBody(w, req) {
		return
	}
	c, ok := s.updateComment(repoOf(r), cid, *req.Body)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// updateComment sets the body of comment id of repository rk.
func (s *Server) updateComment(rk repoKey, id int64, body string) (Comment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cs := range s.comments {
		if k.repoKey != rk {
			continue
		}
		for _, c := range cs {
			if c.ID == id {
				c.Body = body
				c.UpdatedAt = now()
				return *c, true
			}
		}
	}
	return Comment{}, false
}

// baseOf is the server's URL as the client reached it; handlers use it
// rather than the httptest server field, which they must not read.
func baseOf(r *http.Request) string { return "http://" + r.Host }

// copyAll dereferences stored items so callers never share state with the
// server.
func copyAll[T any](items []*T) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, *it)
	}
	return out
}
