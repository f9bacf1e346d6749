package gitlab_test

import (
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

// FuzzDecode: a delivery's body, whatever it holds, is an event or an
// error, never a crash.
func FuzzDecode(f *testing.F) {
	f.Add(gitlab.MergeRequestHook, gitlabapi.MergeRequestHook(gitlabapi.MergeRequestEvent{Project: "a/b", IID: 1, Action: "merge", HeadSHA: head, MergeCommitSHA: merge}))
	f.Add(gitlab.MergeRequestHook, gitlabapi.MergeRequestHook(gitlabapi.MergeRequestEvent{Project: "a/b", IID: 1, Action: "update", AddedLabel: "x", Labels: []string{"x"}}))
	f.Add(gitlab.PushHook, gitlabapi.PushHook(gitlabapi.PushEvent{Project: "a/b", Ref: "refs/heads/main", After: merge}))
	f.Add(gitlab.MergeRequestHook, []byte(`{"object_kind":"merge_request","object_attributes":null,"changes":{"labels":{"current":[null]}}}`))
	f.Add(gitlab.PushHook, []byte(`{"object_kind":"push","project":null}`))
	f.Add("Note Hook", []byte(`[]`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		ev, err := gitlab.Receiver{}.Decode(forge.Delivery{Event: event}, "application/json", body)
		if err == nil && ev.Kind == forge.Review && ev.Change == nil {
			t.Errorf("a review event without its change")
		}
	})
}

// FuzzFromCI: GitLab CI's variables, whatever they hold, are a merge
// request or an error.
func FuzzFromCI(f *testing.F) {
	f.Add("merge_request_event", "17", "merged_result", "15", "15", "a,b")
	f.Add("merge_request_event", "x", "detached", "", "3", "")
	f.Add("push", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, source, iid, kind, project, sourceProject, labels string) {
		env := map[string]string{"CI_PIPELINE_SOURCE": source, "CI_MERGE_REQUEST_IID": iid, "CI_MERGE_REQUEST_EVENT_TYPE": kind,
			"CI_MERGE_REQUEST_PROJECT_ID": project, "CI_MERGE_REQUEST_SOURCE_PROJECT_ID": sourceProject, "CI_MERGE_REQUEST_LABELS": labels,
			"CI_MERGE_REQUEST_PROJECT_PATH": "a/b", "CI_COMMIT_SHA": merge, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"}
		p, err := gitlab.FromCI(func(k string) string { return env[k] })
		if err == nil && p.Change.Number <= 0 {
			t.Errorf("a pipeline of merge request %d", p.Change.Number)
		}
	})
}
