package githubapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Review is a pull request review, in GitHub's JSON shape
// (GET /repos/{owner}/{repo}/pulls/{number}/reviews).
type Review struct {
	ID                int64     `json:"id"`
	NodeID            string    `json:"node_id"`
	User              User      `json:"user"`
	Body              string    `json:"body"`
	State             string    `json:"state"` // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	HTMLURL           string    `json:"html_url"`
	PullRequestURL    string    `json:"pull_request_url"`
	AuthorAssociation string    `json:"author_association"`
	SubmittedAt       time.Time `json:"submitted_at"`
	CommitID          string    `json:"commit_id"`
}

// Permission is a collaborator's permission on a repository, in GitHub's
// JSON shape (GET /repos/{owner}/{repo}/collaborators/{username}/permission).
type Permission struct {
	Permission string `json:"permission"` // admin, write, read, none (maintain reads as write, triage as read)
	RoleName   string `json:"role_name"`
	User       User   `json:"user"`
}

// SubmitReview records login's review of pull request number on commit
// (state APPROVED, CHANGES_REQUESTED or COMMENTED), as if submitted now.
func (s *Server) SubmitReview(owner, repo string, number int, login, state, commit string) Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newID()
	k := issueKey{repoKey{owner, repo}, number}
	rv := &Review{ID: id, NodeID: fmt.Sprintf("PRR_%d", id), User: userOf(Identity{Login: login, Type: userType(login)}),
		State: state, CommitID: commit, SubmittedAt: time.Now().UTC().Add(time.Duration(len(s.reviews[k])) * time.Millisecond),
		HTMLURL:           fmt.Sprintf("%s/%s/%s/pull/%d#pullrequestreview-%d", s.srv.URL, owner, repo, number, id),
		PullRequestURL:    fmt.Sprintf("%s/repos/%s/%s/pulls/%d", s.srv.URL, owner, repo, number),
		AuthorAssociation: "COLLABORATOR"}
	s.reviews[k] = append(s.reviews[k], rv)
	s.users[login] = true
	return *rv
}

// DismissReview dismisses review id, as a repository admin or branch
// protection's "dismiss stale approvals" does: its state becomes DISMISSED.
func (s *Server) DismissReview(owner, repo string, number int, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range s.reviews[issueKey{repoKey{owner, repo}, number}] {
		if rv.ID == id {
			rv.State = "DISMISSED"
		}
	}
}

// SetPermission gives login a permission on the repository (admin, write,
// read, none); a user GitHub knows but never given one reads as read, as
// on a public repository. GitHub answers 404 for a login it does not
// know, an app's bot account ("name[bot]") and a deleted user.
func (s *Server) SetPermission(owner, repo, login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms[permKey{repoKey{owner, repo}, login}] = permission
	s.users[login] = true
}

// DeleteUser deletes login's account: their reviews stay, and GitHub
// answers 404 for their permission.
func (s *Server) DeleteUser(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted[login] = true
}

type permKey struct {
	repoKey
	login string
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	all := copyAll(s.reviews[issueKey{repoOf(r), n}])
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page(w, r, all))
}

func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	login := r.PathValue("username")
	s.mu.Lock()
	p, ok := s.perms[permKey{repoOf(r), login}]
	known := s.users[login] && !s.deleted[login] && userType(login) != "Bot"
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if !ok {
		p = "read"
	}
	writeJSON(w, http.StatusOK, Permission{Permission: p, RoleName: p, User: userOf(Identity{Login: login, Type: userType(login)})})
}
