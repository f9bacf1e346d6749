// Package gitlabapi is an in-memory fake of the subset of GitLab's REST
// API (v4) that kplan uses: the token's user, merge request notes,
// commit statuses, deployments and environments (protected ones
// included), merge requests, their approvals, and project members. It
// runs on net/http/httptest so that tests drive the real client
// (gitlab.com/gitlab-org/api/client-go) against it and inspect what was
// written. Its answers follow the shapes of GitLab's REST API
// documentation (see testdata/LICENSE.md).
package gitlabapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxRequestBody bounds what the server reads from a request.
const maxRequestBody = 4 << 20

// GitLab's access levels (project members).
const (
	Reporter   = 20
	Developer  = 30
	Maintainer = 40
)

// User is whom a token authenticates as.
type User struct {
	ID       int64
	Username string
	// ReadOnly makes writes answer 403, as a token of a reporter, or a
	// job token, is answered.
	ReadOnly bool
	// Guest makes listing deployments answer 403 too, as GitLab answers
	// a Guest (reading them takes Reporter).
	Guest bool
}

// Request is one entry of the request log.
type Request struct {
	Method, Path, Query string
	Status              int
}

// Note is a merge request note.
type Note struct {
	ID     int64
	Body   string
	Author string
	System bool
}

// Status is a commit status.
type Status struct {
	Name, State, Description, Ref string
}

// Deployment is a deployment of an environment.
type Deployment struct {
	ID          int64
	Environment string
	SHA, Ref    string
	Status      string // created, running, success, failed, canceled
	History     []string
	User        string
}

// MergeRequest is what the server knows of a merge request.
type MergeRequest struct {
	IID                           int64
	SHA, MergeCommitSHA           string
	SourceBranch, TargetBranch    string
	State                         string // opened, merged, closed
	SourceProjectID, TargetProjID int64
	ApprovalsRequired             int64
	// BaseSHA is diff_refs.base_sha, the merge base the merge request's
	// diff is shown against; SquashCommitSHA the squash a squash merge
	// made.
	BaseSHA, SquashCommitSHA string
	// Author and MergedBy are usernames (MergedBy is merge_user).
	Author, MergedBy string
	MergedAt         time.Time
	// Committers are the author names of the merge request's commits
	// (GET …/merge_requests/:iid/commits), one commit each.
	Committers []string
	approvedBy []string
}

// ApprovalSettings are a project's merge request approval settings
// (GET /projects/:id/approvals) that kplan reads.
type ApprovalSettings struct {
	KeepOnPush, AuthorApproval, NoCommitterApproval bool
}

// Server is the fake GitLab API. All methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	logMu    sync.Mutex
	requests []Request

	mu             sync.Mutex
	nextID         int64
	failLeft       int
	failCode       int
	tokens         map[string]User
	users          map[string]User // by username
	notes          map[string][]*Note
	statuses       map[string][]*Status
	deployments    map[string][]*Deployment
	mrs            map[string]*MergeRequest
	members        map[string]int64 // project\x00user ID -> access level
	protected      map[string][]string
	keepsApprovals map[string]bool // projects that keep approvals across pushes
	approvalSet    map[string]ApprovalSettings
}

// New starts a fake server; add tokens with AddToken.
func New() *Server {
	s := &Server{nextID: 1000, tokens: map[string]User{}, users: map[string]User{}, notes: map[string][]*Note{},
		statuses: map[string][]*Status{}, deployments: map[string][]*Deployment{}, mrs: map[string]*MergeRequest{},
		members: map[string]int64{}, protected: map[string][]string{}, keepsApprovals: map[string]bool{},
		approvalSet: map[string]ApprovalSettings{}}
	s.srv = httptest.NewServer(s.handler())
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// URL is the instance's address (CI_SERVER_URL); the API is at
// URL()+"/api/v4" (CI_API_V4_URL).
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the REST API's address.
func (s *Server) APIURL() string { return s.srv.URL + "/api/v4" }

// AddToken makes token authenticate as u; u's ID is given if 0.
func (s *Server) AddToken(token string, u User) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.ID == 0 {
		u.ID = s.id()
	}
	s.tokens[token] = u
	s.users[strings.ToLower(u.Username)] = u
	return u
}

// AddUser makes a user known (for approvals and membership) without a
// token.
func (s *Server) AddUser(username string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.users[strings.ToLower(username)]; ok {
		return u
	}
	u := User{ID: s.id(), Username: username}
	s.users[strings.ToLower(username)] = u
	return u
}

// SetMember gives user the access level on project.
func (s *Server) SetMember(project, username string, level int64) {
	u := s.AddUser(username)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[project+"\x00"+strconv.FormatInt(u.ID, 10)] = level
}

// Protect makes environment of project protected: only the users
// named may deploy to it (create its deployments).
func (s *Server) Protect(project, environment string, deployers ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protected[project+"\x00"+environment] = deployers
}

// KeepApprovalsOnPush turns off the project's "Remove all approvals
// when commits are added to the source branch" (on by default here).
func (s *Server) KeepApprovalsOnPush(project string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepsApprovals[project] = true
}

// SetApprovalSettings sets project's approval settings.
func (s *Server) SetApprovalSettings(project string, a ApprovalSettings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvalSet[project] = a
	s.keepsApprovals[project] = a.KeepOnPush
}

// SetMergeRequest records a merge request of project.
func (s *Server) SetMergeRequest(project string, mr MergeRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.mrs[project+"\x00"+strconv.FormatInt(mr.IID, 10)]; old != nil {
		mr.approvedBy = old.approvedBy
	}
	s.mrs[project+"\x00"+strconv.FormatInt(mr.IID, 10)] = &mr
}

// Approve records username's approval of merge request iid.
func (s *Server) Approve(project string, iid int64, username string) {
	s.AddUser(username)
	s.mu.Lock()
	defer s.mu.Unlock()
	if mr := s.mrs[project+"\x00"+strconv.FormatInt(iid, 10)]; mr != nil {
		mr.approvedBy = append(mr.approvedBy, username)
	}
}

// SeedNote adds a note by author to merge request iid of project.
func (s *Server) SeedNote(project string, iid int64, author, body string) Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := &Note{ID: s.id(), Body: body, Author: author}
	k := project + "\x00" + strconv.FormatInt(iid, 10)
	s.notes[k] = append(s.notes[k], n)
	return *n
}

// Notes are the notes of merge request iid, oldest first.
func (s *Server) Notes(project string, iid int64) []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Note
	for _, n := range s.notes[project+"\x00"+strconv.FormatInt(iid, 10)] {
		out = append(out, *n)
	}
	return out
}

// Statuses are the commit statuses of sha, oldest first.
func (s *Server) Statuses(project, sha string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, st := range s.statuses[project+"\x00"+sha] {
		out = append(out, *st)
	}
	return out
}

// Deployments are project's deployments, oldest first.
func (s *Server) Deployments(project string) []Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Deployment
	for _, d := range s.deployments[project] {
		c := *d
		c.History = slices.Clone(d.History)
		out = append(out, c)
	}
	return out
}

// FailNext makes the next n requests answer status (0: 502).
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failCode = n, max(status, 0)
	if s.failCode == 0 {
		s.failCode = http.StatusBadGateway
	}
}

// Requests is the request log, oldest first.
func (s *Server) Requests() []Request {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return slices.Clone(s.requests)
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.requests = nil
}

func (s *Server) id() int64 { s.nextID++; return s.nextID }

type ctxKey struct{}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	const p = "/api/v4/projects/{project}"
	mux.HandleFunc("GET /api/v4/user", s.getUser)
	mux.HandleFunc("GET /api/v4/users", s.listUsers)
	mux.HandleFunc("GET "+p+"/merge_requests/{iid}/notes", s.listNotes)
	mux.HandleFunc("POST "+p+"/merge_requests/{iid}/notes", s.createNote)
	mux.HandleFunc("PUT "+p+"/merge_requests/{iid}/notes/{id}", s.updateNote)
	mux.HandleFunc("POST "+p+"/statuses/{sha}", s.setStatus)
	mux.HandleFunc("GET "+p+"/repository/commits/{sha}/statuses", s.listStatuses)
	mux.HandleFunc("GET "+p+"/repository/commits/{sha}/merge_requests", s.mergeRequestsOfCommit)
	mux.HandleFunc("POST "+p+"/deployments", s.createDeployment)
	mux.HandleFunc("PUT "+p+"/deployments/{id}", s.updateDeployment)
	mux.HandleFunc("GET "+p+"/deployments", s.listDeployments)
	mux.HandleFunc("GET "+p+"/merge_requests/{iid}", s.getMergeRequest)
	mux.HandleFunc("GET "+p+"/merge_requests/{iid}/approvals", s.getApprovals)
	mux.HandleFunc("GET "+p+"/merge_requests/{iid}/commits", s.getMergeRequestCommits)
	mux.HandleFunc("GET "+p+"/members/all/{user}", s.getMember)
	mux.HandleFunc("GET "+p+"/approvals", s.getProjectApprovals)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, "404 Not Found") })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			s.logMu.Lock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: rec.status})
			s.logMu.Unlock()
		}()
		s.mu.Lock()
		if s.failLeft > 0 {
			s.failLeft--
			code := s.failCode
			s.mu.Unlock()
			writeError(rec, code, "fault injected")
			return
		}
		u, ok := s.tokens[r.Header.Get("Private-Token")]
		s.mu.Unlock()
		if !ok {
			writeError(rec, http.StatusUnauthorized, "401 Unauthorized")
			return
		}
		if u.ReadOnly && r.Method != http.MethodGet {
			writeError(rec, http.StatusForbidden, "403 Forbidden")
			return
		}
		r.Body = http.MaxBytesReader(rec, r.Body, maxRequestBody)
		mux.ServeHTTP(rec, r.WithContext(contextWith(r, u)))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers as GitLab does: {"message": "..."}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

// decode reads a JSON request body (client-go sends JSON).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request - "+err.Error())
		return false
	}
	return true
}

func timestamp() string { return time.Now().UTC().Format(time.RFC3339) }

func fmtID(id int64) string { return fmt.Sprint(id) }
