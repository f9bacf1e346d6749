package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const (
	owner  = "acme"
	repo   = "infra"
	pr     = 17
	writer = "ghs_writer"
	fork   = "ghs_fork"
	marker = markers.PlanMarker
	// bot is whom writer's and fork's comments are by: GitHub will not
	// tell an installation token (GET /user answers 403).
	bot = "github-actions[bot]"
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

	first, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, marker, "plan v1")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.CommentID == 0 || first.URL == "" {
		t.Fatalf("first = %+v, want a created comment", first)
	}

	second, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, marker, "plan v2")
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
	if _, err := github.NewPoster(s.Client(writer), bot).Upsert(context.Background(), owner+"/"+repo, pr, marker, body); err != nil {
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
	first, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, marker, "same")
	if err != nil {
		t.Fatal(err)
	}
	s.ResetRequests()
	again, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, marker, "same")
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

	plan, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, marker, "plan")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := github.NewPoster(gh, bot).Upsert(ctx, owner+"/"+repo, pr, deployMarker, "deployed")
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

	res, err := github.NewPoster(s.Client(writer), bot).Upsert(context.Background(), owner+"/"+repo, pr, marker, "new plan")
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
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/comments") {
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
	res, err := github.NewPoster(s.Client(writer), bot).Upsert(context.Background(), owner+"/"+repo, pr, marker, "C")
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
		{name: "too long", token: writer, body: strings.Repeat("x", github.MaxCommentChars), tooLong: true},
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
			_, err := github.NewPoster(s.Client(tt.token), bot).Upsert(context.Background(), owner+"/"+repo, pr, m, body)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, forge.ErrNoPermission); got != tt.noPerm {
				t.Errorf("errors.Is(%v, ErrNoPermission) = %v, want %v", err, got, tt.noPerm)
			}
			if got := errors.Is(err, forge.ErrTooLong); got != tt.tooLong {
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
	_, err := github.NewPoster(s.Client(writer), bot).Upsert(ctx, owner+"/"+repo, pr, marker, "plan")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestStrangersMarkedCommentIsNotTaken pins that a marker in someone
// else's comment is not kplan's: a stranger who posts one first gets
// neither the plan written into their comment nor it withheld.
func TestStrangersMarkedCommentIsNotTaken(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	bait := s.SeedComment(owner, repo, pr, "mallory", marker+"\nplan: nothing to see")
	p := github.NewPoster(s.Client(writer), bot)
	first, err := p.Upsert(ctx, owner+"/"+repo, pr, marker, "plan v1")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.CommentID == bait.ID || first.Author != bot || first.Self != bot {
		t.Fatalf("first = %+v, want a new comment by %s", first, bot)
	}
	second, err := github.NewPoster(s.Client(writer), bot).Upsert(ctx, owner+"/"+repo, pr, marker, "plan v2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Created || second.CommentID != first.CommentID {
		t.Fatalf("second = %+v, want an edit of %d", second, first.CommentID)
	}
	cs := s.Comments(owner, repo, pr)
	if len(cs) != 2 || cs[0] != bait || cs[1].Body != marker+"\nplan v2" {
		t.Errorf("comments = %+v, want mallory's untouched and kplan's with plan v2", cs)
	}
}

// TestSelf pins whose marked comments a Poster edits: GET /user's login
// for a user's token, else the login it was given, else none (it posts
// a new comment and learns its author from GitHub's answer). Marked
// comments of others are never edited.
func TestSelf(t *testing.T) {
	tests := []struct {
		name, token, as string
		strangers       []string // post marked comments first
		fail            int      // GET /user answers this status first
		wantSelf        string
		wantErr         bool
		wantEdits       bool // the first Upsert finds the token's comment
	}{
		{name: "user token", token: "ghp_alice", as: bot, strangers: []string{"mallory", bot}, wantSelf: "alice", wantEdits: true},
		{name: "installation token, told", token: writer, as: bot, strangers: []string{"mallory", "alice"}, wantSelf: bot, wantEdits: true},
		{name: "installation token, told wrong", token: writer, as: "wrong[bot]", strangers: []string{"mallory"}, wantSelf: "wrong[bot]"},
		{name: "installation token, not told", token: writer, strangers: []string{"mallory", "alice"}},
		{name: "GET /user fails", token: writer, as: bot, fail: http.StatusBadGateway, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.AddToken("ghp_alice", githubapi.Identity{Login: "alice"})
			ctx := context.Background()
			for _, login := range tt.strangers {
				s.SeedComment(owner, repo, pr, login, marker+"\nby "+login)
			}
			var own githubapi.Comment
			if tt.wantEdits {
				own = s.SeedComment(owner, repo, pr, tt.wantSelf, marker+"\nold plan")
			}
			strangers := s.Comments(owner, repo, pr)[:len(tt.strangers)]
			s.FailNext(min(tt.fail, 1), tt.fail)
			p := github.NewPoster(s.Client(tt.token), tt.as)
			self, err := p.Self(ctx)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Self = %q, want an error", self)
				}
				return
			}
			if err != nil || self != tt.wantSelf {
				t.Fatalf("Self = %q, %v; want %q", self, err, tt.wantSelf)
			}
			res, err := p.Upsert(ctx, owner+"/"+repo, pr, marker, "plan")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantEdits && (res.Created || res.CommentID != own.ID || res.Author != tt.wantSelf):
				t.Errorf("res = %+v, want an edit of %d by %s", res, own.ID, tt.wantSelf)
			case !tt.wantEdits && (!res.Created || res.Author != bot || res.Self != tt.wantSelf):
				t.Errorf("res = %+v, want a new comment by %s, Self %q", res, bot, tt.wantSelf)
			}
			// Whatever was assumed, the Poster now knows: its next
			// Upsert edits the comment it holds.
			again, err := p.Upsert(ctx, owner+"/"+repo, pr, marker, "plan 2")
			if err != nil || again.Created || again.CommentID != res.CommentID {
				t.Errorf("again = %+v, %v; want an edit of %d", again, err, res.CommentID)
			}
			after := s.Comments(owner, repo, pr)
			if !slices.Equal(after[:len(strangers)], strangers) {
				t.Errorf("strangers' comments changed: %+v", after[:len(strangers)])
			}
		})
	}
}
