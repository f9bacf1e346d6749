package forge

import (
	"fmt"
	"net/url"
	"strings"
)

// Links are the web pages a person opens on a repository's forge for one
// of its commits or changes: the status page's links
// (internal/status). The zero Links link nowhere.
type Links struct {
	// Repo is the repository's page (https://github.com/owner/name), no
	// trailing slash; "" links nowhere.
	Repo string
	// CommitPath and ChangePath follow Repo: fmt patterns of a commit's
	// page (with its SHA, %s) and a change's (with its number, %d).
	CommitPath, ChangePath string
}

// RepoLinks are the links of repo (owner/name; GitLab: the project's
// path) on the forge whose web pages are at base, with its patterns:
// GitHub's "/commit/%s" and "/pull/%d", GitLab's "/-/commit/%s" and
// "/-/merge_requests/%d". A base that is no http(s) URL links nowhere.
func RepoLinks(base, repo, commitPath, changePath string) Links {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || repo == "" {
		return Links{}
	}
	var parts []string
	for p := range strings.SplitSeq(repo, "/") {
		parts = append(parts, url.PathEscape(p))
	}
	return Links{Repo: strings.TrimSuffix(base, "/") + "/" + strings.Join(parts, "/"), CommitPath: commitPath, ChangePath: changePath}
}

// Commit is commit sha's page; "" when l links nowhere or sha is empty.
func (l Links) Commit(sha string) string {
	if l.Repo == "" || l.CommitPath == "" || sha == "" {
		return ""
	}
	return l.Repo + fmt.Sprintf(l.CommitPath, url.PathEscape(sha))
}

// Change is change n's page; "" when l links nowhere or n is 0 (a push).
func (l Links) Change(n int) string {
	if l.Repo == "" || l.ChangePath == "" || n <= 0 {
		return ""
	}
	return l.Repo + fmt.Sprintf(l.ChangePath, n)
}
