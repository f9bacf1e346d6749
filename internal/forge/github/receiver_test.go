package github

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
)

// GitHub's pull_request payloads become the seam's Change as the webhook
// and the Action read it: the merge commit, the head, the labels, and a
// fork told by the head repository (a deleted fork has none).
func TestDecodeNamesTheChange(t *testing.T) {
	const pr = `{"action": %q, "number": 7, "sender": {"login": "carol"}, "label": {"name": "kplan/apply-unreviewed"},
	  "repository": {"full_name": "acme/infra", "name": "infra", "owner": {"login": "acme"}},
	  "pull_request": {"number": 7, "merged": true, "merge_commit_sha": "m", "user": {"login": "bob"},
	    "labels": [{"name": "Dangerous-OK"}],
	    "head": {"sha": "h", "ref": "feature", "repo": %s},
	    "base": {"sha": "b", "ref": "main", "repo": {"full_name": "acme/infra"}}}}`
	for _, tc := range []struct {
		name, action, head string
		fork               bool
	}{
		{"same repository", "closed", `{"full_name": "acme/infra"}`, false},
		{"a fork", "synchronize", `{"full_name": "mallory/infra"}`, true},
		{"a deleted fork", "labeled", `null`, true},
	} {
		body := []byte(fmt.Sprintf(pr, tc.action, tc.head))
		ev, err := Receiver{}.Decode(forge.Delivery{Event: "pull_request"}, "application/json", body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := forge.Change{Repo: "acme/infra", Number: 7, HeadSHA: "h", HeadRef: "feature", BaseRef: "main", BaseSHA: "b",
			MergeSHA: "m", Fork: tc.fork, Merged: true, Labels: []string{"Dangerous-OK"}, Author: "bob"}
		if ev.Kind != forge.Review || ev.Action != forge.ChangeAction(tc.action) || ev.Sender != "carol" || ev.Label != "kplan/apply-unreviewed" || !reflect.DeepEqual(*ev.Change, want) {
			t.Errorf("%s: decoded %+v with %+v, want %+v", tc.name, ev, *ev.Change, want)
		}
		if !ev.Change.HasLabel("dangerous-ok") {
			t.Errorf("%s: HasLabel compares with case", tc.name)
		}
		got, err := DecodeEvent("pull_request_target", body)
		if err != nil || !reflect.DeepEqual(*got.Change, want) {
			t.Errorf("%s: the Action's event: %+v, %v", tc.name, got.Change, err)
		}
	}
}

// A delivery without a SHA-256 signature is refused from its headers; a
// form-encoded one is read from its payload field; other events are
// Other, if JSON.
func TestReceiverHeadersAndBodies(t *testing.T) {
	h := http.Header{}
	h.Set("X-GitHub-Event", "push")
	h.Set("X-Hub-Signature", "sha1=00")
	if _, err := (Receiver{}).Delivery(h); err == nil {
		t.Error("a sha1 signature was taken")
	}
	h.Set("X-Hub-Signature-256", "sha256=00")
	h.Set("X-GitHub-Delivery", "d-1")
	d, err := Receiver{}.Delivery(h)
	if err != nil || d.ID != "d-1" || d.Event != "push" {
		t.Errorf("Delivery: %+v, %v", d, err)
	}
	push := `{"ref": "refs/heads/main", "after": "abc", "repository": {"full_name": "acme/infra"}}`
	ev, err := Receiver{}.Decode(d, "application/x-www-form-urlencoded", []byte("payload="+url.QueryEscape(push)))
	if err != nil || ev.Kind != forge.Push || ev.Repo != "acme/infra" || ev.Ref != "refs/heads/main" || ev.SHA != "abc" {
		t.Errorf("form push: %+v, %v", ev, err)
	}
	if _, err := (Receiver{}).Decode(d, "text/plain", []byte(push)); err == nil {
		t.Error("a text/plain body was decoded")
	}
	ev, err = Receiver{}.Decode(forge.Delivery{Event: "issue_comment"}, "", []byte(`{}`))
	if err != nil || ev.Kind != forge.Other {
		t.Errorf("issue_comment: %+v, %v", ev, err)
	}
	if !(Receiver{}).ForwardHeader("X-Github-Delivery") || (Receiver{}).ForwardHeader("Authorization") {
		t.Error("ForwardHeader: GitHub's headers only")
	}
}

// The Action's event names the repository's default branch, from the
// repository, else the base's repository.
func TestDecodeEventNamesTheDefaultBranch(t *testing.T) {
	for _, c := range []struct{ payload, want string }{
		{`{"repository": {"name": "infra", "owner": {"login": "acme"}, "default_branch": "main"}, "pull_request": {"base": {"ref": "main"}}}`, "main"},
		{`{"repository": {"name": "infra", "owner": {"login": "acme"}}, "pull_request": {"base": {"ref": "main", "repo": {"default_branch": "trunk"}}}}`, "trunk"},
		{`{"repository": {"name": "infra", "owner": {"login": "acme"}}, "pull_request": {"base": {"ref": "main"}}}`, ""},
	} {
		ev, err := DecodeEvent("pull_request", []byte(c.payload))
		if err != nil || ev.Change.DefaultBranch != c.want {
			t.Errorf("%s: %+v, %v; want default branch %q", c.payload, ev.Change, err, c.want)
		}
	}
}
