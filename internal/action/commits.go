package action

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/gitcli"
)

// remote is the checkout's remote, as actions/checkout names it; its
// credentials (persisted by actions/checkout) fetch what the plan needs.
const remote = "origin"

// fetchHint ends errors of fetches: what a workflow needs for them.
const fetchHint = " (kplan fetches with the credentials actions/checkout leaves in the repository: keep its persist-credentials input at the default, true)"

// commits are the two commits a run plans and how the plan names them.
type commits struct {
	base, head           string
	baseLabel, headLabel string
	rule                 string // why these two, for the log
}

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
func planCommits(ctx context.Context, g gitcli.Repo, event string, pr *forge.Change, log *slog.Logger) (commits, error) {
	branch, prHead := pr.BaseRef, pr.HeadSHA
	var (
		c   commits
		err error
	)
	if event == "pull_request_target" {
		c, err = targetCommits(ctx, g, branch, prHead, pr.Number)
	} else {
		c, err = pullRequestCommits(ctx, g, branch, prHead)
	}
	if err != nil {
		return c, err
	}
	log.Info("commits planned", "event", event, "rule", c.rule,
		"base", c.base, "base_label", c.baseLabel, "head", c.head, "head_label", c.headLabel)
	return c, nil
}

// pushCommits are a push's: the checked-out commit against its first
// parent (a root commit against itself).
func pushCommits(ctx context.Context, g gitcli.Repo, branch string, log *slog.Logger) (commits, error) {
	head, parents, err := checkedOut(ctx, g)
	if err != nil {
		return commits{}, err
	}
	c := commits{base: head, head: head, baseLabel: branch + " at " + short(head), headLabel: branch + " at " + short(head), rule: "a root commit: against itself"}
	if len(parents) > 0 {
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return commits{}, fmt.Errorf("fetch the parent of the pushed commit %s: %w"+fetchHint, head, err)
		}
		c.base, c.baseLabel, c.rule = parents[0], branch+" at "+short(parents[0]), "a push: the pushed commit against its first parent"
	}
	log.Info("commits planned", "event", "push", "rule", c.rule, "base", c.base, "head", c.head)
	return c, nil
}

func pullRequestCommits(ctx context.Context, g gitcli.Repo, branch, prHead string) (commits, error) {
	head, parents, err := checkedOut(ctx, g)
	if err != nil {
		return commits{}, err
	}
	if len(parents) == 2 && parents[1] == prHead {
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return commits{}, fmt.Errorf("fetch the first parent of the merge commit %s: %w"+fetchHint, head, err)
		}
		return commits{
			base: parents[0], head: head,
			baseLabel: branch + " at " + short(parents[0]),
			headLabel: "merge of " + short(prHead) + " into " + branch,
			rule:      "HEAD merges the pull request head into " + branch + ": base is its first parent",
		}, nil
	}
	return againstMergeBase(ctx, g, branch, head, head)
}

func targetCommits(ctx context.Context, g gitcli.Repo, branch, prHead string, number int) (commits, error) {
	// Fetched by SHA, the commit is the one the event names even if the
	// PR was pushed to since; GitHub serves a fork's commits from the base
	// repository. refs/pull/N/head is for servers that refuse SHAs.
	src := prHead
	if !g.HasCommit(ctx, prHead) {
		if err := g.Fetch(ctx, remote, 1, prHead); err != nil {
			src = fmt.Sprintf("refs/pull/%d/head", number)
			if err2 := g.Fetch(ctx, remote, 1, src); err2 != nil {
				return commits{}, fmt.Errorf("fetch the pull request head %s: by SHA: %w; by %s: %w"+fetchHint, prHead, err, src, err2)
			}
			if !g.HasCommit(ctx, prHead) {
				return commits{}, fmt.Errorf("fetch the pull request head %s: %s no longer points at it (pushed to since? the run for that push plans it)", prHead, src)
			}
		}
	}
	return againstMergeBase(ctx, g, branch, prHead, src)
}

// againstMergeBase plans head (fetched from the remote as src) against
// its merge base with the tip of branch on the remote: the change the
// pull request makes, without what reached the branch since it forked.
func againstMergeBase(ctx context.Context, g gitcli.Repo, branch, head, src string) (commits, error) {
	tip, err := g.RemoteRef(ctx, remote, "refs/heads/"+branch)
	if err != nil {
		return commits{}, fmt.Errorf("find the tip of the base branch %s: %w"+fetchHint, branch, err)
	}
	if err := g.EnsureCommit(ctx, remote, tip); err != nil {
		return commits{}, fmt.Errorf("fetch the tip of the base branch %s: %w"+fetchHint, branch, err)
	}
	base, err := g.MergeBase(ctx, remote, tip, head, tip, src)
	if err != nil {
		return commits{}, fmt.Errorf("find where %s branched off %s: %w", short(head), branch, err)
	}
	c := commits{
		base: base, head: head,
		baseLabel: branch + " at " + short(base),
		headLabel: "head " + short(head),
		rule:      "head against its merge base with the tip of " + branch + " (" + tip + ")",
	}
	if base != tip {
		// The branch moved on: say the base is where head forked.
		c.baseLabel += " (merge base)"
	}
	return c, nil
}

// short abbreviates a SHA as GitHub shows it.
func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// checkedOut is the checked-out commit and its parents.
func checkedOut(ctx context.Context, g gitcli.Repo) (string, []string, error) {
	head, err := g.ResolveCommit(ctx, "HEAD")
	if err != nil {
		return "", nil, fmt.Errorf("read the checked-out commit (does the job run actions/checkout first?): %w", err)
	}
	parents, err := g.Parents(ctx, head)
	return head, parents, err
}
