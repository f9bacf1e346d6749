// Package gitmirror keeps one bare mirror per repository on disk and
// fetches into it only what is new, over HTTPS with a token. The webhook
// renders commits straight from these mirrors (git archive), so nothing is
// ever checked out.
package gitmirror

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kplan-dev/kplan/internal/keylock"
)

// TokenSource gives the token to fetch repo ("owner/name") with; "" is
// anonymous. It is asked before every fetch, so a GitHub App's
// installation token (which expires after an hour) is always fresh.
type TokenSource interface {
	Token(ctx context.Context, repo string) (string, error)
}

// Mirrors is a directory of bare mirrors.
type Mirrors struct {
	Dir   string
	Token []byte // GitHub token for HTTPS; may be empty for public repos
	// Tokens, if set, replaces Token: it is asked for a token per fetch.
	Tokens TokenSource
	// Repos maps clone URLs to the repositories ("owner/name") Tokens is
	// asked about; a URL not in it is named by its last two path segments.
	Repos map[string]string
	// ChangeRefs says where the forge of a clone URL keeps a change's head
	// and its merge (fmt patterns of the change's number, such as GitLab's
	// refs/merge-requests/%d/head); nil, or an empty pattern, is GitHub's
	// refs/pull/%d/head and refs/pull/%d/merge.
	ChangeRefs func(cloneURL string) (head, merge string)
	Logger     *slog.Logger

	locks keylock.Map // one fetch at a time per mirror
}

// dirFor names a mirror by a hash of its URL: URLs are not file names.
func (m *Mirrors) dirFor(cloneURL string) string {
	sum := sha256.Sum256([]byte(cloneURL))
	return filepath.Join(m.Dir, hex.EncodeToString(sum[:8])+".git")
}

// git runs a local git command.
func (m *Mirrors) git(ctx context.Context, dir string, args ...string) (string, error) {
	return m.gitWith(ctx, dir, "", args...)
}

// gitWith runs git with token passed through the environment (never on a
// command line, where other users' ps could read it).
func (m *Mirrors) gitWith(ctx context.Context, dir, token string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	if token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+auth)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if token != "" {
			msg = strings.ReplaceAll(msg, token, "***")
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(string(out)), nil
}

// token returns the token to fetch cloneURL with, fresh for this fetch.
func (m *Mirrors) token(ctx context.Context, cloneURL string) (string, error) {
	if m.Tokens == nil {
		return string(m.Token), nil
	}
	repo, ok := m.Repos[cloneURL]
	if !ok {
		repo = repoOf(cloneURL)
	}
	t, err := m.Tokens.Token(ctx, repo)
	if err != nil {
		return "", fmt.Errorf("a token to fetch %s: %w", repo, err)
	}
	return t, nil
}

// repoOf names a clone URL's repository by its last two path segments,
// without .git.
func repoOf(cloneURL string) string {
	p := cloneURL
	if u, err := url.Parse(cloneURL); err == nil {
		p = u.Path
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2] + "/" + strings.TrimSuffix(parts[len(parts)-1], ".git")
}

// Fetch updates the mirror of cloneURL with branch and returns the
// mirror's directory and the branch's tip as the server has it now. It
// always asks the server, even when the commit a delivery names is in the
// mirror already: the branch may have been force-pushed since, and only
// what the tip reaches may be deployed (IsAncestor). A fetch with nothing
// new costs one round trip.
func (m *Mirrors) Fetch(ctx context.Context, cloneURL, branch string) (dir, tip string, err error) {
	return m.fetchRef(ctx, cloneURL, "refs/heads/"+branch, branch, "branch "+branch)
}

// changeRefs are the head and merge ref patterns of cloneURL's forge.
func (m *Mirrors) changeRefs(cloneURL string) (head, merge string) {
	head, merge = "refs/pull/%d/head", "refs/pull/%d/merge"
	if m.ChangeRefs != nil {
		h, mg := m.ChangeRefs(cloneURL)
		head, merge = cmp.Or(h, head), cmp.Or(mg, merge)
	}
	return head, merge
}

// FetchPull fetches pull request number's head (refs/pull/N/head, which
// GitHub keeps in the base repository even for a fork's PR; GitLab's
// refs/merge-requests/N/head, see ChangeRefs) into the
// mirror, under the same name, and returns the mirror's directory and the
// head's commit. The head is untrusted content: callers render it without
// network access.
func (m *Mirrors) FetchPull(ctx context.Context, cloneURL string, number int) (dir, head string, err error) {
	if number <= 0 {
		return "", "", fmt.Errorf("pull request number %d", number)
	}
	pattern, _ := m.changeRefs(cloneURL)
	ref := fmt.Sprintf(pattern, number)
	return m.fetchRef(ctx, cloneURL, ref, ref, fmt.Sprintf("pull request #%d", number))
}

// fetchRef fetches ref from cloneURL into the mirror under the same name;
// errors name it as short (fetching) and what (resolving).
func (m *Mirrors) fetchRef(ctx context.Context, cloneURL, ref, short, what string) (dir, sha string, err error) {
	dir = m.dirFor(cloneURL)
	defer m.locks.Lock(dir)()
	if err := m.create(ctx, dir, cloneURL); err != nil {
		return "", "", err
	}
	token, err := m.token(ctx, cloneURL)
	if err != nil {
		return "", "", err
	}
	if _, err := m.gitWith(ctx, dir, token, "fetch", "-q", "--no-tags", "--prune", cloneURL, "+"+ref+":"+ref); err != nil {
		return "", "", fmt.Errorf("fetch %s from %s: %w", short, cloneURL, err)
	}
	sha, err = m.git(ctx, dir, "rev-parse", "--verify", ref)
	if err != nil {
		return "", "", fmt.Errorf("%s of %s: %w", what, cloneURL, err)
	}
	return dir, sha, nil
}

// create makes the empty bare mirror of cloneURL at dir unless it
// exists; dir is locked.
func (m *Mirrors) create(ctx context.Context, dir, cloneURL string) error {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mirror of %s: %w", cloneURL, err)
	}
	if _, err := m.git(ctx, dir, "init", "-q", "--bare"); err != nil {
		return fmt.Errorf("mirror of %s: %w", cloneURL, err)
	}
	return nil
}

// objectName is a full commit SHA (SHA-1 or SHA-256): nothing else may
// reach git's command line as a commit to fetch.
var objectName = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// FetchCommit makes sure commit sha is in the mirror of cloneURL and
// returns the mirror's directory: it is there already, or fetched by its
// SHA (GitHub serves any commit of the repository, even one no branch
// reaches, such as an old test merge of a pull request), or else from
// pull request pr's refs (refs/pull/N/merge, then refs/pull/N/head) for a
// server that refuses SHAs. The commit is not kept under a ref: it is
// read right away.
func (m *Mirrors) FetchCommit(ctx context.Context, cloneURL, sha string, pr int) (string, error) {
	if !objectName.MatchString(sha) {
		return "", fmt.Errorf("fetch commit %q from %s: not a full commit SHA", sha, cloneURL)
	}
	dir := m.dirFor(cloneURL)
	defer m.locks.Lock(dir)()
	if err := m.create(ctx, dir, cloneURL); err != nil {
		return "", err
	}
	has := func() bool {
		_, err := m.git(ctx, dir, "cat-file", "-e", sha+"^{commit}")
		return err == nil
	}
	if has() {
		return dir, nil
	}
	token, err := m.token(ctx, cloneURL)
	if err != nil {
		return "", err
	}
	_, bySHA := m.gitWith(ctx, dir, token, "fetch", "-q", "--no-tags", "--no-write-fetch-head", cloneURL, sha)
	if bySHA == nil && has() {
		return dir, nil
	}
	errs := []string{fmt.Sprintf("by SHA: %v", bySHA)}
	if pr > 0 {
		head, merge := m.changeRefs(cloneURL)
		for _, ref := range []string{fmt.Sprintf(merge, pr), fmt.Sprintf(head, pr)} {
			if _, err := m.gitWith(ctx, dir, token, "fetch", "-q", "--no-tags", "--no-write-fetch-head", cloneURL, ref); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", ref, err))
				continue
			}
			if has() {
				return dir, nil
			}
			errs = append(errs, ref+" does not reach it")
		}
	}
	return "", fmt.Errorf("fetch commit %s from %s: %s", sha, cloneURL, strings.Join(errs, "; "))
}

// IsAncestor reports whether commit a is an ancestor of commit b, or b
// itself, in the mirror at dir (false when either is unknown: after Fetch
// the mirror holds everything the tip reaches, so a commit it lacks is not
// on the branch).
func (m *Mirrors) IsAncestor(ctx context.Context, dir, a, b string) bool {
	_, err := m.git(ctx, dir, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// FirstParent is the first parent of commit sha in the mirror at dir: for
// a merge of a pull request, the branch as the merge found it; for a
// squash or rebase merge, the commit before it on the branch. An error
// for a root commit.
func (m *Mirrors) FirstParent(ctx context.Context, dir, sha string) (string, error) {
	if !objectName.MatchString(sha) {
		return "", fmt.Errorf("the parent of %q: not a full commit SHA", sha)
	}
	p, err := m.git(ctx, dir, "rev-parse", "--verify", "--quiet", sha+"^1^{commit}")
	if err != nil {
		return "", fmt.Errorf("commit %s has no parent: %w", sha, err)
	}
	return p, nil
}

// Merge makes, in the mirror at dir, the commit merging head into base as
// git's merge would (git merge-tree --write-tree: no work tree, no ref),
// and returns it with its tree. It fails when the merge has conflicts:
// no one reviewed a resolution.
func (m *Mirrors) Merge(ctx context.Context, dir, base, head string) (commit, tree string, err error) {
	for _, c := range []string{base, head} {
		if !objectName.MatchString(c) {
			return "", "", fmt.Errorf("merge %q: not a full commit SHA", c)
		}
	}
	out, err := m.git(ctx, dir, "merge-tree", "--write-tree", "--no-messages", base, head)
	if err != nil {
		return "", "", fmt.Errorf("merging %s into %s: conflicts or an error (%w)", head, base, err)
	}
	tree, _, _ = strings.Cut(out, "\n")
	commit, err = m.git(ctx, dir, "-c", "user.name=kplan", "-c", "user.email=kplan@localhost",
		"commit-tree", tree, "-p", base, "-p", head, "-m", "kplan: "+head+" merged into "+base)
	if err != nil {
		return "", "", fmt.Errorf("merging %s into %s: %w", head, base, err)
	}
	return commit, tree, nil
}

// Tree is the tree of commit sha in the mirror at dir.
func (m *Mirrors) Tree(ctx context.Context, dir, sha string) (string, error) {
	if !objectName.MatchString(sha) {
		return "", fmt.Errorf("the tree of %q: not a full commit SHA", sha)
	}
	return m.git(ctx, dir, "rev-parse", "--verify", "--quiet", sha+"^{tree}")
}
