package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Record is what the forge records of a branch's pull requests, in the
// shapes of GitHub's API: each merged pull request (GET …/pulls/{n}) with
// its reviews (GET …/pulls/{n}/reviews), and the permission of each
// reviewer (GET …/collaborators/{user}/permission). A login missing from
// Permissions is one whose permission could not be read (GitHub answers
// 404 for bots and deleted users): it counts as not a writer.
type Record struct {
	Pulls       []Pull            `json:"pulls"`
	Permissions map[string]string `json:"permissions"`
	// Overrides are commits a writer let apply without approval (the
	// webhook's kplan/apply-unreviewed label): the commit's tree counts
	// as approved.
	Overrides []Override `json:"overrides,omitempty"`
}

// Pull is one pull request as GitHub's pulls API shows it.
type Pull struct {
	Number int    `json:"number"`
	Base   Ref    `json:"base"`
	Head   Ref    `json:"head"`
	Merge  string `json:"merge_commit_sha,omitempty"`
	// MergedAt is empty for a pull request not merged: GitHub names a
	// test merge in merge_commit_sha then, which is no step of the branch.
	MergedAt string `json:"merged_at,omitempty"`
	// Commits is how many commits the pull request has: a rebase merge
	// puts as many on the branch, the last one merge_commit_sha.
	Commits int      `json:"commits,omitempty"`
	Reviews []Review `json:"reviews,omitempty"`
	// MergedBy is who merged the pull request: a user who may push.
	MergedBy User `json:"merged_by,omitzero"`
	// PlanHead (kplan's, not GitHub's) is the head kplan's plan comment
	// rendered, for a pull request with no review at all: in a repository
	// that does not review, the writer who merged it approved what the
	// plan showed, and nothing else.
	PlanHead string `json:"plan_head,omitempty"`
}

// Ref is a pull request's base or head.
type Ref struct {
	Ref string `json:"ref,omitempty"`
	SHA string `json:"sha"`
}

// Review is one review of a pull request.
type Review struct {
	User        User   `json:"user"`
	State       string `json:"state"`
	CommitID    string `json:"commit_id"`
	SubmittedAt string `json:"submitted_at,omitempty"`
}

// User is a forge user.
type User struct {
	Login string `json:"login"`
}

// Override is a commit a user let apply unreviewed.
type Override struct {
	Commit string `json:"commit"`
	User   User   `json:"user"`
}

// The review states of GitHub's reviews API.
const (
	Approved         = "APPROVED"
	ChangesRequested = "CHANGES_REQUESTED"
	Commented        = "COMMENTED"
	Dismissed        = "DISMISSED"
	Pending          = "PENDING"
)

var (
	states      = []string{Approved, ChangesRequested, Commented, Dismissed, Pending}
	permissions = []string{"admin", "maintain", "write", "triage", "read", "none"}
	objectName  = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// Parse reads a review record: unknown fields are ignored (GitHub's
// objects have many), but what the rule reads must be well-formed.
func Parse(data []byte) (*Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("the review record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the review record: more than one JSON value")
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("the review record: %w", err)
	}
	return &r, nil
}

// Validate checks what the rule reads: commit SHAs in full, known review
// states and permissions, pull request numbers each once.
func (r *Record) Validate() error {
	seen := map[int]bool{}
	for i, p := range r.Pulls {
		if p.Number <= 0 {
			return fmt.Errorf("pulls[%d]: number %d: want a positive pull request number", i, p.Number)
		}
		if seen[p.Number] {
			return fmt.Errorf("pulls[%d]: #%d appears twice", i, p.Number)
		}
		seen[p.Number] = true
		if p.Commits < 0 {
			return fmt.Errorf("#%d: commits %d: want a count", p.Number, p.Commits)
		}
		for name, sha := range map[string]string{"base.sha": p.Base.SHA, "head.sha": p.Head.SHA, "merge_commit_sha": p.Merge, "plan_head": p.PlanHead} {
			if sha != "" && !objectName.MatchString(sha) {
				return fmt.Errorf("#%d: %s %q: want a full commit SHA", p.Number, name, sha)
			}
		}
		if p.MergedAt != "" {
			if _, err := time.Parse(time.RFC3339, p.MergedAt); err != nil {
				return fmt.Errorf("#%d: merged_at: %w", p.Number, err)
			}
		}
		for j, rv := range p.Reviews {
			if rv.User.Login == "" {
				return fmt.Errorf("#%d: reviews[%d]: no user.login", p.Number, j)
			}
			if !slices.Contains(states, rv.State) {
				return fmt.Errorf("#%d: reviews[%d]: state %q: want one of %s", p.Number, j, rv.State, strings.Join(states, ", "))
			}
			if rv.CommitID != "" && !objectName.MatchString(rv.CommitID) {
				return fmt.Errorf("#%d: reviews[%d]: commit_id %q: want a full commit SHA", p.Number, j, rv.CommitID)
			}
			if rv.SubmittedAt != "" {
				if _, err := time.Parse(time.RFC3339, rv.SubmittedAt); err != nil {
					return fmt.Errorf("#%d: reviews[%d]: submitted_at: %w", p.Number, j, err)
				}
			}
		}
	}
	for login, perm := range r.Permissions {
		if login == "" || !slices.Contains(permissions, perm) {
			return fmt.Errorf("permissions[%q] = %q: want one of %s", login, perm, strings.Join(permissions, ", "))
		}
	}
	for i, o := range r.Overrides {
		if !objectName.MatchString(o.Commit) || o.User.Login == "" {
			return fmt.Errorf("overrides[%d]: want a full commit SHA and a user.login", i)
		}
	}
	return nil
}

// writer says whether a permission lets its user push, hence approve.
func writer(perm string) bool {
	return perm == "admin" || perm == "maintain" || perm == "write"
}

// Approval is a standing approval: who approved which head.
type Approval struct {
	By     string `json:"by"`
	Commit string `json:"commit"`
	// Plan: a pull request with no review, merged by By, a writer, after
	// kplan's plan comment showed Commit.
	Plan bool `json:"plan,omitempty"`
}

// Standing are the approvals of p that count, in the order given, and
// the approvers whose permission could not be read: per reviewer, the
// latest review that approves, requests changes or was dismissed decides
// (comments and pending reviews decide nothing); it counts when it
// approves a commit and its user may write.
func (r *Record) Standing(p Pull) (approved []Approval, unreadable []string) {
	reviews := slices.Clone(p.Reviews)
	// GitHub lists reviews oldest first; submitted_at orders them when
	// given (RFC 3339 in UTC sorts as text).
	slices.SortStableFunc(reviews, func(a, b Review) int {
		if a.SubmittedAt == "" || b.SubmittedAt == "" {
			return 0
		}
		ta, _ := time.Parse(time.RFC3339, a.SubmittedAt)
		tb, _ := time.Parse(time.RFC3339, b.SubmittedAt)
		return ta.Compare(tb)
	})
	latest := map[string]Review{}
	var order []string
	for _, rv := range reviews {
		if rv.State == Commented || rv.State == Pending {
			continue
		}
		if _, ok := latest[rv.User.Login]; !ok {
			order = append(order, rv.User.Login)
		}
		latest[rv.User.Login] = rv
	}
	var plan *Approval
	if len(p.Reviews) == 0 && p.PlanHead != "" && p.MergedBy.Login != "" {
		// No review of any state: the merger approved what the plan showed.
		order, plan = append(order, p.MergedBy.Login), &Approval{By: p.MergedBy.Login, Commit: p.PlanHead, Plan: true}
	}
	for _, login := range order {
		a := plan
		if rv := latest[login]; a == nil {
			if rv.State != Approved || rv.CommitID == "" {
				continue
			}
			a = &Approval{By: login, Commit: rv.CommitID}
		}
		perm, ok := r.Permissions[login]
		if !ok {
			unreadable = append(unreadable, login)
			continue
		}
		if writer(perm) {
			approved = append(approved, *a)
		}
	}
	return approved, unreadable
}
