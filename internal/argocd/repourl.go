package argocd

import (
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Repos says which repoURLs are this repository: the plan's git remotes
// and the URLs .kplan.yaml lists (argocdRepoURLs), "*" matching any.
type Repos struct {
	urls []string
	any  bool
	// known are Has's answers by repoURL: a repository of thousands of
	// Applications names a few repoURLs thousands of times.
	known *sync.Map
}

// NewRepos matches the given URLs ("*": any URL).
func NewRepos(urls ...string) Repos {
	r := Repos{known: &sync.Map{}}
	for _, u := range urls {
		if u == "*" {
			r.any = true
			continue
		}
		if n := normalizeURL(u); n != "" {
			r.urls = append(r.urls, n)
		}
	}
	return r
}

// Has reports whether repoURL is this repository.
func (r Repos) Has(repoURL string) bool {
	if r.any {
		return repoURL != ""
	}
	if r.known != nil {
		if has, ok := r.known.Load(repoURL); ok {
			return has.(bool)
		}
	}
	n := normalizeURL(repoURL)
	has := slices.Contains(r.urls, n)
	if r.known != nil {
		r.known.Store(repoURL, has)
	}
	return has
}

// normalizeURL is a git URL as host/path, lower case: https, ssh and
// scp-like (git@host:owner/repo) forms of one repository compare equal,
// with or without .git and a trailing slash, as Argo CD's own
// normalization makes them.
func normalizeURL(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		return ""
	}
	if !strings.Contains(u, "://") {
		// scp-like: [user@]host:path
		if at := strings.Index(u, "@"); at >= 0 {
			u = u[at+1:]
		}
		u = "ssh://" + strings.Replace(u, ":", "/", 1)
	}
	p, err := url.Parse(u)
	if err != nil {
		return strings.ToLower(u)
	}
	host := p.Hostname()
	s := strings.Trim(p.Path, "/")
	s = strings.TrimSuffix(s, ".git")
	return strings.ToLower(host + "/" + s)
}
