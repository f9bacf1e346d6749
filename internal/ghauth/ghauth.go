// Package ghauth gives the webhook the GitHub token to use for a
// repository, whichever way it is configured: a static token, a token file
// re-read when it changes (a mounted Kubernetes Secret being rotated), or a
// GitHub App whose installation tokens, which expire after an hour, are
// minted and refreshed before they expire (ghinstallation).
//
// One interface, Source, serves both consumers: the go-github client,
// through Transport, and the git mirror, which asks for a token before
// every fetch.
package ghauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Source gives the token to authenticate with for repo ("owner/name"; ""
// for a request about no repository). An empty token means anonymous.
// Implementations are safe for concurrent use.
type Source interface {
	Token(ctx context.Context, repo string) (string, error)
}

// Refreshable is a Source whose tokens GitHub may refuse before their
// time (a GitHub App's installation token revoked, or minted with a key
// since rotated): Refused drops token, so that the next Token call gives a
// fresh one.
type Refreshable interface {
	Source
	Refused(ctx context.Context, repo, token string)
}

// None is anonymous access (public repositories only).
type None struct{}

func (None) Token(context.Context, string) (string, error) { return "", nil }

// Static is a token that never changes (KPLAN_GITHUB_TOKEN).
type Static string

func (s Static) Token(context.Context, string) (string, error) { return string(s), nil }

// File is a token read from a file, read again whenever the file changes
// (another inode, modification time or size: a Kubernetes Secret update
// swaps a symlink, an editor rewrites the file).
type File struct {
	path string
	what string // what errors call the file: "GitHub token file"

	mu    sync.Mutex
	info  os.FileInfo
	token string
}

// NewFile reads the token file once, so that a missing or empty file fails
// at start.
func NewFile(path string) (*File, error) { return NewFileOf("GitHub token file", path) }

// NewFileOf is NewFile for another token (what: "GitLab token file").
func NewFileOf(what, path string) (*File, error) {
	f := &File{path: path, what: what}
	if _, err := f.Token(context.Background(), ""); err != nil {
		return nil, err
	}
	return f, nil
}

// Token returns the file's token, re-reading the file if it changed.
func (f *File) Token(context.Context, string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.what, err) // names the file, never the content
	}
	if f.info != nil && os.SameFile(f.info, info) && f.info.ModTime().Equal(info.ModTime()) && f.info.Size() == info.Size() {
		return f.token, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.what, err)
	}
	token := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if token == "" {
		return "", fmt.Errorf("%s %s is empty", f.what, f.path)
	}
	f.info, f.token = info, token
	return token, nil
}

// Transport authenticates every request of a go-github client with the
// token src gives for the repository the request is about
// (/repos/{owner}/{repo}/..., under any base path such as GitHub
// Enterprise's /api/v3). A request that already carries an Authorization
// header is left alone. A 401 answered to a token of a Refreshable
// source drops that token: the caller's retry (the GitHub forge's re-sends of reports) goes
// with a fresh one.
func Transport(src Source, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{src: src, base: base}
}

type transport struct {
	src  Source
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return t.base.RoundTrip(req)
	}
	token, err := t.src.Token(req.Context(), RepoOfPath(req.URL.Path))
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	if token == "" {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := t.base.RoundTrip(r)
	if rs, ok := t.src.(Refreshable); ok && err == nil && resp.StatusCode == http.StatusUnauthorized {
		rs.Refused(req.Context(), RepoOfPath(req.URL.Path), token)
	}
	return resp, err
}

// RepoOfPath returns "owner/name" of an API path holding
// /repos/{owner}/{name}, "" otherwise.
func RepoOfPath(p string) string {
	parts := strings.Split(p, "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "repos" && parts[i+1] != "" && parts[i+2] != "" {
			return parts[i+1] + "/" + parts[i+2]
		}
	}
	return ""
}

// RepoOfCloneURL returns "owner/name" of a clone URL ending in
// /{owner}/{name}[.git], "" when it has fewer path segments.
func RepoOfCloneURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		} else {
			return ""
		}
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	parts := strings.Split(strings.Trim(u, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	name := strings.TrimSuffix(parts[len(parts)-1], ".git")
	owner := parts[len(parts)-2]
	if owner == "" || name == "" {
		return ""
	}
	return owner + "/" + name
}

// errNoRepo is an App token asked for no repository without a fixed
// installation.
var errNoRepo = errors.New("GitHub App: a request about no repository needs KPLAN_GITHUB_APP_INSTALLATION_ID")

func trimNewline(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
