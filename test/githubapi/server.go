// Package githubapi is an in-memory fake of the subset of GitHub's REST API
// that kplan uses. It runs on net/http/httptest so tests can drive the real
// go-github client against it and inspect what was written.
//
// Routes are served both at the root (BaseURL style) and under /api/v3/
// (what go-github's WithEnterpriseURLs appends), so either way of pointing a
// client at the server works.
package githubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"
)

// docsURL is the documentation_url GitHub puts in error bodies.
const docsURL = "https://docs.github.com/rest"

// maxRequestBody bounds what the server reads from a request; it is well
// above the largest valid comment (65536 characters of up to 4 bytes each).
const maxRequestBody = 4 << 20

// Identity is who a token authenticates as.
type Identity struct {
	// Login is the user's login, e.g. "github-actions[bot]".
	Login string
	// Type is GitHub's user type, "User" or "Bot". Empty means "Bot" when
	// Login ends in "[bot]" and "User" otherwise.
	Type string
	// ReadOnly makes write endpoints answer 403 "Resource not accessible by
	// integration", like the GITHUB_TOKEN of a pull request from a fork.
	ReadOnly bool
	// NoDeployments makes the deployments endpoints, reads included,
	// answer 403 "Resource not accessible by integration", like a
	// workflow token whose permissions leave out deployments.
	NoDeployments bool
}

// Request is one entry of the request log.
type Request struct {
	Method string
	// Path is the request path without any /api/v3 prefix.
	Path string
	// Query is the raw query string.
	Query string
	// Status is the HTTP status the server answered with.
	Status int
	// RateLimited is set when SecondaryRateLimitNext refused the request.
	RateLimited bool
}

// Server is the fake GitHub API. Create it with New and stop it with Close.
// All methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	// logMu guards only the request log, so logging a response never
	// waits on (or deadlocks with) a handler holding mu.
	logMu    sync.Mutex
	requests []Request

	mu        sync.Mutex
	tokens    map[string]Identity
	nextID    int64
	failLeft  int
	failCode  int
	limit     rateLimit // see limits.go
	comments  map[issueKey][]*Comment
	statuses  map[shaKey][]*Status
	deploys   map[repoKey][]*Deployment
	depStatus map[int64][]*DeploymentStatus
	prs       map[shaKey][]*PullRequest
	reviews   map[issueKey][]*Review // see reviews.go
	perms     map[permKey]string
	pulls     map[issueKey]*PullRequest
	users     map[string]bool // logins GitHub knows: a token's, a reviewer's, one given a permission
	deleted   map[string]bool
	app       *appState // see app.go
}

type repoKey struct{ owner, repo string }

type issueKey struct {
	repoKey
	number int
}

type shaKey struct {
	repoKey
	sha string
}

type identityKey struct{}

// New starts a fake server with no tokens configured; add some with AddToken.
func New() *Server {
	s := &Server{
		tokens:    map[string]Identity{},
		nextID:    1_000_000_000, // large, so IDs are not confused with issue numbers
		comments:  map[issueKey][]*Comment{},
		statuses:  map[shaKey][]*Status{},
		deploys:   map[repoKey][]*Deployment{},
		depStatus: map[int64][]*DeploymentStatus{},
		prs:       map[shaKey][]*PullRequest{},
		reviews:   map[issueKey][]*Review{},
		perms:     map[permKey]string{},
		pulls:     map[issueKey]*PullRequest{},
		users:     map[string]bool{},
		deleted:   map[string]bool{},
	}
	s.srv = httptest.NewServer(s.handler())
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// URL is the server's base URL, without a trailing slash.
func (s *Server) URL() string { return s.srv.URL }

// Client returns a go-github client that talks to this server and
// authenticates with token.
func (s *Server) Client(token string) *github.Client {
	c := github.NewClient(s.srv.Client())
	// The base URL is fixed and well formed, so parsing cannot fail.
	c.BaseURL, _ = url.Parse(s.srv.URL + "/")
	c.UploadURL, _ = url.Parse(s.srv.URL + "/")
	if token != "" {
		c = c.WithAuthToken(token)
	}
	return c
}

// AddToken makes token valid for the given identity.
func (s *Server) AddToken(token string, id Identity) {
	if id.Type == "" {
		id.Type = userType(id.Login)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = id
	s.users[id.Login] = true
}

// FailNext makes the next n requests answer with status (a 5xx; 0 means
// 502) before authentication or routing, like an overloaded front end.
func (s *Server) FailNext(n, status int) {
	if status == 0 {
		status = http.StatusBadGateway
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failCode = n, status
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.requests = nil
}

func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

// handler wires logging, fault injection and authentication around the
// routes, in the order a real front end would apply them.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /user", s.getUser)
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/comments", s.listComments)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.createComment)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.editComment)
	mux.HandleFunc("POST /repos/{owner}/{repo}/statuses/{sha}", s.createStatus)
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/statuses", s.listStatuses)
	mux.HandleFunc("POST /repos/{owner}/{repo}/deployments", s.createDeployment)
	mux.HandleFunc("GET /repos/{owner}/{repo}/deployments", s.listDeployments)
	mux.HandleFunc("POST /repos/{owner}/{repo}/deployments/{id}/statuses", s.createDeploymentStatus)
	mux.HandleFunc("GET /repos/{owner}/{repo}/deployments/{id}/statuses", s.listDeploymentStatuses)
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/pulls", s.listPullsForCommit)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", s.getPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/reviews", s.listReviews)
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{username}/permission", s.getPermission)
	// A catch-all keeps ServeMux from answering 405 for known paths with
	// another method; GitHub answers 404 there.
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found")
	})

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/api/v3"); ok && (p == "" || p[0] == '/') {
			r = r.Clone(r.Context())
			r.URL.Path, r.URL.RawPath = p, ""
		}
		// The entry is logged when the status is written, before the client
		// can see the response, so a test reading the log after a call
		// always finds that call in it.
		var rec *statusRecorder
		rec = &statusRecorder{ResponseWriter: w, log: func(status int) {
			s.logMu.Lock()
			defer s.logMu.Unlock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status, RateLimited: rec.rateLimited})
		}}
		defer rec.WriteHeader(http.StatusOK) // no-op unless the handler wrote nothing

		s.mu.Lock()
		fail := 0
		if s.failLeft > 0 {
			s.failLeft--
			fail = s.failCode
		}
		s.mu.Unlock()
		if fail != 0 {
			writeError(rec, fail, "Server Error")
			return
		}
		if s.limited(rec) { // a secondary rate limit (limits.go)
			return
		}

		if s.serveApp(rec, r) { // a GitHub App's JWT endpoints (app.go)
			return
		}
		id, ok := s.authenticate(r)
		if !ok {
			writeError(rec, http.StatusUnauthorized, "Bad credentials")
			return
		}
		r.Body = http.MaxBytesReader(rec, r.Body, maxRequestBody)
		mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

func (s *Server) authenticate(r *http.Request) (Identity, bool) {
	h := r.Header.Get("Authorization")
	var token string
	for _, scheme := range []string{"Bearer ", "bearer ", "token ", "Token "} {
		if t, ok := strings.CutPrefix(h, scheme); ok {
			token = strings.TrimSpace(t)
			break
		}
	}
	if token == "" {
		return Identity{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.tokens[token]
	return id, ok
}

// writable answers 403 and returns false when the caller's token is
// read-only.
func writable(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	id, _ := r.Context().Value(identityKey{}).(Identity)
	if id.ReadOnly {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return id, false
	}
	return id, true
}

// deploymentsAllowed answers 403 and returns false when the caller's
// token has no deployments permission.
func deploymentsAllowed(w http.ResponseWriter, r *http.Request) bool {
	id, _ := r.Context().Value(identityKey{}).(Identity)
	if id.NoDeployments {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return false
	}
	return true
}

// statusRecorder logs a response's status once, when it is written.
type statusRecorder struct {
	http.ResponseWriter
	log         func(status int)
	wrote       bool
	rateLimited bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.wrote {
		return
	}
	r.wrote = true
	r.log(code)
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.ResponseWriter.Write(b)
}

// apiError is GitHub's error body.
type apiError struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
	Status           string       `json:"status"`
}

type fieldError struct {
	Resource string `json:"resource"`
	Code     string `json:"code"`
	Field    string `json:"field"`
	Message  string `json:"message,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Message: msg, DocumentationURL: docsURL, Status: strconv.Itoa(status)})
}

// writeValidation answers 422 "Validation Failed" with one field error.
func writeValidation(w http.ResponseWriter, fe fieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, apiError{
		Message:          "Validation Failed",
		Errors:           []fieldError{fe},
		DocumentationURL: docsURL,
		Status:           strconv.Itoa(http.StatusUnprocessableEntity),
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	// The client may have gone away; there is nobody left to tell.
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a JSON request body into v, answering 400 the way GitHub
// does when it is not valid JSON.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "Request body too large")
			return false
		}
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// pathInt parses a numeric path segment, answering 404 when it is not one.
func pathInt(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || n <= 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return n, true
}

func repoOf(r *http.Request) repoKey {
	return repoKey{owner: r.PathValue("owner"), repo: r.PathValue("repo")}
}

// page slices items the way GitHub's list endpoints do (per_page default 30,
// max 100; page from 1) and sets a Link header with first/prev/next/last.
func page[T any](w http.ResponseWriter, r *http.Request, items []T) []T {
	q := r.URL.Query()
	perPage := atoiDefault(q.Get("per_page"), 30)
	if perPage > 100 {
		perPage = 100
	}
	p := atoiDefault(q.Get("page"), 1)

	last := (len(items) + perPage - 1) / perPage
	var links []string
	link := func(n int, rel string) {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		lq := url.Values{}
		for k, v := range q {
			lq[k] = v
		}
		lq.Set("per_page", strconv.Itoa(perPage))
		lq.Set("page", strconv.Itoa(n))
		u.RawQuery = lq.Encode()
		links = append(links, fmt.Sprintf("<%s>; rel=%q", u.String(), rel))
	}
	if p > 1 && last > 0 {
		link(min(p-1, last), "prev")
	}
	if p < last {
		link(p+1, "next")
		link(last, "last")
	}
	if p > 1 && last > 0 {
		link(1, "first")
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}

	start := (p - 1) * perPage
	if start >= len(items) {
		return []T{}
	}
	return items[start:min(start+perPage, len(items))]
}

// atoiDefault parses a positive integer query value; GitHub ignores
// malformed ones, so this falls back to def.
func atoiDefault(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return def
	}
	return n
}

// now is GitHub's timestamp resolution: whole seconds, UTC.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// userOf builds the user object for an identity; the numeric ID is derived
// from the login so the same login always has the same ID.
func userOf(id Identity) User {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id.Login))
	return User{Login: id.Login, ID: int64(h.Sum32()), Type: id.Type}
}

// userType guesses GitHub's user type from a login: apps act as "name[bot]".
func userType(login string) string {
	if strings.HasSuffix(login, "[bot]") {
		return "Bot"
	}
	return "User"
}
