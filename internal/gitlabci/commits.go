package gitlabci

import (
	"context"
	"fmt"

	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/prflow"
)

// fetchHint ends errors of fetches.
const fetchHint = " (kplan fetches from the job's origin remote, with the job token GitLab Runner puts in its URL; keep GIT_STRATEGY fetch or clone)"

// commitsOf chooses the commits whose difference is what merging the
// merge request will do, fetching what a shallow clone lacks into the
// object database only:
//
//   - merged-results pipelines and merge trains run on the merge commit
//     GitLab made of the source into the target (CI_COMMIT_SHA): base is
//     its first parent, the target as the merge found it (with a merge
//     train, the merge request ahead of it included). The merge is
//     exactly what merging will do.
//   - other (detached) pipelines run on the source branch's head: base
//     is CI_MERGE_REQUEST_DIFF_BASE_SHA, the target's commit the merge
//     request's diff is against.
func commitsOf(ctx context.Context, g gitcli.Repo, pl gitlab.Pipeline) (prflow.Commits, error) {
	target := pl.Change.BaseRef
	head := pl.Commit
	if err := g.EnsureCommit(ctx, remote, head); err != nil {
		return prflow.Commits{}, fmt.Errorf("fetch the pipeline's commit %s: %w"+fetchHint, head, err)
	}
	if pl.Merged() {
		parents, err := g.Parents(ctx, head)
		if err != nil {
			return prflow.Commits{}, err
		}
		if len(parents) < 2 {
			return prflow.Commits{}, fmt.Errorf("the %s pipeline's commit %s is not a merge (%d parents): is the checkout GitLab's merge ref?", pl.Kind, short(head), len(parents))
		}
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return prflow.Commits{}, fmt.Errorf("fetch the first parent of the merge commit %s: %w"+fetchHint, head, err)
		}
		return prflow.Commits{Base: parents[0], Head: head, BaseLabel: target + " at " + short(parents[0]),
			HeadLabel: "merge of " + short(parents[1]) + " into " + target,
			Rule:      "a " + pl.Kind + " pipeline: GitLab's merge commit against its first parent"}, nil
	}
	if pl.DiffBase == "" {
		return prflow.Commits{}, fmt.Errorf("CI_MERGE_REQUEST_DIFF_BASE_SHA is not set: which commit of %s the merge request is against is not known", target)
	}
	if err := g.EnsureCommit(ctx, remote, pl.DiffBase); err != nil {
		return prflow.Commits{}, fmt.Errorf("fetch the merge request's diff base %s: %w"+fetchHint, pl.DiffBase, err)
	}
	return prflow.Commits{Base: pl.DiffBase, Head: head, BaseLabel: target + " at " + short(pl.DiffBase) + " (diff base)",
		HeadLabel: "head " + short(head), Rule: "a detached pipeline: the head against CI_MERGE_REQUEST_DIFF_BASE_SHA"}, nil
}

var short = prflow.Short
