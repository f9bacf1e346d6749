package gitlab

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kplan-dev/kplan/internal/forge"
)

// ErrNotMergeRequest says a pipeline does not run for a merge request:
// kplan plans merge request pipelines only (rules: if:
// $CI_PIPELINE_SOURCE == "merge_request_event").
var ErrNotMergeRequest = errors.New("not a merge request pipeline")

// Pipeline is a merge request pipeline as GitLab CI's predefined
// variables describe it.
type Pipeline struct {
	// Change is the merge request: Repo is the target project's full
	// path, HeadSHA its source branch's commit, Fork whether the source
	// project is another.
	Change forge.Change
	// Kind is CI_MERGE_REQUEST_EVENT_TYPE: detached, merged_result or
	// merge_train.
	Kind string
	// Commit is CI_COMMIT_SHA, the commit checked out: the merge commit
	// GitLab made of the source into the target (merged results, merge
	// trains), else the source branch's head.
	Commit string
	// DiffBase is CI_MERGE_REQUEST_DIFF_BASE_SHA: the target branch's
	// commit the merge request's diff is against.
	DiffBase string
	// APIURL is CI_API_V4_URL; JobURL is CI_JOB_URL ("" when not set).
	APIURL, JobURL string
	// ProjectDir is CI_PROJECT_DIR, the checkout.
	ProjectDir string
}

// Merged says whether the pipeline runs on GitLab's merge of the merge
// request into its target (a merged-results pipeline or a merge train):
// then Commit's first parent is the target as the merge found it.
func (p Pipeline) Merged() bool { return p.Kind == "merged_result" || p.Kind == "merge_train" }

// FromCI reads the pipeline from GitLab CI's predefined variables.
func FromCI(getenv func(string) string) (Pipeline, error) {
	if src := getenv("CI_PIPELINE_SOURCE"); src != "merge_request_event" {
		return Pipeline{}, fmt.Errorf("%w: CI_PIPELINE_SOURCE is %q: run the kplan job in merge request pipelines (rules: - if: $CI_PIPELINE_SOURCE == \"merge_request_event\")", ErrNotMergeRequest, src)
	}
	iid, err := strconv.Atoi(getenv("CI_MERGE_REQUEST_IID"))
	if err != nil || iid <= 0 {
		return Pipeline{}, fmt.Errorf("CI_MERGE_REQUEST_IID %q is not a merge request's number", getenv("CI_MERGE_REQUEST_IID"))
	}
	p := Pipeline{
		Kind: getenv("CI_MERGE_REQUEST_EVENT_TYPE"), Commit: getenv("CI_COMMIT_SHA"), DiffBase: getenv("CI_MERGE_REQUEST_DIFF_BASE_SHA"),
		APIURL: getenv("CI_API_V4_URL"), JobURL: getenv("CI_JOB_URL"), ProjectDir: getenv("CI_PROJECT_DIR"),
		Change: forge.Change{
			Repo: getenv("CI_MERGE_REQUEST_PROJECT_PATH"), Number: iid,
			HeadRef: getenv("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"), BaseRef: getenv("CI_MERGE_REQUEST_TARGET_BRANCH_NAME"),
			DefaultBranch: getenv("CI_DEFAULT_BRANCH"),
			// A fork's merge request names another source project; a
			// variable missing is taken for one too (untrusted).
			Fork: getenv("CI_MERGE_REQUEST_SOURCE_PROJECT_ID") == "" || getenv("CI_MERGE_REQUEST_SOURCE_PROJECT_ID") != getenv("CI_MERGE_REQUEST_PROJECT_ID"),
		},
	}
	for _, l := range strings.Split(getenv("CI_MERGE_REQUEST_LABELS"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			p.Change.Labels = append(p.Change.Labels, l)
		}
	}
	switch p.Kind {
	case "merged_result", "merge_train":
		// The source branch's commit is its own variable here.
		p.Change.HeadSHA, p.Change.MergeSHA = getenv("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA"), p.Commit
		p.Change.BaseSHA = getenv("CI_MERGE_REQUEST_TARGET_BRANCH_SHA")
	case "detached", "":
		p.Kind = "detached"
		p.Change.HeadSHA, p.Change.BaseSHA = p.Commit, p.DiffBase
	default:
		return Pipeline{}, fmt.Errorf("CI_MERGE_REQUEST_EVENT_TYPE %q: want detached, merged_result or merge_train", p.Kind)
	}
	switch {
	case p.Change.Repo == "" || p.Change.BaseRef == "":
		return Pipeline{}, errors.New("CI_MERGE_REQUEST_PROJECT_PATH or CI_MERGE_REQUEST_TARGET_BRANCH_NAME is not set: is this a merge request pipeline?")
	case p.Commit == "":
		return Pipeline{}, errors.New("CI_COMMIT_SHA is not set")
	}
	return p, nil
}
