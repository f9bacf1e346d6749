package githubapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/test/githubapi"
)

const (
	owner = "acme"
	repo  = "infra"
	token = "ghs_writer"
	roTok = "ghs_fork"
)

func newServer(t *testing.T) *githubapi.Server {
	t.Helper()
	s := githubapi.New()
	t.Cleanup(s.Close)
	s.AddToken(token, githubapi.Identity{Login: "github-actions[bot]"})
	s.AddToken(roTok, githubapi.Identity{Login: "github-actions[bot]", ReadOnly: true})
	return s
}

// statusOf returns the HTTP status of a go-github error, or 0.
func statusOf(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

func TestPaginationAcrossThreePages(t *testing.T) {
	s := newServer(t)
	for i := range 250 {
		s.SeedComment(owner, repo, 7, "someone", fmt.Sprintf("comment %d", i))
	}
	ctx := context.Background()
	gh := s.Client(token)

	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	var got []*github.IssueComment
	var pages []int
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, repo, 7, opts)
		if err != nil {
			t.Fatalf("list page %d: %v", opts.Page, err)
		}
		got = append(got, cs...)
		pages = append(pages, len(cs))
		if opts.Page <= 1 && resp.LastPage != 3 {
			t.Errorf("LastPage = %d, want 3", resp.LastPage)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if fmt.Sprint(pages) != "[100 100 50]" {
		t.Errorf("page sizes = %v, want [100 100 50]", pages)
	}
	if len(got) != 250 {
		t.Fatalf("got %d comments, want 250", len(got))
	}
	for i, c := range got {
		if want := fmt.Sprintf("comment %d", i); c.GetBody() != want {
			t.Fatalf("comment %d body = %q, want %q (oldest first)", i, c.GetBody(), want)
		}
	}
	first := got[0]
	if first.GetID() == 0 || first.GetUser().GetLogin() != "someone" || first.GetUser().GetType() != "User" ||
		first.GetHTMLURL() == "" || first.GetCreatedAt().IsZero() || first.GetUpdatedAt().IsZero() {
		t.Errorf("comment fields not filled: %+v", first)
	}
}

func TestDefaultPageSizeAndEmptyList(t *testing.T) {
	s := newServer(t)
	for range 31 {
		s.SeedComment(owner, repo, 1, "someone", "x")
	}
	gh := s.Client(token)
	cs, resp, err := gh.Issues.ListComments(context.Background(), owner, repo, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 30 || resp.NextPage != 2 {
		t.Errorf("got %d comments, next %d; want 30, 2", len(cs), resp.NextPage)
	}
	cs, resp, err = gh.Issues.ListComments(context.Background(), owner, repo, 2, nil)
	if err != nil || len(cs) != 0 || resp.NextPage != 0 {
		t.Errorf("empty issue: %d comments, next %d, err %v", len(cs), resp.NextPage, err)
	}
}

func TestEnterpriseURLs(t *testing.T) {
	s := newServer(t)
	gh, err := github.NewClient(nil).WithAuthToken(token).WithEnterpriseURLs(s.URL()+"/", s.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := gh.Issues.CreateComment(context.Background(), owner, repo, 3, &github.IssueComment{Body: github.String("hi")})
	if err != nil {
		t.Fatalf("create via /api/v3: %v", err)
	}
	if got := s.Comments(owner, repo, 3); len(got) != 1 || got[0].ID != c.GetID() {
		t.Errorf("stored comments = %+v", got)
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Path != "/repos/acme/infra/issues/3/comments" || last.Method != http.MethodPost {
		t.Errorf("logged %+v, want POST without /api/v3 prefix", last)
	}
}

func TestAuthentication(t *testing.T) {
	s := newServer(t)
	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"bearer", "Bearer " + token, http.StatusOK},
		{"token scheme", "token " + token, http.StatusOK},
		{"missing", "", http.StatusUnauthorized},
		{"unknown token", "Bearer nope", http.StatusUnauthorized},
		{"basic", "Basic " + token, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, s.URL()+"/repos/acme/infra/issues/1/comments", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.want, body)
			}
			if tt.want == http.StatusUnauthorized && !strings.Contains(string(body), `"message":"Bad credentials"`) {
				t.Errorf("body = %s", body)
			}
		})
	}

	// And through go-github.
	_, _, err := s.Client("wrong").Issues.ListComments(context.Background(), owner, repo, 1, nil)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusUnauthorized || er.Message != "Bad credentials" {
		t.Errorf("err = %v, want 401 Bad credentials", err)
	}
}

func TestReadOnlyToken(t *testing.T) {
	s := newServer(t)
	seeded := s.SeedComment(owner, repo, 5, "github-actions[bot]", "old")
	ctx := context.Background()
	gh := s.Client(roTok)

	if _, _, err := gh.Issues.ListComments(ctx, owner, repo, 5, nil); err != nil {
		t.Fatalf("read with read-only token: %v", err)
	}
	writes := map[string]func() error{
		"create comment": func() error {
			_, _, err := gh.Issues.CreateComment(ctx, owner, repo, 5, &github.IssueComment{Body: github.String("x")})
			return err
		},
		"edit comment": func() error {
			_, _, err := gh.Issues.EditComment(ctx, owner, repo, seeded.ID, &github.IssueComment{Body: github.String("x")})
			return err
		},
		"status": func() error {
			_, _, err := gh.Repositories.CreateStatus(ctx, owner, repo, "abc", &github.RepoStatus{State: github.String("success")})
			return err
		},
		"deployment": func() error {
			_, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{Ref: github.String("main")})
			return err
		},
	}
	for name, write := range writes {
		err := write()
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != http.StatusForbidden || er.Message != "Resource not accessible by integration" {
			t.Errorf("%s: err = %v, want 403 Resource not accessible by integration", name, err)
		}
	}
	if got := s.Comments(owner, repo, 5); len(got) != 1 || got[0].Body != "old" {
		t.Errorf("comments changed: %+v", got)
	}
}

func TestCommentSizeLimit(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	tests := []struct {
		name string
		body string
		want int // 0 means success
	}{
		{"at limit", strings.Repeat("a", 65536), 0},
		{"at limit in multibyte characters", strings.Repeat("é", 65536), 0},
		{"one over", strings.Repeat("a", 65537), http.StatusUnprocessableEntity},
		{"empty", "", http.StatusUnprocessableEntity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if tt.want == 0 {
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					return
				}
				if statusOf(err) != tt.want {
					t.Fatalf("%s: err = %v, want status %d", op, err, tt.want)
				}
			}
			c, _, err := gh.Issues.CreateComment(ctx, owner, repo, 9, &github.IssueComment{Body: github.String(tt.body)})
			check("create", err)

			base := s.SeedComment(owner, repo, 10, "github-actions[bot]", "short")
			_, _, err = gh.Issues.EditComment(ctx, owner, repo, base.ID, &github.IssueComment{Body: github.String(tt.body)})
			check("edit", err)
			if tt.want == 0 && c.GetBody() != tt.body {
				t.Errorf("created body has %d bytes, want %d", len(c.GetBody()), len(tt.body))
			}
		})
	}

	// The 422 carries GitHub's error shape.
	_, _, err := gh.Issues.CreateComment(ctx, owner, repo, 9, &github.IssueComment{Body: github.String(strings.Repeat("a", 70000))})
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("err = %v, want *github.ErrorResponse", err)
	}
	if er.Message != "Validation Failed" || len(er.Errors) != 1 || er.DocumentationURL == "" {
		t.Fatalf("error response = %+v", er)
	}
	want := github.Error{Resource: "IssueComment", Code: "custom", Field: "body", Message: "body is too long (maximum is 65536 characters)"}
	if er.Errors[0] != want {
		t.Errorf("errors[0] = %+v, want %+v", er.Errors[0], want)
	}
}

func TestFailNext(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	s.FailNext(2, http.StatusServiceUnavailable)

	for i := range 2 {
		_, _, err := gh.Issues.CreateComment(ctx, owner, repo, 1, &github.IssueComment{Body: github.String("x")})
		if statusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("attempt %d: err = %v, want 503", i, err)
		}
	}
	if _, _, err := gh.Issues.CreateComment(ctx, owner, repo, 1, &github.IssueComment{Body: github.String("x")}); err != nil {
		t.Fatalf("third attempt: %v", err)
	}
	if n := len(s.Comments(owner, repo, 1)); n != 1 {
		t.Errorf("%d comments stored, want 1 (failed requests must not write)", n)
	}
	var statuses []int
	for _, r := range s.Requests() {
		statuses = append(statuses, r.Status)
	}
	if fmt.Sprint(statuses) != "[503 503 201]" {
		t.Errorf("logged statuses = %v", statuses)
	}
	s.ResetRequests()
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests after reset", n)
	}
}

func TestEditComment(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	c := s.SeedComment(owner, repo, 4, "github-actions[bot]", "v1")

	got, _, err := gh.Issues.EditComment(ctx, owner, repo, c.ID, &github.IssueComment{Body: github.String("v2")})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetID() != c.ID || got.GetBody() != "v2" {
		t.Errorf("edited = %+v", got)
	}
	if cs := s.Comments(owner, repo, 4); len(cs) != 1 || cs[0].Body != "v2" {
		t.Errorf("stored = %+v", cs)
	}
	// A comment of another repository is not reachable through this one.
	_, _, err = gh.Issues.EditComment(ctx, owner, "other", c.ID, &github.IssueComment{Body: github.String("v3")})
	if statusOf(err) != http.StatusNotFound {
		t.Errorf("edit via other repo: err = %v, want 404", err)
	}
}

func TestUnknownRoute(t *testing.T) {
	s := newServer(t)
	tests := []struct{ method, path string }{
		{http.MethodGet, "/nope"},
		{http.MethodDelete, "/repos/acme/infra/issues/comments/1"}, // known path, unknown method
		{http.MethodGet, "/repos/acme/infra/issues/x/comments"},    // not a number
	}
	for _, tt := range tests {
		req, err := s.Client(token).NewRequest(tt.method, strings.TrimPrefix(tt.path, "/"), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Client(token).Do(context.Background(), req, nil)
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != http.StatusNotFound || er.Message != "Not Found" {
			t.Errorf("%s %s: err = %v, want 404 Not Found", tt.method, tt.path, err)
		}
	}
}

func TestCommitStatuses(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	sha := strings.Repeat("a", 40)

	st, _, err := gh.Repositories.CreateStatus(ctx, owner, repo, sha, &github.RepoStatus{
		State: github.String("success"), Context: github.String("kplan"),
		Description: github.String("2 changed"), TargetURL: github.String("https://example.test/run"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != "success" || st.GetContext() != "kplan" || st.GetCreator().GetLogin() != "github-actions[bot]" {
		t.Errorf("status = %+v", st)
	}
	if _, _, err := gh.Repositories.CreateStatus(ctx, owner, repo, sha, &github.RepoStatus{State: github.String("pending")}); err != nil {
		t.Fatal(err)
	}
	got := s.Statuses(owner, repo, sha)
	if len(got) != 2 || got[0].Context != "kplan" || got[1].Context != "default" || got[0].TargetURL != "https://example.test/run" {
		t.Errorf("stored = %+v", got)
	}

	for name, rs := range map[string]*github.RepoStatus{
		"bad state":        {State: github.String("done")},
		"long description": {State: github.String("success"), Description: github.String(strings.Repeat("d", 141))},
	} {
		if _, _, err := gh.Repositories.CreateStatus(ctx, owner, repo, sha, rs); statusOf(err) != http.StatusUnprocessableEntity {
			t.Errorf("%s: err = %v, want 422", name, err)
		}
	}
}

func TestDeployments(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(token)
	sha := strings.Repeat("b", 40)

	d1, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{
		Ref: github.String(sha), Environment: github.String("staging"),
		Payload: map[string]string{"overlay": "apps/staging"}, RequiredContexts: &[]string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d1.GetSHA() != sha || d1.GetTask() != "deploy" || d1.GetEnvironment() != "staging" || string(d1.Payload) != `{"overlay":"apps/staging"}` {
		t.Errorf("deployment = %+v payload %s", d1, d1.Payload)
	}
	ds, _, err := gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, d1.GetID(), &github.DeploymentStatusRequest{
		State: github.String("success"), LogURL: github.String("https://example.test/log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ds.GetState() != "success" || ds.GetTargetURL() != "https://example.test/log" || ds.GetEnvironment() != "staging" {
		t.Errorf("deployment status = %+v", ds)
	}

	// A later successful deployment to the same environment makes the first
	// one inactive (auto_inactive defaults to true).
	d2, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{Ref: github.String("main"), Environment: github.String("staging")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, d2.GetID(), &github.DeploymentStatusRequest{State: github.String("success")}); err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, st := range s.DeploymentStatuses(d1.GetID()) {
		states = append(states, st.State)
	}
	if fmt.Sprint(states) != "[success inactive]" {
		t.Errorf("first deployment states = %v, want [success inactive]", states)
	}
	if deps := s.Deployments(owner, repo); len(deps) != 2 || deps[1].SHA != "" || deps[1].Ref != "main" {
		t.Errorf("deployments = %+v", deps)
	}

	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, 42, &github.DeploymentStatusRequest{State: github.String("success")}); statusOf(err) != http.StatusNotFound {
		t.Errorf("status of missing deployment: err = %v, want 404", err)
	}
	if _, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{}); statusOf(err) != http.StatusUnprocessableEntity {
		t.Errorf("deployment without ref: err = %v, want 422", err)
	}
}

func TestPullsForCommit(t *testing.T) {
	s := newServer(t)
	sha := strings.Repeat("c", 40)
	s.SeedPullForCommit(owner, repo, sha, githubapi.PullRequest{Number: 12, Title: "bump", Base: githubapi.Branch{Ref: "main"}})

	prs, _, err := s.Client(token).PullRequests.ListPullRequestsWithCommit(context.Background(), owner, repo, sha, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 1 || prs[0].GetNumber() != 12 || prs[0].GetState() != "open" || prs[0].GetHead().GetSHA() != sha || prs[0].GetBase().GetRef() != "main" {
		t.Errorf("prs = %+v", prs)
	}
	prs, _, err = s.Client(token).PullRequests.ListPullRequestsWithCommit(context.Background(), owner, repo, "unknown", nil)
	if err != nil || len(prs) != 0 {
		t.Errorf("unknown commit: %d prs, err %v", len(prs), err)
	}
}

func TestConcurrentWrites(t *testing.T) {
	s := newServer(t)
	gh := s.Client(token)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			body := github.String(fmt.Sprint(i))
			if _, _, err := gh.Issues.CreateComment(context.Background(), owner, repo, 1, &github.IssueComment{Body: body}); err != nil {
				t.Error(err)
			}
			if _, _, err := gh.Issues.ListComments(context.Background(), owner, repo, 1, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(s.Comments(owner, repo, 1)); n != 20 {
		t.Errorf("%d comments, want 20", n)
	}
	if n := len(s.Requests()); n != 40 {
		t.Errorf("%d requests logged, want 40", n)
	}
}
