// Package githttp serves git repositories over smart HTTP on loopback,
// with the real `git http-backend` behind net/http/cgi, for tests of code
// that clones and fetches as it would from GitHub.
package githttp

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// Server serves every repository under Root at /<path>.
type Server struct {
	URL  string
	Root string
	// Fetches counts upload-pack requests (clones and fetches).
	Fetches atomic.Int64
	srv     *httptest.Server
}

// Serve starts a server for the test and stops it when the test ends.
func Serve(t testing.TB, root, token string) *Server {
	t.Helper()
	s, err := New(root, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// New starts a server for the repositories under root; when token is not
// empty, requests must authenticate as GitHub's do (Basic, any user, the
// token as password).
func New(root, token string) (*Server, error) {
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w", err)
	}
	s := &Server{Root: root}
	h := &cgi.Handler{
		Path: strings.TrimSpace(string(backend)) + "/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !authorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Authentication failed", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			s.Fetches.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	s.srv, s.URL = srv, srv.URL
	return s, nil
}

func authorized(r *http.Request, token string) bool {
	auth := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(auth, "Basic ")
	if !ok {
		return false
	}
	dec, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return false
	}
	_, pass, _ := strings.Cut(string(dec), ":")
	return pass == token
}
