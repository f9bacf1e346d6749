// Package gitcli runs the git command line. kplan reads commits with git
// itself so that it sees exactly what the user's git sees (packs, shallow
// clones, worktrees, alternates) without a second implementation.
package gitcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Repo is a git repository on disk (any directory inside its work tree).
type Repo struct {
	Dir string
}

// Run runs git with args in the repository and returns its standard output.
func (r Repo) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.Dir
	// A user's pager, editor or locale must not change what we parse.
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_PAGER=cat")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return stdout.Bytes(), fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return stdout.Bytes(), nil
}

// TopLevel returns the root of the work tree that holds r.Dir.
func (r Repo) TopLevel(ctx context.Context) (string, error) {
	out, err := r.Run(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%s is not inside a git work tree: %w", r.Dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ResolveCommit turns a revision (branch, tag, SHA, HEAD~1) into a full SHA.
func (r Repo) ResolveCommit(ctx context.Context, rev string) (string, error) {
	out, err := r.Run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("unknown revision %q in %s (fetch it or check the name): %w", rev, r.Dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// HasCommit reports whether the object database holds the commit.
func (r Repo) HasCommit(ctx context.Context, sha string) bool {
	_, err := r.Run(ctx, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// EnsureCommit makes sure sha is present, fetching it from remote when the
// clone is shallow or the commit is not yet known (actions/checkout fetches
// one commit by default). It never touches the work tree or the index.
func (r Repo) EnsureCommit(ctx context.Context, remote, sha string) error {
	if r.HasCommit(ctx, sha) {
		return nil
	}
	if _, err := r.Run(ctx, "fetch", "--no-tags", "--depth=1", remote, sha); err != nil {
		return fmt.Errorf("fetch base commit %s from %s: %w", sha, remote, err)
	}
	if !r.HasCommit(ctx, sha) {
		return errors.New("fetched " + sha + " but git still cannot find it")
	}
	return nil
}
