package gitbase

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/keylock"
	"github.com/kplan-dev/kplan/internal/netpolicy"
)

// Policy is the network policy fetches hold to (netpolicy.Policy): Check
// refuses a URL before any connection, DialContext connects only where
// the policy allows, after DNS.
type Policy interface {
	Check(u *url.URL) error
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Cache holds fetched repositories under Dir: a bare repository per URL
// (repos/), and the tree of each commit a render used, checked out once
// (trees/<commit>). Trees are named by commit, so a tag or a SHA that was
// fetched once is served from disk; a branch is resolved again once per
// Cache (one plan, or one webhook render).
//
// A Cache holds a shared lock (flock) on each tree and repository it
// served until Close, and touches it: Prune, in any Cache or process,
// removes only what it can lock exclusively and what no Cache used for
// longer than its age (prune.go).
//
// Git runs as a subprocess whose only way out is the Cache's own proxy
// on loopback, which connects as the policy allows (the address checked
// after DNS, for every connection, redirects not followed), so git cannot
// reach a host the http(s) fetches of a render could not. Only http and
// https URLs are fetched: ssh would connect outside the proxy, file
// would read the runner's disk.
type Cache struct {
	dir    string
	policy Policy

	mu       sync.Mutex
	branches map[string]string   // url + "\x00" + ref -> commit, resolved this run
	locks    keylock.Map         // serializes the work on a repository
	held     map[string]*os.File // directory -> its open, shared-locked handle, until Close
	proxy    *proxy
}

// New returns a Cache in dir, fetching as policy allows.
func New(dir string, policy Policy) *Cache {
	return &Cache{dir: dir, policy: policy, branches: map[string]string{}, held: map[string]*os.File{}}
}

// Close stops the Cache's proxy, if it started one, and lets go of the
// trees and repositories it served: Prune may remove them from then on.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, f := range c.held {
		f.Close() // releases the lock
		delete(c.held, path)
	}
	if c.proxy != nil {
		err := c.proxy.Close()
		c.proxy = nil
		return err
	}
	return nil
}

// Tree is a remote base at the commit its ref resolved to.
type Tree struct {
	// Root is the directory holding the repository's tree at Commit.
	Root   string
	Commit string
	// URL is what git fetched, after the url.<base>.insteadOf of git's
	// configuration.
	URL string
}

var hexRe = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// Get fetches the repository s names, at its ref, and returns its tree,
// which no Prune removes before the Cache is closed.
func (c *Cache) Get(ctx context.Context, s *Spec) (*Tree, error) {
	u, err := c.Allowed(ctx, s)
	if err != nil {
		return nil, err
	}
	raw, fetchURL := s.CloneURL(), u.String()
	key := hashOf(fetchURL)
	repo := filepath.Join(c.dir, "repos", key+".git")
	unlock := c.locks.Lock(repo)
	defer unlock()
	if err := c.openRepo(ctx, repo); err != nil {
		return nil, err
	}
	commit, err := c.resolve(ctx, repo, u, s.Ref)
	if err != nil {
		return nil, fmt.Errorf("remote base %s: %w", raw, err)
	}
	root := filepath.Join(c.dir, "trees", commit)
	// A Prune elsewhere may remove the tree between our look and our
	// lock; a few rounds, as each one finds a fresh tree, is plenty.
	for range placeAttempts {
		if ok, err := c.hold(ctx, root); err != nil {
			return nil, fmt.Errorf("remote base %s at %s: git cache: %w", raw, commit, err)
		} else if ok {
			return &Tree{Root: root, Commit: commit, URL: fetchURL}, nil
		}
		ok, err := c.place(ctx, root, func(tmp string) error { return c.archive(ctx, repo, commit, tmp) })
		if err != nil {
			return nil, fmt.Errorf("remote base %s at %s: %w", raw, commit, err)
		}
		if ok {
			return &Tree{Root: root, Commit: commit, URL: fetchURL}, nil
		}
	}
	return nil, fmt.Errorf("remote base %s at %s: git cache: %s was removed as soon as it was checked out, %d times; is another process pruning %s with a tiny age?", raw, commit, root, placeAttempts, c.dir)
}

// Allowed says where git would fetch the repository s names (after its
// insteadOf rewrites) and refuses it, without any connection, when the
// policy or kplan would: a plan fails such an overlay before building it.
func (c *Cache) Allowed(ctx context.Context, s *Spec) (*url.URL, error) {
	raw := s.CloneURL()
	switch {
	case strings.HasPrefix(raw, "https://"), strings.HasPrefix(raw, "http://"):
	case strings.HasPrefix(raw, "file://"):
		return nil, fmt.Errorf("remote base %s: a file:// repository would read the disk of the machine that renders; kplan fetches git bases over http(s) only", raw)
	default:
		return nil, fmt.Errorf("remote base %s: kplan fetches git bases over https, through the render's network policy, and ssh would connect outside it; write the base as https://%s", raw, httpsForm(s))
	}
	// What git will connect to: its insteadOf rewrites apply first.
	out, err := c.git(os.TempDir()).Run(ctx, "ls-remote", "--get-url", raw)
	if err != nil {
		return nil, fmt.Errorf("remote base %s: %w", raw, err)
	}
	fetchURL := strings.TrimSpace(string(out))
	u, err := url.Parse(fetchURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("remote base %s: git's configuration sends it to %s, which kplan does not fetch (http(s) only)", raw, fetchURL)
	}
	if err := c.policy.Check(u); err != nil {
		return nil, err
	}
	return u, nil
}

func httpsForm(s *Spec) string {
	h := s.Host
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	if i := strings.Index(h, "@"); i >= 0 {
		h = h[i+1:]
	}
	h = strings.TrimRight(h, ":/")
	return h + "/" + s.RepoPath
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// git runs git in dir with the Cache's isolation: no system or global
// configuration (a user's would set proxies or helpers), no proxy from
// the environment, only http(s), no redirects.
func (c *Cache) git(dir string) gitcli.Repo {
	return gitcli.Repo{Dir: dir, Env: []string{
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_ALLOW_PROTOCOL=http:https", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "SSH_ASKPASS=true",
		"http_proxy=", "https_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "ALL_PROXY=", "all_proxy=", "NO_PROXY=", "no_proxy=",
	}}
}

// remote runs git in the bare repository with network access through the
// proxy.
func (c *Cache) remote(ctx context.Context, repo string, u *url.URL, args ...string) ([]byte, error) {
	p, err := c.startProxy()
	if err != nil {
		return nil, err
	}
	pre := []string{"-c", "http.proxy=" + p.URL, "-c", "http.followRedirects=false", "-c", "protocol.file.allow=never",
		"-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30"}
	out, err := c.git(repo).Run(ctx, append(pre, args...)...)
	if err != nil {
		if r := p.refusal(u.Hostname()); r != nil {
			var re *netpolicy.RefusedError
			if errors.As(r, &re) && re.URL == "" {
				re.URL = netpolicy.Redact(u)
			}
			return nil, r
		}
	}
	return out, err
}

func (c *Cache) startProxy() (*proxy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proxy == nil {
		p, err := startProxy(c.policy)
		if err != nil {
			return nil, err
		}
		c.proxy = p
	}
	return c.proxy, nil
}

// openRepo makes sure the bare repository exists and holds it.
func (c *Cache) openRepo(ctx context.Context, repo string) error {
	for range placeAttempts {
		ok, err := c.hold(ctx, repo)
		if err != nil {
			return fmt.Errorf("git cache: %w", err)
		}
		if ok {
			if _, err := os.Stat(filepath.Join(repo, "HEAD")); err != nil {
				// Left half-made by an older kplan: git init repairs it.
				if _, err := c.git("").Run(ctx, "init", "--bare", "--quiet", repo); err != nil {
					return fmt.Errorf("git cache: %w", err)
				}
			}
			return nil
		}
		ok, err = c.place(ctx, repo, func(tmp string) error {
			_, err := c.git("").Run(ctx, "init", "--bare", "--quiet", tmp)
			return err
		})
		if err != nil {
			return fmt.Errorf("git cache: %w", err)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("git cache: %s was removed as soon as it was made, %d times; is another process pruning %s with a tiny age?", repo, placeAttempts, c.dir)
}

// resolve returns the commit ref names in the repository at fetchURL,
// fetching it into repo if it is not there. A commit SHA, or a tag
// fetched before (kept as refs/tags/ in repo), needs no network; a
// branch is asked for once per Cache.
func (c *Cache) resolve(ctx context.Context, repo string, u *url.URL, ref string) (string, error) {
	g := c.git(repo)
	fetchURL := u.String()
	if hexRe.MatchString(ref) {
		if !g.HasCommit(ctx, ref) {
			if _, err := c.remote(ctx, repo, u, "fetch", "--quiet", "--no-tags", "--depth=1", fetchURL, ref); err != nil {
				return "", err
			}
		}
		return ref, nil
	}
	if ref != "" && !strings.HasPrefix(ref, "refs/") {
		if sha, err := g.ResolveCommit(ctx, "refs/tags/"+ref); err == nil {
			return sha, nil
		}
	}
	bkey := fetchURL + "\x00" + ref
	c.mu.Lock()
	sha, ok := c.branches[bkey]
	c.mu.Unlock()
	if ok {
		return sha, nil
	}
	name, sha, err := c.lsRemote(ctx, repo, u, ref)
	if err != nil {
		return "", err
	}
	if !g.HasCommit(ctx, sha) {
		if _, err := c.remote(ctx, repo, u, "fetch", "--quiet", "--no-tags", "--depth=1", fetchURL, name); err != nil {
			return "", err
		}
		if !g.HasCommit(ctx, sha) {
			return "", fmt.Errorf("%s moved while fetched (it named %s); try again", name, sha)
		}
	}
	if strings.HasPrefix(name, "refs/tags/") {
		// Kept: the next run reads the tag from disk.
		if _, err := g.Run(ctx, "update-ref", name, sha); err != nil {
			return "", err
		}
		return sha, nil
	}
	c.mu.Lock()
	c.branches[bkey] = sha
	c.mu.Unlock()
	return sha, nil
}

// lsRemote finds ref among the remote's refs as `git fetch <ref>` does:
// the name itself, then refs/, refs/tags/, refs/heads/; a tag to its
// commit.
func (c *Cache) lsRemote(ctx context.Context, repo string, u *url.URL, ref string) (string, string, error) {
	if ref == "" {
		ref = "HEAD"
	}
	fetchURL := u.String()
	out, err := c.remote(ctx, repo, u, "ls-remote", "--", fetchURL)
	if err != nil {
		return "", "", err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(line, "\t")
		if ok {
			refs[name] = sha
		}
	}
	for _, name := range []string{ref, "refs/" + ref, "refs/tags/" + ref, "refs/heads/" + ref} {
		sha, ok := refs[name]
		if !ok {
			continue
		}
		if peeled, ok := refs[name+"^{}"]; ok {
			sha = peeled
		}
		return name, sha, nil
	}
	return "", "", fmt.Errorf("%s has no branch or tag %q", fetchURL, ref)
}

// archive writes the tree of commit to dir: regular files only, as git
// archive gives them. Symbolic links are left out, so that nothing in
// the tree reaches outside it.
func (c *Cache) archive(ctx context.Context, repo, commit, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	cmd.Dir = repo
	cmd.Env = append(cmd.Environ(), c.git("").Env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	xerr := untar(stdout, dir)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %s: %w", strings.TrimSpace(stderr.String()), err)
	}
	return xerr
}

func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read git archive: %w", err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			continue
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
