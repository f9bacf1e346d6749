// Package gitbase fetches the git repositories kustomizations name as
// remote bases ("github.com/org/repo//dir?ref=v1") into a cache on disk,
// through the render's network policy, and gives the directory holding
// the tree at the commit the reference resolves to.
package gitbase

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// Spec is a remote base as kustomize parses it (its RepoSpec, in
// sigs.k8s.io/kustomize/api/internal/git, which is not importable; this
// is a port of NewRepoSpecFromURL, tested on kustomize's own cases).
type Spec struct {
	// Host is the scheme, user and host as kustomize keeps them:
	// "https://github.com/", "git@github.com:", "ssh://host/", "file://".
	Host string
	// RepoPath is the repository's path on the host: "org/repo".
	RepoPath string
	// Dir is the kustomization's directory in the repository, "" for
	// the top.
	Dir string
	// Ref is the ref or version query: a branch, a tag or a commit;
	// "" for the remote's HEAD.
	Ref string
}

// CloneURL is the URL kustomize hands to git.
func (s *Spec) CloneURL() string { return s.Host + s.RepoPath }

var userRe = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9-]*)@`)

// Parse parses ref as kustomize's loader does when it takes a resource
// for a git repository; an error means kustomize would not either.
func Parse(ref string) (*Spec, error) {
	if path.IsAbs(ref) {
		return nil, fmt.Errorf("uri looks like abs path: %s", ref)
	}
	n, query, _ := strings.Cut(ref, "?")
	s := &Spec{Ref: parseQuery(query)}
	host, rest, err := extractHost(n)
	if err != nil {
		return nil, err
	}
	s.Host = host
	segments := 2
	if strings.HasPrefix(host, "file://") {
		segments = -1
	}
	s.RepoPath, s.Dir, err = splitPath(rest, segments)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func parseQuery(query string) string {
	v, err := url.ParseQuery(query)
	if err != nil {
		return ""
	}
	if r := v.Get("ref"); r != "" {
		return r
	}
	return v.Get("version")
}

func trimPrefixFold(s, prefix string) (string, bool) {
	if len(prefix) <= len(s) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func extractHost(n string) (string, string, error) {
	n, _ = trimPrefixFold(n, "git::")
	scheme := ""
	for _, p := range []string{"ssh://", "https://", "http://", "file://"} {
		if rest, ok := trimPrefixFold(n, p); ok {
			scheme, n = p, rest
			break
		}
	}
	user := ""
	if m := userRe.FindStringSubmatch(n); m != nil {
		user = m[1] + "@"
		n = n[len(user):]
	}
	l := strings.ToLower(n)
	github := strings.HasPrefix(l, "github.com/") || strings.HasPrefix(l, "github.com:")
	scp := scheme == "" && (user != "" || github)
	if scheme == "" && !scp {
		return "", "", errors.New("failed to parse scheme")
	}
	if scheme == "file://" {
		return scheme, user + n, nil
	}
	host, rest := n, ""
	sep := strings.Index(n, "/")
	if scp {
		if c := strings.Index(n, ":"); sep == -1 || (c > 0 && c < sep) {
			sep = c
		}
	}
	if sep >= 0 {
		host, rest = n[:sep+1], n[sep+1:]
	}
	if github {
		if strings.HasPrefix(scheme, "ssh://") || user != "" {
			scheme, host = "", "github.com:"
		} else {
			scheme, user, host = "https://", "", "github.com/"
		}
	}
	if host == "" {
		return "", "", errors.New("failed to parse host segment")
	}
	return scheme + user + host, rest, nil
}

func splitPath(n string, segments int) (string, string, error) {
	repo, dir, ok := markerSplit(n)
	if !ok {
		if segments < 0 {
			repo, ok = n, true
		} else if parts := strings.Split(n, "/"); len(parts) >= segments {
			repo, dir, ok = strings.Join(parts[:segments], "/"), strings.Join(parts[segments:], "/"), true
		}
	}
	if !ok || repo == "" {
		return "", "", errors.New("failed to parse repo path segment")
	}
	if c := path.Clean(strings.TrimPrefix(dir, "/")); c == ".." || strings.HasPrefix(c, "../") {
		return "", "", fmt.Errorf("url path exits repo: %s", n)
	}
	return repo, strings.TrimPrefix(dir, "/"), nil
}

func markerSplit(n string) (string, string, bool) {
	if i := strings.Index(n, "_git/"); i >= 0 {
		root := n[:i+len("_git/")]
		sub := strings.Split(n[i+len("_git/"):], "/")
		return root + sub[0], strings.Join(sub[1:], "/"), true
	}
	if i := strings.Index(n, "//"); i >= 0 {
		return n[:i], n[i+2:], true
	}
	if i := strings.Index(n, ".git"); i >= 0 {
		return n[:i+len(".git")], n[i+len(".git"):], true
	}
	return "", "", false
}
