package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

// One endpoint, two forges: each repository deploys from its own forge's
// deliveries only, each forge's deliveries verified with its own secret.
func TestEachRepositoryDeploysFromItsOwnForge(t *testing.T) {
	cfg, err := config.Parse("w.yaml", []byte(testConfig+`  - name: platform/team/infra
    forge: gitlab
    branches:
      - name: main
        targets:
          - {name: gl, overlay: app}
`))
	if err != nil {
		t.Fatal(err)
	}
	const glSecret = "gitlab token"
	var got []Intent
	h, err := New(Options{Secret: []byte(secret), Config: cfg, Enqueue: func(i Intent) { got = append(got, i) },
		Receiver: forge.Routes{
			{Forge: config.GitHub, Header: "X-GitHub-Event", Receiver: github.Receiver{}},
			{Forge: config.GitLab, Header: "X-Gitlab-Event", Receiver: gitlab.Receiver{}, Secret: []byte(glSecret)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	glMerge := func(project, token string) *http.Request {
		body := gitlabapi.MergeRequestHook(gitlabapi.MergeRequestEvent{Project: project, IID: 4, Action: "merge", TargetBranch: "main",
			HeadSHA: pushSHA, MergeCommitSHA: mergeSHA})
		r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		r.Header.Set("X-Gitlab-Event", gitlab.MergeRequestHook)
		r.Header.Set("X-Gitlab-Token", token)
		return r
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		body   string
	}{
		{"GitLab's merge of its project", glMerge("Platform/Team/Infra", glSecret), http.StatusAccepted, "1 target(s) of platform/team/infra@main"},
		{"GitLab's delivery with GitHub's secret", glMerge("platform/team/infra", secret), http.StatusUnauthorized, "invalid signature"},
		{"GitLab's delivery naming the GitHub repository", glMerge("codertocat/hello-world", glSecret), http.StatusOK, "configured on github, and this delivery came from gitlab"},
		{"GitHub's push naming the GitLab project", post("push", "d-1", fixture(t, "push/payload.json", map[string]any{
			"repository.full_name": "platform/team/infra", "ref": "refs/heads/main"})), http.StatusOK, "configured on gitlab, and this delivery came from github"},
	} {
		w := serve(h, tc.req)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s: HTTP %d %q, want %d %q", tc.name, w.Code, w.Body.String(), tc.status, tc.body)
		}
	}
	if len(got) != 1 || got[0].Repo != "platform/team/infra" || got[0].SHA != mergeSHA || got[0].PR != 4 || got[0].CloneURL != "https://gitlab.com/platform/team/infra.git" {
		t.Errorf("intents %+v", got)
	}
}
