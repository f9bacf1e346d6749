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
	"strconv"
	"strings"
)

// Repo is a git repository on disk (any directory inside its work tree).
type Repo struct {
	Dir string
	// Env is added to git's environment: the Action passes its token's
	// authorization header this way (GIT_CONFIG_*), never on a command
	// line where other processes could read it.
	Env []string
}

// Run runs git with args in the repository and returns its standard output.
func (r Repo) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.Dir
	// A user's pager, editor or locale must not change what we parse.
	cmd.Env = append(append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_PAGER=cat"), r.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &Error{Args: args, Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

// Error is a git command that failed: its message is git's own, and it
// unwraps to the *exec.ExitError, whose code some commands give meaning.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = e.Err.Error()
	}
	return "git " + strings.Join(e.Args, " ") + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

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
	if err := r.Fetch(ctx, remote, 1, sha); err != nil {
		return err
	}
	if !r.HasCommit(ctx, sha) {
		return errors.New("fetched " + sha + " but git still cannot find it")
	}
	return nil
}

// Fetch fetches srcs (commit SHAs or remote refs) from remote into the
// object database only: no tags, no local refs, no FETCH_HEAD, and never
// the work tree or the index. depth > 0 limits history to depth commits
// from each src (deepening a shallow clone when it is deeper than what is
// there); depth 0 fetches without a limit; depth < 0 unshallows.
func (r Repo) Fetch(ctx context.Context, remote string, depth int, srcs ...string) error {
	args := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules"}
	switch {
	case depth > 0:
		args = append(args, "--depth="+strconv.Itoa(depth))
	case depth < 0 && r.IsShallow(ctx):
		args = append(args, "--unshallow")
	}
	args = append(args, "--end-of-options", remote)
	if _, err := r.Run(ctx, append(args, srcs...)...); err != nil {
		return fmt.Errorf("fetch %s from %s: %w", strings.Join(srcs, " "), remote, err)
	}
	return nil
}

// IsShallow reports whether the repository is a shallow clone.
func (r Repo) IsShallow(ctx context.Context) bool {
	out, err := r.Run(ctx, "rev-parse", "--is-shallow-repository")
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// RemoteRef returns the commit a ref (refs/heads/main) points at on
// remote, without fetching anything.
func (r Repo) RemoteRef(ctx context.Context, remote, ref string) (string, error) {
	out, err := r.Run(ctx, "ls-remote", "--end-of-options", remote, ref)
	if err != nil {
		return "", fmt.Errorf("look up %s on %s: %w", ref, remote, err)
	}
	// ls-remote matches patterns against the tail of ref names: keep the
	// exact one.
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && name == ref {
			return sha, nil
		}
	}
	return "", fmt.Errorf("%s has no %s (was the branch deleted or renamed?)", remote, ref)
}

// Parents returns the parents of a commit as the commit object records
// them. Unlike rev-parse sha^2, this works on the boundary commit of a
// shallow clone, whose parents git hides because it does not have them.
func (r Repo) Parents(ctx context.Context, sha string) ([]string, error) {
	out, err := r.Run(ctx, "cat-file", "commit", sha)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", sha, err)
	}
	var parents []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" { // the headers end at the first empty line
			break
		}
		if p, ok := strings.CutPrefix(line, "parent "); ok {
			parents = append(parents, p)
		}
	}
	return parents, nil
}

// MergeBase returns the best common ancestor of commits a and b, both
// present. In a shallow clone whose history does not reach it, it fetches
// more history of srcs (what to ask remote for: the SHAs a and b when srcs
// is empty, or refs that point at them), deeper each time, and at last all
// of it. Deepening works on SHAs, so it serves a fork's head that no
// branch of remote names (--shallow-exclude takes only refs, and stops
// short of the merge base itself); most pull requests branch off within
// the first depth, one round trip.
func (r Repo) MergeBase(ctx context.Context, remote, a, b string, srcs ...string) (string, error) {
	if len(srcs) == 0 {
		srcs = []string{a, b}
	}
	depths := []int{64, 512, 4096, -1}
	for i := 0; ; i++ {
		if base, ok, err := r.mergeBase(ctx, a, b); err != nil || ok {
			return base, err
		}
		if i == len(depths) || !r.IsShallow(ctx) {
			return "", fmt.Errorf("commits %s and %s have no common ancestor (unrelated histories?)", a, b)
		}
		if err := r.Fetch(ctx, remote, depths[i], srcs...); err != nil {
			return "", fmt.Errorf("fetch history to find the merge base of %s and %s: %w", a, b, err)
		}
	}
}

// mergeBase runs git merge-base: ok is false when the history present has
// no common ancestor.
func (r Repo) mergeBase(ctx context.Context, a, b string) (string, bool, error) {
	out, err := r.Run(ctx, "merge-base", "--end-of-options", a, b)
	if err == nil {
		return strings.TrimSpace(string(out)), true, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return "", false, nil
	}
	return "", false, fmt.Errorf("merge base of %s and %s: %w", a, b, err)
}
