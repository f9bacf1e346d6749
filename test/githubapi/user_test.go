package githubapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/test/githubapi"
)

// TestGetUserAnswersUserTokensOnly pins GET /user as GitHub answers it: a
// user's token gets its login, an installation token (GITHUB_TOKEN, an
// App's) 403; and a comment's author is its token's identity.
func TestGetUserAnswersUserTokensOnly(t *testing.T) {
	s := newServer(t)
	s.AddToken("ghp_alice", githubapi.Identity{Login: "alice"})
	ctx := context.Background()

	u, _, err := s.Client("ghp_alice").Users.Get(ctx, "")
	if err != nil || u.GetLogin() != "alice" || u.GetType() != "User" || u.GetID() == 0 {
		t.Errorf("PAT: GET /user = %+v, %v; want alice, a User", u, err)
	}
	_, _, err = s.Client(token).Users.Get(ctx, "")
	if statusOf(err) != http.StatusForbidden {
		t.Errorf("installation token: GET /user err = %v, want 403", err)
	}

	body := "hi"
	for tok, want := range map[string]string{"ghp_alice": "alice", token: "github-actions[bot]"} {
		c, _, err := s.Client(tok).Issues.CreateComment(ctx, owner, repo, 5, &github.IssueComment{Body: &body})
		if err != nil || c.GetUser().GetLogin() != want {
			t.Errorf("comment by %s: user %q, %v; want %q", tok, c.GetUser().GetLogin(), err, want)
		}
	}
}
