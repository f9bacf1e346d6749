package forge

import "testing"

func TestLinks(t *testing.T) {
	for _, tc := range []struct {
		name, base, repo, commitPath, changePath string
		sha                                      string
		n                                        int
		commit, change                           string
	}{
		{"GitHub", "https://github.com", "kplan-dev/kplan", "/commit/%s", "/pull/%d", "abc", 12,
			"https://github.com/kplan-dev/kplan/commit/abc", "https://github.com/kplan-dev/kplan/pull/12"},
		{"GitLab subgroup, trailing slash", "https://gitlab.example.com/", "group/sub/app", "/-/commit/%s", "/-/merge_requests/%d", "abc", 3,
			"https://gitlab.example.com/group/sub/app/-/commit/abc", "https://gitlab.example.com/group/sub/app/-/merge_requests/3"},
		{"a push has no change", "https://github.com", "o/r", "/commit/%s", "/pull/%d", "abc", 0,
			"https://github.com/o/r/commit/abc", ""},
		{"no scheme links nowhere", "github.com", "o/r", "/commit/%s", "/pull/%d", "abc", 1, "", ""},
		{"a script URL links nowhere", "javascript:alert(1)", "o/r", "/commit/%s", "/pull/%d", "abc", 1, "", ""},
		{"names are escaped", "https://github.com", "o/r?x", "/commit/%s", "/pull/%d", "a b", 1,
			"https://github.com/o/r%3Fx/commit/a%20b", "https://github.com/o/r%3Fx/pull/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := RepoLinks(tc.base, tc.repo, tc.commitPath, tc.changePath)
			if got := l.Commit(tc.sha); got != tc.commit {
				t.Errorf("Commit = %q, want %q", got, tc.commit)
			}
			if got := l.Change(tc.n); got != tc.change {
				t.Errorf("Change = %q, want %q", got, tc.change)
			}
		})
	}
}
