package approval

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// Git is what the rule asks of a repository. Commits and trees are full
// object names; CLI implements it with the git command line.
type Git interface {
	// FirstParents is the first-parent chain of tip down to, not
	// including, the commits from reaches ("" for all of it), oldest
	// first.
	FirstParents(ctx context.Context, from, tip string) ([]string, error)
	// FirstParent is the first parent of commit ("" for a root commit).
	FirstParent(ctx context.Context, commit string) (string, error)
	// IsAncestor says whether a is b or an ancestor of b.
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	// MergeBase is the best common ancestor of a and b ("" for none).
	MergeBase(ctx context.Context, a, b string) (string, error)
	// Authored is who wrote a commit, when, and its message: what a
	// rebase keeps of a commit.
	Authored(ctx context.Context, commit string) (string, error)
	// Tree is the tree of a commit (the empty tree for "").
	Tree(ctx context.Context, commit string) (string, error)
	// Changed are the paths whose content or mode differs between two
	// trees.
	Changed(ctx context.Context, a, b string) ([]string, error)
	// Merge applies the change from base to theirs onto ours, three
	// trees, as git's merge does with base as the merge base: the tree it
	// writes and the paths left in conflict.
	Merge(ctx context.Context, base, ours, theirs string) (tree string, conflicts []string, err error)
}

// EmptyTree is git's empty tree (SHA-1).
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// CLI is Git with the git command line, in a repository on disk.
type CLI struct {
	Repo gitcli.Repo
}

func (g CLI) out(ctx context.Context, args ...string) (string, error) {
	out, err := g.Repo.Run(ctx, args...)
	return strings.TrimSpace(string(out)), err
}

// FirstParents implements Git.
func (g CLI) FirstParents(ctx context.Context, from, tip string) ([]string, error) {
	args := []string{"rev-list", "--first-parent", "--reverse", "--end-of-options", tip}
	if from != "" {
		args = append(args, "^"+from)
	}
	out, err := g.out(ctx, args...)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// FirstParent implements Git.
func (g CLI) FirstParent(ctx context.Context, commit string) (string, error) {
	parents, err := g.Repo.Parents(ctx, commit)
	if err != nil || len(parents) == 0 {
		return "", err
	}
	return parents[0], nil
}

// IsAncestor implements Git.
func (g CLI) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := g.Repo.Run(ctx, "merge-base", "--is-ancestor", "--end-of-options", a, b)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, err
}

// MergeBase implements Git.
func (g CLI) MergeBase(ctx context.Context, a, b string) (string, error) {
	out, err := g.out(ctx, "merge-base", "--end-of-options", a, b)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return "", nil
	}
	return out, err
}

// Authored implements Git.
func (g CLI) Authored(ctx context.Context, commit string) (string, error) {
	return g.out(ctx, "show", "-s", "--format=%an%x00%ae%x00%ad%x00%B", "--date=raw", "--end-of-options", commit)
}

// Tree implements Git.
func (g CLI) Tree(ctx context.Context, commit string) (string, error) {
	if commit == "" {
		return EmptyTree, nil
	}
	return g.out(ctx, "rev-parse", "--verify", "--end-of-options", commit+"^{tree}")
}

// Changed implements Git.
func (g CLI) Changed(ctx context.Context, a, b string) ([]string, error) {
	if a == b {
		return nil, nil
	}
	out, err := g.Repo.Run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--name-only", "--end-of-options", a, b)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Merge implements Git, without rename detection. git merge-tree --write-tree chooses the merge
// base itself (--merge-base came in git 2.40), so the three trees are
// given parentless commits that make base the only one: commit-tree
// with a fixed identity and date writes the same commits each time.
func (g CLI) Merge(ctx context.Context, base, ours, theirs string) (string, []string, error) {
	b, err := g.commitTree(ctx, base)
	if err != nil {
		return "", nil, err
	}
	o, err := g.commitTree(ctx, ours, b)
	if err != nil {
		return "", nil, err
	}
	t, err := g.commitTree(ctx, theirs, b)
	if err != nil {
		return "", nil, err
	}
	// Without rename detection a change applies to the path it was
	// approved on: a file the branch renamed is a conflict, never the
	// approved change moved to another path.
	out, err := g.Repo.Run(ctx, "-c", "merge.renames=false", "merge-tree", "--write-tree", "--name-only", "--no-messages", o, t)
	var exit *exec.ExitError
	conflicted := errors.As(err, &exit) && exit.ExitCode() == 1
	if err != nil && !conflicted {
		return "", nil, fmt.Errorf("merge: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var conflicts []string
	for _, l := range lines[1:] {
		if l != "" {
			conflicts = append(conflicts, l)
		}
	}
	if conflicted && len(conflicts) == 0 {
		conflicts = []string{"(a conflict git did not name)"}
	}
	return lines[0], conflicts, nil
}

func (g CLI) commitTree(ctx context.Context, tree string, parents ...string) (string, error) {
	args := []string{"-c", "user.name=kplan", "-c", "user.email=kplan@localhost", "-c", "commit.gpgsign=false", "commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	repo := g.Repo
	repo.Env = append(append([]string(nil), repo.Env...), "GIT_AUTHOR_DATE=@0 +0000", "GIT_COMMITTER_DATE=@0 +0000")
	out, err := repo.Run(ctx, append(args, "-m", "kplan approval")...)
	return strings.TrimSpace(string(out)), err
}

// CommitOf is a parentless commit of tree, the same one each time: what
// reads commits (a snapshot, a render) can read a tree the rule merged.
func (g CLI) CommitOf(ctx context.Context, tree string) (string, error) {
	return g.commitTree(ctx, tree)
}
