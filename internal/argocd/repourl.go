package argocd

import (
	"net/url"
	"strings"
)

// Repos says which repoURLs are this repository: the plan's git remotes
// and the URLs .kplan.yaml lists (argocdRepoURLs), "*" matching any.
type Repos struct {
	urls []string
	any  bool
}

// NewRepos matches the given URLs ("*": any URL).
func NewRepos(urls ...string) Repos {
	var r Repos
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
	n := normalizeURL(repoURL)
	for _, u := range r.urls {
		if u == n {
			return true
		}
	}
	return false
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
