package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
)

// labeled is GitHub's delivery of sender adding label to pull request 1
// of the test repository, merged or not.
func labeled(t *testing.T, label, sender string, merged bool) *http.Request {
	t.Helper()
	body := fixture(t, "pull_request/closed.payload.json", map[string]any{"action": "labeled", "sender.login": sender,
		"pull_request.merged": merged, "pull_request.merge_commit_sha": mergeSHA, "pull_request.base.ref": "main"})
	var doc map[string]any
	json.Unmarshal(body, &doc)
	doc["label"] = map[string]any{"name": label}
	body, _ = json.Marshal(doc)
	return post("pull_request", "d-"+label+sender, body)
}

// The deploy-now label (its configured name, in any case) on a merged
// pull request is an intent naming who added it, for the deployer to
// check that they may write; on a pull request not merged, or another
// label, nothing.
func TestDeployNowLabel(t *testing.T) {
	cfg, err := config.Parse("w.yaml", []byte(testConfig+"deployNowLabel: ship-it\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		body   string
		by     string
	}{
		{"merged", labeled(t, "Ship-It", "alice", true), http.StatusAccepted, "accepted", "alice"},
		{"not merged", labeled(t, "ship-it", "alice", false), http.StatusOK, "ignored: label ship-it on a pull request not merged (add it once merged)", ""},
		{"the default name, not configured", labeled(t, "kplan/deploy-now", "alice", true), http.StatusOK, "ignored: pull request labeled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			w := serve(rec.handler(t, Options{Config: cfg}), tc.req)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("HTTP %d %q, want %d %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			if tc.by == "" {
				if len(rec.intents) != 0 {
					t.Errorf("intents %+v, want none", rec.intents)
				}
				return
			}
			if len(rec.intents) != 1 || rec.intents[0].DeployNowBy != tc.by || rec.intents[0].SHA != mergeSHA || rec.intents[0].PR == 0 || rec.intents[0].AcknowledgedBy != "" {
				t.Errorf("intents %+v, want one deploying %s now by %s", rec.intents, mergeSHA, tc.by)
			}
		})
	}
}
