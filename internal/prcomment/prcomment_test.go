package prcomment_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/prcomment"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const (
	owner  = "acme"
	repo   = "infra"
	pr     = 17
	writer = "ghs_writer"
	fork   = "ghs_fork"
	marker = prcomment.PlanMarker
)

func newServer(t *testing.T) *githubapi.Server {
	t.Helper()
	s := githubapi.New()
	t.Cleanup(s.Close)
	s.AddToken(writer, githubapi.Identity{Login: "github-actions[bot]"})
	s.AddToken(fork, githubapi.Identity{Login: "github-actions[bot]", ReadOnly: true})
	return s
}

func TestCreateThenEdit(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(writer)
	foreign := s.SeedComment(owner, repo, pr, "alice", "LGTM, but see the plan")

	first, err := prcomment.Upsert(ctx, gh, owner, repo, pr, marker, "plan v1")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.CommentID == 0 || first.URL == "" {
		t.Fatalf("first = %+v, want a created comment", first)
	}

	second, err := prcomment.Upsert(ctx, gh, owner, repo, pr, marker, "plan v2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Created || second.CommentID != first.CommentID || second.URL != first.URL {
		t.Fatalf("second = %+v, want an edit of %+v", second, first)
	}

	cs := s.Comments(owner, repo, pr)
	if len(cs) != 2 {
		t.Fatalf("%d comments, want the foreign one and one plan", len(cs))
	}
	if cs[0] != foreign {
		t.Errorf("foreign comment changed: %+v", cs[0])
	}
	if want := marker + "\nplan v2"; cs[1].Body != want {
		t.Errorf("plan body = %q, want %q", cs[1].Body, want)
	}
}

func TestBodyAlreadyHasMarker(t *testing.T) {
	s := newServer(t)
	body := "## Plan\n" + marker + "\nno changes"
	if _, err := prcomment.Upsert(context.Background(), s.Client(writer), owner, repo, pr, marker, body); err != nil {
		t.Fatal(err)
	}
	if cs := s.Comments(owner, repo, pr); len(cs) != 1 || cs[0].Body != body {
		t.Errorf("comments = %+v, want the body as given", cs)
	}
}

func TestUnchangedBodyIsNotEdited(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(writer)
	first, err := prcomment.Upsert(ctx, gh, owner, repo, pr, marker, "same")
	if err != nil {
		t.Fatal(err)
	}
	s.ResetRequests()
	again, err := prcomment.Upsert(ctx, gh, owner, repo, pr, marker, "same")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Unchanged || again.Created || again.CommentID != first.CommentID {
		t.Errorf("again = %+v", again)
	}
	for _, r := range s.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("unexpected write %s %s", r.Method, r.Path)
		}
	}
}

func TestMarkersAreIndependent(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	gh := s.Client(writer)
	const deployMarker = "<!-- kplan:deploy -->"

	plan, err := prcomment.Upsert(ctx, gh, owner, repo, pr, marker, "plan")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := prcomment.Upsert(ctx, gh, owner, repo, pr, deployMarker, "deployed")
	if err != nil {
		t.Fatal(err)
	}
	if !deploy.Created || deploy.CommentID == plan.CommentID {
		t.Errorf("deploy = %+v, want a comment of its own", deploy)
	}
	if cs := s.Comments(owner, repo, pr); len(cs) != 2 || cs[0].Body != marker+"\nplan" {
		t.Errorf("comments = %+v", cs)
	}
}

func TestMarkedCommentOnPageThree(t *testing.T) {
	s := newServer(t)
	for i := range 250 {
		body := fmt.Sprintf("chatter %d", i)
		if i == 220 { // page 3 at 100 per page
			body = marker + "\nold plan"
		}
		s.SeedComment(owner, repo, pr, "github-actions[bot]", body)
	}
	target := s.Comments(owner, repo, pr)[220]

	res, err := prcomment.Upsert(context.Background(), s.Client(writer), owner, repo, pr, marker, "new plan")
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.CommentID != target.ID {
		t.Fatalf("res = %+v, want an edit of comment %d", res, target.ID)
	}
	cs := s.Comments(owner, repo, pr)
	if len(cs) != 250 {
		t.Fatalf("%d comments, want 250 (no duplicate)", len(cs))
	}
	if cs[220].Body != marker+"\nnew plan" {
		t.Errorf("comment 220 = %q", cs[220].Body)
	}
	var pages []string
	for _, r := range s.Requests() {
		if r.Method == http.MethodGet {
			pages = append(pages, r.Query)
		}
	}
	if len(pages) != 3 {
		t.Errorf("listed %d pages (%v), want 3", len(pages), pages)
	}
}

func TestFirstMarkedCommentWins(t *testing.T) {
	s := newServer(t)
	first := s.SeedComment(owner, repo, pr, "github-actions[bot]", marker+"\nA")
	second := s.SeedComment(owner, repo, pr, "github-actions[bot]", marker+"\nB")
	res, err := prcomment.Upsert(context.Background(), s.Client(writer), owner, repo, pr, marker, "C")
	if err != nil {
		t.Fatal(err)
	}
	if res.CommentID != first.ID {
		t.Errorf("edited %d, want the oldest %d", res.CommentID, first.ID)
	}
	if cs := s.Comments(owner, repo, pr); cs[1] != second {
		t.Errorf("second marked comment changed: %+v", cs[1])
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		seed    bool // a marked comment exists, so the write is an edit
		failN   int
		marker  string
		body    string
		noPerm  bool
		tooLong bool
	}{
		{name: "read-only token, create", token: fork, noPerm: true},
		{name: "read-only token, edit", token: fork, seed: true, noPerm: true},
		{name: "bad token", token: "nope"},
		{name: "server error", token: writer, failN: 1},
		{name: "empty marker", token: writer, marker: " "},
		{name: "too long", token: writer, body: strings.Repeat("x", prcomment.MaxBodyChars), tooLong: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			if tt.seed {
				s.SeedComment(owner, repo, pr, "github-actions[bot]", marker+"\nold")
			}
			s.FailNext(tt.failN, http.StatusInternalServerError)
			m := marker
			if tt.marker != "" {
				m = tt.marker
			}
			body := "plan"
			if tt.body != "" {
				body = tt.body
			}
			_, err := prcomment.Upsert(context.Background(), s.Client(tt.token), owner, repo, pr, m, body)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, prcomment.ErrNoPermission); got != tt.noPerm {
				t.Errorf("errors.Is(%v, ErrNoPermission) = %v, want %v", err, got, tt.noPerm)
			}
			if got := errors.Is(err, prcomment.ErrTooLong); got != tt.tooLong {
				t.Errorf("errors.Is(%v, ErrTooLong) = %v, want %v", err, got, tt.tooLong)
			}
			if tt.seed {
				if cs := s.Comments(owner, repo, pr); len(cs) != 1 || cs[0].Body != marker+"\nold" {
					t.Errorf("comments changed: %+v", cs)
				}
			} else if n := len(s.Comments(owner, repo, pr)); n != 0 {
				t.Errorf("%d comments created", n)
			}
		})
	}
}

func TestRespectsContext(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := prcomment.Upsert(ctx, s.Client(writer), owner, repo, pr, marker, "plan")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
