package gitlab_test

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

const (
	head   = "1111111111111111111111111111111111111111"
	merge  = "2222222222222222222222222222222222222222"
	squash = "3333333333333333333333333333333333333333"
)

func decode(t *testing.T, event string, body []byte) forge.Event {
	t.Helper()
	ev, err := gitlab.Receiver{}.Decode(forge.Delivery{Event: event}, "application/json", body)
	if err != nil {
		t.Fatalf("%s: %v", event, err)
	}
	return ev
}

// Merge Request Hook deliveries become the seam's Review events as the
// webhook reads them: merge with its merge commit (a fast-forward merge,
// which has none, with the head), opens, pushes (update with oldrev),
// labels added, and a fork's merge request marked untrusted. Merged
// without a merge commit, the branch points at the squash commit, else
// at the head.
func TestDecodeMergeRequestHook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		e      gitlabapi.MergeRequestEvent
		action forge.ChangeAction
		label  string
		change forge.Change
	}{
		{"merged", gitlabapi.MergeRequestEvent{Action: "merge", MergeCommitSHA: merge}, forge.Closed, "",
			forge.Change{MergeSHA: merge, Merged: true}},
		{"merged by fast-forward", gitlabapi.MergeRequestEvent{Action: "merge"}, forge.Closed, "",
			forge.Change{MergeSHA: head, Merged: true}},
		{"squashed by fast-forward", gitlabapi.MergeRequestEvent{Action: "merge", SquashCommitSHA: squash}, forge.Closed, "",
			forge.Change{MergeSHA: squash, Merged: true}},
		{"squashed with a merge commit", gitlabapi.MergeRequestEvent{Action: "merge", SquashCommitSHA: squash, MergeCommitSHA: merge}, forge.Closed, "",
			forge.Change{MergeSHA: merge, Merged: true}},
		{"opened", gitlabapi.MergeRequestEvent{Action: "open"}, forge.Opened, "", forge.Change{}},
		{"reopened", gitlabapi.MergeRequestEvent{Action: "reopen"}, forge.Reopened, "", forge.Change{}},
		{"pushed to", gitlabapi.MergeRequestEvent{Action: "update", OldRev: merge}, forge.Updated, "", forge.Change{}},
		{"labeled", gitlabapi.MergeRequestEvent{Action: "update", Labels: []string{"kplan/apply-unreviewed"}, AddedLabel: "kplan/apply-unreviewed", State: "merged", MergeCommitSHA: merge},
			forge.Labeled, "kplan/apply-unreviewed", forge.Change{MergeSHA: merge, Merged: true, Labels: []string{"kplan/apply-unreviewed"}}},
		{"approved", gitlabapi.MergeRequestEvent{Action: "approved"}, "approved", "", forge.Change{}},
		{"from a fork", gitlabapi.MergeRequestEvent{Action: "open", SourceProject: "mallory/infra", SourceProjectID: 99}, forge.Opened, "",
			forge.Change{Fork: true}},
	} {
		tc.e.Project, tc.e.IID, tc.e.SourceBranch, tc.e.TargetBranch, tc.e.HeadSHA, tc.e.User = project, iid, "feature", "main", head, "carol"
		ev := decode(t, gitlab.MergeRequestHook, gitlabapi.MergeRequestHook(tc.e))
		want := tc.change
		want.Repo, want.Number, want.HeadSHA, want.HeadRef, want.BaseRef = project, iid, head, "feature", "main"
		if ev.Kind != forge.Review || ev.Repo != project || ev.Action != tc.action || ev.Label != tc.label || ev.Sender != "carol" || !reflect.DeepEqual(*ev.Change, want) {
			t.Errorf("%s: %+v with %+v, want %s %q and %+v", tc.name, ev, *ev.Change, tc.action, tc.label, want)
		}
	}
}

func TestDecodePushHook(t *testing.T) {
	ev := decode(t, gitlab.PushHook, gitlabapi.PushHook(gitlabapi.PushEvent{Project: project, Ref: "refs/heads/main", Before: head, After: merge}))
	if ev.Kind != forge.Push || ev.Repo != project || ev.Ref != "refs/heads/main" || ev.SHA != merge || ev.Deleted {
		t.Errorf("push: %+v", ev)
	}
	ev = decode(t, gitlab.PushHook, gitlabapi.PushHook(gitlabapi.PushEvent{Project: project, Ref: "refs/heads/old", Before: head, After: "0000000000000000000000000000000000000000"}))
	if !ev.Deleted {
		t.Errorf("a deleted branch: %+v", ev)
	}
}

// A delivery without X-Gitlab-Token is refused from its headers; a
// wrong token does not verify; the idempotency key names the delivery.
func TestReceiverHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("X-Gitlab-Event", gitlab.PushHook)
	h.Set("X-Gitlab-Event-UUID", "uuid-1")
	if _, err := (gitlab.Receiver{}).Delivery(h); !errors.Is(err, forge.ErrUnsigned) {
		t.Errorf("no token: %v, want ErrUnsigned", err)
	}
	h.Set("X-Gitlab-Token", "s3cret")
	d, err := gitlab.Receiver{}.Delivery(h)
	if err != nil || d.ID != "uuid-1" || d.Event != gitlab.PushHook {
		t.Errorf("Delivery: %+v, %v", d, err)
	}
	h.Set("Idempotency-Key", "key-1")
	if d, _ = (gitlab.Receiver{}).Delivery(h); d.ID != "key-1" {
		t.Errorf("ID %q, want the idempotency key", d.ID)
	}
	body := func(func([]byte)) {}
	for secret, want := range map[string]bool{"s3cret": true, "s3cre": false, "s3cret ": false, "": false} {
		if got := (gitlab.Receiver{}).Verify(d, body, []byte(secret)); got != want {
			t.Errorf("Verify with secret %q: %v, want %v", secret, got, want)
		}
	}
	if _, err := (gitlab.Receiver{}).Decode(d, "text/plain", []byte(`{}`)); err == nil {
		t.Error("a text/plain body was decoded")
	}
	if ev, err := (gitlab.Receiver{}).Decode(forge.Delivery{Event: "Note Hook"}, "", []byte(`{}`)); err != nil || ev.Kind != forge.Other {
		t.Errorf("Note Hook: %+v, %v", ev, err)
	}
	if !(gitlab.Receiver{}).ForwardHeader("X-Gitlab-Token") || !(gitlab.Receiver{}).ForwardHeader("Idempotency-Key") || (gitlab.Receiver{}).ForwardHeader("Authorization") {
		t.Error("ForwardHeader: GitLab's headers only")
	}
}
