// Package gitmirror keeps one bare mirror per repository on disk and
// fetches into it only what is new, over HTTPS with a token. The webhook
// renders commits straight from these mirrors (git archive), so nothing is
// ever checked out.
package gitmirror

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Mirrors is a directory of bare mirrors.
type Mirrors struct {
	Dir    string
	Token  []byte // GitHub token for HTTPS; may be empty for public repos
	Logger *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (m *Mirrors) lock(dir string) func() {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*sync.Mutex{}
	}
	l, ok := m.locks[dir]
	if !ok {
		l = &sync.Mutex{}
		m.locks[dir] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// dirFor names a mirror by a hash of its URL: URLs are not file names.
func (m *Mirrors) dirFor(cloneURL string) string {
	sum := sha256.Sum256([]byte(cloneURL))
	return filepath.Join(m.Dir, hex.EncodeToString(sum[:8])+".git")
}

// git runs git with the token passed through the environment (never on a
// command line, where other users' ps could read it).
func (m *Mirrors) git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	if len(m.Token) > 0 {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + string(m.Token)))
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+auth)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(m.Token) > 0 {
			msg = strings.ReplaceAll(msg, string(m.Token), "***")
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(string(out)), nil
}

// Fetch updates the mirror of cloneURL with branch and makes sure it holds
// sha (when given). It returns the mirror's directory and the branch tip.
func (m *Mirrors) Fetch(ctx context.Context, cloneURL, branch, sha string) (dir, tip string, err error) {
	dir = m.dirFor(cloneURL)
	defer m.lock(dir)()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", fmt.Errorf("mirror of %s: %w", cloneURL, err)
		}
		if _, err := m.git(ctx, dir, "init", "-q", "--bare"); err != nil {
			return "", "", fmt.Errorf("mirror of %s: %w", cloneURL, err)
		}
	}
	if sha != "" {
		if _, err := m.git(ctx, dir, "cat-file", "-e", sha+"^{commit}"); err == nil {
			tip, err = m.git(ctx, dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch)
			if err == nil {
				return dir, tip, nil // nothing new needed for this commit
			}
		}
	}
	ref := "+refs/heads/" + branch + ":refs/heads/" + branch
	if _, err := m.git(ctx, dir, "fetch", "-q", "--no-tags", "--prune", cloneURL, ref); err != nil {
		return "", "", fmt.Errorf("fetch %s from %s: %w", branch, cloneURL, err)
	}
	if sha != "" {
		if _, err := m.git(ctx, dir, "cat-file", "-e", sha+"^{commit}"); err != nil {
			// Not on the branch (yet): fetch the commit itself.
			if _, err := m.git(ctx, dir, "fetch", "-q", "--no-tags", cloneURL, sha); err != nil {
				return "", "", fmt.Errorf("fetch commit %s from %s: %w", sha, cloneURL, err)
			}
		}
	}
	tip, err = m.git(ctx, dir, "rev-parse", "--verify", "refs/heads/"+branch)
	if err != nil {
		return "", "", fmt.Errorf("branch %s of %s: %w", branch, cloneURL, err)
	}
	return dir, tip, nil
}

// IsAncestor reports whether commit a is an ancestor of commit b in the
// mirror at dir (false when either is unknown).
func (m *Mirrors) IsAncestor(ctx context.Context, dir, a, b string) bool {
	_, err := m.git(ctx, dir, "merge-base", "--is-ancestor", a, b)
	return err == nil
}
