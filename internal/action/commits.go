package action

import (
	"context"
	"fmt"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/prflow"
)

// remote is the checkout's remote, as actions/checkout names it; its
// credentials (persisted by actions/checkout) fetch what the plan needs.
const remote = "origin"

// fetchHint ends errors of fetches: what a workflow needs for them.
const fetchHint = " (kplan fetches with the credentials actions/checkout leaves in the repository: keep its persist-credentials input at the default, true)"

// planCommits chooses the commits whose difference is what merging the
// pull request will do, fetching what a shallow checkout lacks into the
// object database only: the work tree, the index and HEAD stay as the
// checkout left them, and the head of a pull_request_target run (code
// from a fork, possibly) is only ever read as git objects.
//
//   - pull_request, HEAD is GitHub's merge of the PR head into the base
//     branch (refs/pull/N/merge, what actions/checkout checks out): base is
//     its first parent, the base branch as the merge saw it. The merge is
//     exactly what merging will do, and whatever reached the base branch
//     after the event's base.sha is on both sides, so not in the plan.
//   - pull_request, any other HEAD (a checkout of the PR head): HEAD
//     against its merge base with the base branch's tip on the remote.
//   - pull_request_target, where the checkout is the base branch: the PR
//     head, fetched by SHA (or refs/pull/N/head), against its merge base
//     with the base branch's tip.
func planCommits(ctx context.Context, g gitcli.Repo, event string, pr *forge.Change) (prflow.Commits, error) {
	branch, prHead := pr.BaseRef, pr.HeadSHA
	if event == "pull_request_target" {
		return targetCommits(ctx, g, branch, prHead, pr.Number)
	}
	return pullRequestCommits(ctx, g, branch, prHead)
}

// pushCommits are a push's: the checked-out commit against its first
// parent (a root commit against itself).
func pushCommits(ctx context.Context, g gitcli.Repo, branch string) (prflow.Commits, error) {
	head, parents, err := checkedOut(ctx, g)
	if err != nil {
		return prflow.Commits{}, err
	}
	c := prflow.Commits{Base: head, Head: head, BaseLabel: branch + " at " + short(head), HeadLabel: branch + " at " + short(head), Rule: "a root commit: against itself"}
	if len(parents) > 0 {
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return prflow.Commits{}, fmt.Errorf("fetch the parent of the pushed commit %s: %w"+fetchHint, head, err)
		}
		c.Base, c.BaseLabel, c.Rule = parents[0], branch+" at "+short(parents[0]), "a push: the pushed commit against its first parent"
	}
	return c, nil
}

func pullRequestCommits(ctx context.Context, g gitcli.Repo, branch, prHead string) (prflow.Commits, error) {
	head, parents, err := checkedOut(ctx, g)
	if err != nil {
		return prflow.Commits{}, err
	}
	if len(parents) == 2 && parents[1] == prHead {
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return prflow.Commits{}, fmt.Errorf("fetch the first parent of the merge commit %s: %w"+fetchHint, head, err)
		}
		return prflow.Commits{
			Base: parents[0], Head: head,
			BaseLabel: branch + " at " + short(parents[0]),
			HeadLabel: "merge of " + short(prHead) + " into " + branch,
			Rule:      "HEAD merges the pull request head into " + branch + ": base is its first parent",
		}, nil
	}
	return againstMergeBase(ctx, g, branch, head, head)
}

func targetCommits(ctx context.Context, g gitcli.Repo, branch, prHead string, number int) (prflow.Commits, error) {
	// Fetched by SHA, the commit is the one the event names even if the
	// PR was pushed to since; GitHub serves a fork's commits from the base
	// repository. refs/pull/N/head is for servers that refuse SHAs.
	src := prHead
	if !g.HasCommit(ctx, prHead) {
		if err := g.Fetch(ctx, remote, 1, prHead); err != nil {
			src = fmt.Sprintf("refs/pull/%d/head", number)
			if err2 := g.Fetch(ctx, remote, 1, src); err2 != nil {
				return prflow.Commits{}, fmt.Errorf("fetch the pull request head %s: by SHA: %w; by %s: %w"+fetchHint, prHead, err, src, err2)
			}
			if !g.HasCommit(ctx, prHead) {
				return prflow.Commits{}, fmt.Errorf("fetch the pull request head %s: %s no longer points at it (pushed to since? the run for that push plans it)", prHead, src)
			}
		}
	}
	return againstMergeBase(ctx, g, branch, prHead, src)
}

// againstMergeBase plans head (fetched from the remote as src) against
// its merge base with the tip of branch on the remote: the change the
// pull request makes, without what reached the branch since it forked.
func againstMergeBase(ctx context.Context, g gitcli.Repo, branch, head, src string) (prflow.Commits, error) {
	tip, err := g.RemoteRef(ctx, remote, "refs/heads/"+branch)
	if err != nil {
		return prflow.Commits{}, fmt.Errorf("find the tip of the base branch %s: %w"+fetchHint, branch, err)
	}
	if err := g.EnsureCommit(ctx, remote, tip); err != nil {
		return prflow.Commits{}, fmt.Errorf("fetch the tip of the base branch %s: %w"+fetchHint, branch, err)
	}
	base, err := g.MergeBase(ctx, remote, tip, head, tip, src)
	if err != nil {
		return prflow.Commits{}, fmt.Errorf("find where %s branched off %s: %w", short(head), branch, err)
	}
	c := prflow.Commits{
		Base: base, Head: head,
		BaseLabel: branch + " at " + short(base),
		HeadLabel: "head " + short(head),
		Rule:      "head against its merge base with the tip of " + branch + " (" + tip + ")",
	}
	if base != tip {
		// The branch moved on: say the base is where head forked.
		c.BaseLabel += " (merge base)"
	}
	return c, nil
}

// short abbreviates a SHA as GitHub shows it.
var short = prflow.Short

// checkedOut is the checked-out commit and its parents.
func checkedOut(ctx context.Context, g gitcli.Repo) (string, []string, error) {
	head, err := g.ResolveCommit(ctx, "HEAD")
	if err != nil {
		return "", nil, fmt.Errorf("read the checked-out commit (does the job run actions/checkout first?): %w", err)
	}
	parents, err := g.Parents(ctx, head)
	return head, parents, err
}
