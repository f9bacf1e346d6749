package deploys

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// The record of the steps since what runs, from GitHub's API: each merged
// pull request once (a rebase merge names it for each of its commits),
// with its base, head, merge commit, merger, commit count and reviews
// oldest first; a commit no pull request merged, and an open pull request
// containing a commit, add nothing. A permission GitHub answers 404 for
// (a bot, a deleted user, a login it does not know) is an error the
// deployer counts as not a writer, never "read".
func TestPulls(t *testing.T) {
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("tok", githubapi.Identity{Login: "kplan[bot]"})
	c := func(n int) string { return strings.Repeat(string(rune('a'+n)), 40) }
	base, head := c(0), c(1)
	gh.MergePull("octo", "cfg", 3, "lead", base, head, 1, c(2))
	gh.MergePull("octo", "cfg", 4, "lead", c(2), c(3), 2, c(4), c(5)) // a rebase merge: two commits
	gh.SeedPullForCommit("octo", "cfg", c(6), githubapi.PullRequest{Number: 9, State: "open"})
	gh.SubmitReview("octo", "cfg", 3, "alice", "CHANGES_REQUESTED", head)
	gh.SubmitReview("octo", "cfg", 3, "alice", "APPROVED", head)
	gh.SubmitReview("octo", "cfg", 3, "dependabot[bot]", "APPROVED", head)
	gh.SetPermission("octo", "cfg", "alice", "write")
	gh.SubmitReview("octo", "cfg", 3, "gone", "APPROVED", head)
	gh.DeleteUser("gone")
	r := NewReporter(gh.Client("tok"), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	tg := deployer.Target{Target: config.Target{Name: "prod"}, Repo: "octo/cfg"}

	pulls, err := r.Pulls(ctx, tg, []string{c(2), c(4), c(5), c(6), c(7)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pulls) != 2 {
		t.Fatalf("pulls %+v, want #3 and #4", pulls)
	}
	p3, p4 := pulls[0], pulls[1]
	if p3.Number != 3 || p3.Base.SHA != base || p3.Head.SHA != head || p3.Merge != c(2) || p3.MergedBy.Login != "lead" || p3.MergedAt == "" || p3.Commits != 1 {
		t.Errorf("#3: %+v", p3)
	}
	var states []string
	for _, rv := range p3.Reviews {
		states = append(states, rv.User.Login+"="+rv.State)
	}
	if got := strings.Join(states, " "); got != "alice=CHANGES_REQUESTED alice=APPROVED dependabot[bot]=APPROVED gone=APPROVED" {
		t.Errorf("#3's reviews: %s", got)
	}
	if p4.Number != 4 || p4.Merge != c(5) || p4.Commits != 2 || len(p4.Reviews) != 0 {
		t.Errorf("#4: %+v", p4)
	}
	if err := (&approval.Record{Pulls: pulls}).Validate(); err != nil {
		t.Errorf("the record is not one the rule reads: %v", err)
	}
	for login, want := range map[string]string{"alice": "", "dependabot[bot]": "404", "gone": "404", "stranger": "404"} {
		ok, err := r.CanWrite(ctx, tg, login)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) || (login == "alice") != ok {
			t.Errorf("CanWrite(%s) = %v, %v; want an error with %q", login, ok, err, want)
		}
	}
}
