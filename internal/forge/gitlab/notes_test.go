package gitlab_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

const (
	project = "platform/team/infra"
	iid     = 17
	marker  = markers.PlanMarker
	bot     = "project_15_bot_3f2a"
)

func newServer(t *testing.T) *gitlabapi.Server {
	t.Helper()
	s := gitlabapi.New()
	t.Cleanup(s.Close)
	s.AddToken("glpat-writer", gitlabapi.User{Username: bot})
	s.AddToken("glpat-reader", gitlabapi.User{Username: "project_15_bot_reader", ReadOnly: true})
	return s
}

func poster(t *testing.T, s *gitlabapi.Server, token string) *gitlab.Poster {
	t.Helper()
	p, err := gitlab.NewCommenter(s.APIURL(), token)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// One note per marker: posted by the first run, edited by the next, a
// stranger's note with the marker (posted first) left alone.
func TestNoteCreatedThenEdited(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	bait := s.SeedNote(project, iid, "mallory", marker+"\nnothing to see")
	first, err := poster(t, s, "glpat-writer").Upsert(ctx, project, iid, marker, "plan v1")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.Author != bot || first.Self != bot || first.CommentID == bait.ID {
		t.Fatalf("first = %+v, want a new note by %s", first, bot)
	}
	second, err := poster(t, s, "glpat-writer").Upsert(ctx, project, iid, marker, "plan v2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Created || second.CommentID != first.CommentID {
		t.Fatalf("second = %+v, want an edit of %d", second, first.CommentID)
	}
	ns := s.Notes(project, iid)
	if len(ns) != 2 || ns[0] != bait || ns[1].Body != marker+"\nplan v2" {
		t.Errorf("notes = %+v", ns)
	}
	s.ResetRequests()
	again, err := poster(t, s, "glpat-writer").Upsert(ctx, project, iid, marker, "plan v2")
	if err != nil || !again.Unchanged {
		t.Fatalf("again = %+v, %v", again, err)
	}
	for _, r := range s.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("an unchanged note was written: %s %s", r.Method, r.Path)
		}
	}
}

// A marked note far back (page 3 at 100 a page) is found, not duplicated.
func TestMarkedNoteOnPageThree(t *testing.T) {
	s := newServer(t)
	for i := range 250 {
		body := fmt.Sprintf("chatter %d", i)
		if i == 220 {
			body = marker + "\nold plan"
		}
		s.SeedNote(project, iid, bot, body)
	}
	target := s.Notes(project, iid)[220]
	res, err := poster(t, s, "glpat-writer").Upsert(context.Background(), project, iid, marker, "new plan")
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.CommentID != target.ID {
		t.Fatalf("res = %+v, want an edit of %d", res, target.ID)
	}
	if ns := s.Notes(project, iid); len(ns) != 250 || ns[220].Body != marker+"\nnew plan" {
		t.Errorf("%d notes, note 220 %q", len(ns), ns[220].Body)
	}
}

// A token that may not write notes (a reporter's, a job token's) is
// forge.ErrNoPermission, which the CI entry point warns about; a body
// over the limit is forge.ErrTooLong; nothing is written either way.
func TestNoteErrors(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	_, err := poster(t, s, "glpat-reader").Upsert(ctx, project, iid, marker, "plan")
	if !errors.Is(err, forge.ErrNoPermission) {
		t.Errorf("read-only token: %v, want ErrNoPermission", err)
	}
	_, err = poster(t, s, "glpat-writer").Upsert(ctx, project, iid, marker, strings.Repeat("x", gitlab.MaxCommentChars))
	if !errors.Is(err, forge.ErrTooLong) {
		t.Errorf("long body: %v, want ErrTooLong", err)
	}
	if _, err := poster(t, s, "glpat-revoked").Upsert(ctx, project, iid, marker, "plan"); err == nil {
		t.Error("an unknown token posted")
	}
	if ns := s.Notes(project, iid); len(ns) != 0 {
		t.Errorf("notes written: %+v", ns)
	}
}

// tokenOfTheMoment is a TokenSource whose token a test swaps, as a
// rotated token file's.
type tokenOfTheMoment struct{ token atomic.Value }

func (s *tokenOfTheMoment) Token(context.Context, string) (string, error) {
	return s.token.Load().(string), nil
}

// TestClientFromTakesTheTokenOfTheMoment pins that a client made by
// NewClientFrom asks its source for the token at each request: the
// webhook's GitLab token file, rotated, takes effect without a restart.
func TestClientFromTakesTheTokenOfTheMoment(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	src := &tokenOfTheMoment{}
	src.token.Store("glpat-old")
	gl, err := gitlab.NewClientFrom(s.APIURL(), src)
	if err != nil {
		t.Fatal(err)
	}
	p := gitlab.NewPoster(gl)
	if _, err := p.Upsert(ctx, project, iid, marker, "plan v1"); err == nil {
		t.Fatal("a token GitLab does not know posted a note")
	}
	src.token.Store("glpat-writer") // the Secret rotated
	got, err := p.Upsert(ctx, project, iid, marker, "plan v1")
	if err != nil || got.Author != bot {
		t.Fatalf("after the rotation: %+v, %v; want a note by %s", got, err, bot)
	}
}

// GitLab's note limit is its own (1,000,000 characters), not GitHub's
// 65,536: a note of multi-byte characters past GitHub's limit posts
// whole, counted in characters, not bytes.
func TestNoteNotCutAtGitHubsLimit(t *testing.T) {
	s := newServer(t)
	body := marker + "\n" + strings.Repeat("é", 3*65536)
	if _, err := poster(t, s, "glpat-writer").Upsert(context.Background(), project, iid, marker, body); err != nil {
		t.Fatalf("a %d-character note: %v", len([]rune(body)), err)
	}
	if ns := s.Notes(project, iid); len(ns) != 1 || ns[0].Body != body {
		t.Errorf("the note was not kept whole (%d notes)", len(ns))
	}
}
