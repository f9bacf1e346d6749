package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kplan approval in a checkout: a direct push laundered through a later
// approved pull request is refused (exit 3, the push named), the same
// history restricted to an overlay the push does not touch is approved
// (exit 0), and a record that does not parse is an error (exit 1).
func TestApprovalCommand(t *testing.T) {
	dir := initRepo(t, map[string]string{"apps/web/cm.yaml": "v: 1\n", "apps/db/cm.yaml": "v: 1\n"})
	deployed := git(t, dir, "rev-parse", "HEAD")
	write(t, dir, map[string]string{"apps/db/cm.yaml": "v: evil\n"})
	git(t, dir, "commit", "-qam", "direct push")
	push := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "checkout", "-qb", "pr")
	write(t, dir, map[string]string{"apps/web/cm.yaml": "v: 2\n"})
	git(t, dir, "commit", "-qam", "pr")
	head := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "checkout", "-q", "main")
	git(t, dir, "merge", "-q", "--no-ff", "-m", "merge #7", "pr")
	merge := git(t, dir, "rev-parse", "HEAD")
	reviews := filepath.Join(t.TempDir(), "reviews.json")
	rec := `{"pulls": [{"number": 7, "base": {"ref": "main", "sha": "` + push + `"}, "head": {"sha": "` + head + `"},
		"merge_commit_sha": "` + merge + `", "merged_at": "2026-01-01T00:00:00Z",
		"reviews": [{"user": {"login": "alice"}, "state": "APPROVED", "commit_id": "` + head + `"},
		            {"user": {"login": "renovate[bot]"}, "state": "APPROVED", "commit_id": "` + head + `"}]}],
		"permissions": {"alice": "write"}}`
	if err := os.WriteFile(reviews, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"approval", "-C", dir, "--deployed", deployed, "--tip", "main", "--reviews", reviews}
	out, stderr, err := kplan(t, nil, append(args, "-o", "json")...)
	if !errors.Is(err, exitError(3)) {
		t.Fatalf("refused: err %v, want exit 3\n%s%s", err, out, stderr)
	}
	var res struct {
		Verdict string
		Refused struct{ Commit, Kind, Fix string }
		Steps   []struct{ Commit, Kind, Verdict, Carries string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if res.Verdict != "refused" || res.Refused.Commit != push || len(res.Steps) != 2 || res.Steps[1].Carries != push {
		t.Errorf("refused: %+v", res)
	}
	text, _, err := kplan(t, nil, args...)
	if !errors.Is(err, exitError(3)) || !strings.Contains(text, push[:7]) || !strings.Contains(text, "refused") ||
		!strings.Contains(text, "came from no merged pull request") || !strings.Contains(text, "@renovate[bot] could not be read") {
		t.Errorf("text: %v\n%s", err, text)
	}
	text, stderr, err = kplan(t, nil, append(args, "--target", "apps/web")...)
	if err != nil || !strings.Contains(text, "approved: every change to apps/web/") || !strings.Contains(text, "#7") {
		t.Errorf("--target apps/web: %v %s\n%s", err, stderr, text)
	}
	if err := os.WriteFile(reviews, []byte(`{"pulls": [{"number": 7, "head": {"sha": "abc"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kplan(t, nil, args...); err == nil || errors.As(err, new(exitError)) || !strings.Contains(err.Error(), "full commit SHA") {
		t.Errorf("a bad record: %v, want an error (exit 1)", err)
	}
	for _, bad := range [][]string{
		{"approval", "-C", dir, "--tip", "main", "--reviews", reviews},
		{"approval", "-C", dir, "--deployed", "nope", "--tip", "main", "--reviews", reviews},
		{"approval", "-C", dir, "--deployed", deployed, "--tip", "main", "--reviews", reviews, "-o", "yaml"},
	} {
		if _, _, err := kplan(t, nil, bad...); err == nil || errors.As(err, new(exitError)) {
			t.Errorf("kplan %q: %v, want an error (exit 1)", bad, err)
		}
	}
}
