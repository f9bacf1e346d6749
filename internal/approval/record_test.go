package approval

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"

// A record in the shapes of GitHub's API parses, unknown fields ignored;
// what the rule reads must be well-formed.
func TestParseRecord(t *testing.T) {
	good := `{"pulls": [{"number": 3, "title": "ignored", "base": {"ref": "main", "sha": "` + sha1 + `"}, "head": {"sha": "` + sha2 + `"},
		"merge_commit_sha": "` + sha2 + `", "merged_at": "2026-01-02T03:04:05Z", "commits": 2,
		"reviews": [{"user": {"login": "alice", "id": 1}, "state": "APPROVED", "commit_id": "` + sha2 + `", "submitted_at": "2026-01-01T00:00:00Z"},
		            {"user": {"login": "bot"}, "state": "APPROVED", "commit_id": "` + sha2 + `"}]}],
		"permissions": {"alice": "write"}}`
	r, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	approved, unreadable := r.Standing(r.Pulls[0])
	if len(approved) != 1 || approved[0].By != "alice" || len(unreadable) != 1 || unreadable[0] != "bot" {
		t.Errorf("standing: %v, unreadable %v", approved, unreadable)
	}
	for name, bad := range map[string]string{
		"short sha":        strings.Replace(good, `"commit_id": "`+sha2+`", "submitted`, `"commit_id": "2222", "submitted`, 1),
		"state":            strings.Replace(good, `"APPROVED"`, `"approved"`, 1),
		"permission":       strings.Replace(good, `"write"}`, `"owner"}`, 1),
		"number":           strings.Replace(good, `"number": 3`, `"number": 0`, 1),
		"merged_at":        strings.Replace(good, `2026-01-02T03:04:05Z`, `yesterday`, 1),
		"two values":       good + "{}",
		"not json":         "pulls:",
		"twice the same #": strings.Replace(good, `}]}],`, `}]}, {"number": 3, "base": {"sha": ""}, "head": {"sha": ""}}],`, 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// A pull request with no review at all, merged by a writer after kplan's
// plan comment showed plan_head, stands approved by the merger at that
// head; any review of any state, a merger who may not write, or no plan
// head, and it does not.
func TestPlanHeadStandsForTheMerger(t *testing.T) {
	p := Pull{Number: 3, MergedBy: User{Login: "lead"}, PlanHead: sha1}
	r := &Record{Permissions: map[string]string{"lead": "maintain", "intern": "triage"}}
	if a, _ := r.Standing(p); len(a) != 1 || a[0] != (Approval{By: "lead", Commit: sha1, Plan: true}) {
		t.Errorf("standing: %+v", a)
	}
	reviewed := p
	reviewed.Reviews = []Review{{User: User{Login: "bob"}, State: Commented, CommitID: sha2}}
	intern := p
	intern.MergedBy.Login = "intern"
	unknown := p
	unknown.MergedBy.Login = "ghost"
	noPlan := p
	noPlan.PlanHead = ""
	for name, q := range map[string]Pull{"reviewed": reviewed, "merged by a triager": intern, "merged by an unreadable user": unknown, "no plan": noPlan} {
		if a, _ := r.Standing(q); len(a) != 0 {
			t.Errorf("%s: standing %+v", name, a)
		}
	}
	if _, unreadable := r.Standing(unknown); len(unreadable) != 1 || unreadable[0] != "ghost" {
		t.Errorf("an unreadable merger is not said: %v", unreadable)
	}
	if _, err := Parse([]byte(`{"pulls": [{"number": 3, "base": {"sha": ""}, "head": {"sha": ""}, "plan_head": "abc"}]}`)); err == nil {
		t.Error("a short plan_head parsed")
	}
}

// FuzzParseRecord: a review record (kplan approval --reviews) never
// panics the parser; what parses survives a round trip, and its standing
// approvals are only writers' approvals of full commit SHAs.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"pulls": [{"number": 1, "base": {"sha": "` + sha1 + `"}, "head": {"sha": "` + sha2 + `"}, "merge_commit_sha": "` + sha2 + `", "merged_at": "2026-01-01T00:00:00Z", "reviews": [{"user": {"login": "a"}, "state": "APPROVED", "commit_id": "` + sha2 + `"}, {"user": {"login": "a"}, "state": "DISMISSED", "commit_id": "` + sha2 + `"}]}], "permissions": {"a": "admin", "b": "read"}}`))
	f.Add([]byte(`{"pulls": [], "permissions": {}, "overrides": [{"commit": "` + sha1 + `", "user": {"login": "b"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Parse(again)
		if err != nil {
			t.Fatalf("a parsed record does not parse again: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(normalize(r), normalize(r2)) {
			t.Errorf("the round trip changed the record:\n%+v\n%+v", r, r2)
		}
		for _, p := range r.Pulls {
			approved, _ := r.Standing(p)
			for _, a := range approved {
				if !writer(r.Permissions[a.By]) || !objectName.MatchString(a.Commit) {
					t.Errorf("#%d: %+v counts", p.Number, a)
				}
			}
		}
	})
}

// normalize makes empty and nil lists and maps alike.
func normalize(r *Record) Record {
	n := *r
	if len(n.Pulls) == 0 {
		n.Pulls = nil
	}
	if len(n.Permissions) == 0 {
		n.Permissions = nil
	}
	if len(n.Overrides) == 0 {
		n.Overrides = nil
	}
	for i := range n.Pulls {
		if len(n.Pulls[i].Reviews) == 0 {
			n.Pulls[i].Reviews = nil
		}
	}
	return n
}
