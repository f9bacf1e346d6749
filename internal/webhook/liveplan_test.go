package webhook

import (
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestLivePlanDeliveries(t *testing.T) {
	const headSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	cfg := testCfg(t)
	targets := cfg.Targets("codertocat/hello-world", "main")
	pr := func(action string, edits map[string]any) map[string]any {
		m := map[string]any{"action": action, "pull_request.base.ref": "main", "pull_request.head.sha": headSHA}
		for k, v := range edits {
			m[k] = v
		}
		return m
	}
	live := func(id string) []Intent {
		return []Intent{{Repo: "codertocat/hello-world", Branch: "main", SHA: headSHA, PR: 2,
			CloneURL: "http://127.0.0.1:9/git/codertocat/hello-world.git", DeliveryID: id, Targets: targets, LivePlan: true}}
	}
	for _, tc := range []struct {
		name      string
		edits     map[string]any
		noLive    bool // the handler has no LivePlan function
		status    int
		body      string
		wantLive  []Intent
		wantDepls int
	}{
		{name: "opened", edits: pr("opened", nil), status: http.StatusAccepted, body: "accepted: live plan of codertocat/hello-world#2 at " + headSHA, wantLive: live("d")},
		{name: "synchronize", edits: pr("synchronize", nil), status: http.StatusAccepted, wantLive: live("d")},
		{name: "reopened", edits: pr("reopened", nil), status: http.StatusAccepted, wantLive: live("d")},
		{name: "edited is not a new head", edits: pr("edited", nil), status: http.StatusOK, body: "ignored: pull request edited"},
		{name: "no live plans configured", edits: pr("opened", nil), noLive: true, status: http.StatusOK, body: "ignored: pull request opened"},
		{name: "a branch without targets", edits: pr("opened", map[string]any{"pull_request.base.ref": "other"}), status: http.StatusOK, body: "ignored: branch other of"},
		{name: "a head that is not a SHA", edits: pr("opened", map[string]any{"pull_request.head.sha": "main"}), status: http.StatusBadRequest, body: `"main" is not a commit SHA`},
		{name: "a merge still deploys", edits: pr("closed", map[string]any{"pull_request.merged": true, "pull_request.merge_commit_sha": mergeSHA}), status: http.StatusAccepted, wantDepls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var mu sync.Mutex
			var got []Intent
			o := Options{}
			if !tc.noLive {
				o.LivePlan = func(i Intent) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, i)
				}
			}
			w := serve(rec.handler(t, o), post("pull_request", "d", fixture(t, "pull_request/opened.payload.json", tc.edits)))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("answer %d %q, want %d containing %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			if !reflect.DeepEqual(got, tc.wantLive) {
				t.Errorf("live plans\n%+v\nwant\n%+v", got, tc.wantLive)
			}
			if len(rec.intents) != tc.wantDepls {
				t.Errorf("deploys enqueued: %+v, want %d", rec.intents, tc.wantDepls)
			}
		})
	}
}
