package gitlabci

import (
	"context"
	"fmt"

	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/gitcli"
)

// commits are the two commits a job plans and how the plan names them.
type commits struct {
	base, head           string
	baseLabel, headLabel string
	rule                 string // why these two, for the log
}

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
func commitsOf(ctx context.Context, g gitcli.Repo, pl gitlab.Pipeline) (commits, error) {
	target := pl.Change.BaseRef
	head := pl.Commit
	if err := g.EnsureCommit(ctx, remote, head); err != nil {
		return commits{}, fmt.Errorf("fetch the pipeline's commit %s: %w"+fetchHint, head, err)
	}
	if pl.Merged() {
		parents, err := g.Parents(ctx, head)
		if err != nil {
			return commits{}, err
		}
		if len(parents) < 2 {
			return commits{}, fmt.Errorf("the %s pipeline's commit %s is not a merge (%d parents): is the checkout GitLab's merge ref?", pl.Kind, short(head), len(parents))
		}
		if err := g.EnsureCommit(ctx, remote, parents[0]); err != nil {
			return commits{}, fmt.Errorf("fetch the first parent of the merge commit %s: %w"+fetchHint, head, err)
		}
		return commits{base: parents[0], head: head, baseLabel: target + " at " + short(parents[0]),
			headLabel: "merge of " + short(parents[1]) + " into " + target,
			rule:      "a " + pl.Kind + " pipeline: GitLab's merge commit against its first parent"}, nil
	}
	if pl.DiffBase == "" {
		return commits{}, fmt.Errorf("CI_MERGE_REQUEST_DIFF_BASE_SHA is not set: which commit of %s the merge request is against is not known", target)
	}
	if err := g.EnsureCommit(ctx, remote, pl.DiffBase); err != nil {
		return commits{}, fmt.Errorf("fetch the merge request's diff base %s: %w"+fetchHint, pl.DiffBase, err)
	}
	return commits{base: pl.DiffBase, head: head, baseLabel: target + " at " + short(pl.DiffBase) + " (diff base)",
		headLabel: "head " + short(head), rule: "a detached pipeline: the head against CI_MERGE_REQUEST_DIFF_BASE_SHA"}, nil
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
