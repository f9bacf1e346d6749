package githubapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
)

// The server refuses the next requests as GitHub's secondary rate limit
// does, with the error go-github recognises and the Retry-After it reads;
// a 429 carries the header too. Then it answers normally.
func TestSecondaryRateLimitNext(t *testing.T) {
	for _, tc := range []struct {
		status int
		after  time.Duration
	}{{http.StatusForbidden, 2 * time.Second}, {http.StatusTooManyRequests, 1500 * time.Millisecond}} {
		s := newServer(t)
		ctx := context.Background()
		s.SecondaryRateLimitNext(1, tc.status, tc.after)
		gh := s.Client(token)
		_, resp, err := gh.Repositories.CreateStatus(ctx, owner, repo, "0123456789abcdef0123456789abcdef01234567", &github.RepoStatus{State: github.String("pending")})
		if resp == nil || resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("%d: response %+v, err %v", tc.status, resp, err)
		}
		var abuse *github.AbuseRateLimitError
		if tc.status == http.StatusForbidden && (!errors.As(err, &abuse) || abuse.GetRetryAfter() != 2*time.Second) {
			t.Errorf("403: %T %v, want an AbuseRateLimitError with RetryAfter 2s", err, err)
		}
		if s.RateLimited() != 1 || len(s.Statuses(owner, repo, "0123456789abcdef0123456789abcdef01234567")) != 0 {
			t.Errorf("%d: %d refused, a refused request wrote", tc.status, s.RateLimited())
		}
		// A fresh client (go-github remembers a 403's Retry-After and
		// would not even ask) is answered.
		if _, _, err := s.Client(token).Repositories.CreateStatus(ctx, owner, repo, "0123456789abcdef0123456789abcdef01234567", &github.RepoStatus{State: github.String("pending")}); err != nil {
			t.Errorf("%d: after the limit: %v", tc.status, err)
		}
	}
}

// Deployments and statuses are listed newest first; deployments are
// filtered by environment and sha.
func TestListDeploymentsAndStatuses(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	var ids []int64
	for _, d := range []struct{ sha, env string }{{sha1, "prod"}, {sha2, "prod"}, {sha2, "staging"}} {
		dep, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{Ref: github.String(d.sha), Environment: github.String(d.env),
			Payload: map[string]string{"kplanTarget": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, dep.GetID())
	}
	deps, _, err := gh.Repositories.ListDeployments(ctx, owner, repo, &github.DeploymentsListOptions{Environment: "prod"})
	if err != nil || len(deps) != 2 || deps[0].GetID() != ids[1] || deps[1].GetID() != ids[0] || string(deps[0].Payload) != `{"kplanTarget":"x"}` {
		t.Fatalf("prod deployments: %v %+v", err, deps)
	}
	deps, _, _ = gh.Repositories.ListDeployments(ctx, owner, repo, &github.DeploymentsListOptions{SHA: sha2})
	if len(deps) != 2 {
		t.Errorf("deployments of sha2: %d", len(deps))
	}
	for _, state := range []string{"in_progress", "success"} {
		if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, ids[0], &github.DeploymentStatusRequest{State: github.String(state)}); err != nil {
			t.Fatal(err)
		}
	}
	sts, _, err := gh.Repositories.ListDeploymentStatuses(ctx, owner, repo, ids[0], &github.ListOptions{PerPage: 1})
	if err != nil || len(sts) != 1 || sts[0].GetState() != "success" {
		t.Errorf("newest status: %v %+v", err, sts)
	}
	if _, resp, _ := gh.Repositories.ListDeploymentStatuses(ctx, owner, repo, 42, nil); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("statuses of an unknown deployment: %+v", resp)
	}
	for _, state := range []string{"pending", "success"} {
		gh.Repositories.CreateStatus(ctx, owner, repo, sha1, &github.RepoStatus{State: github.String(state), Context: github.String("kplan/prod")})
	}
	cs, _, err := gh.Repositories.ListStatuses(ctx, owner, repo, sha1, nil)
	if err != nil || len(cs) != 2 || cs[0].GetState() != "success" {
		t.Errorf("commit statuses: %v %+v", err, cs)
	}
}
