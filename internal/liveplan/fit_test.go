package liveplan

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
)

// A live plan of multi-byte characters is cut to each forge's limit in
// characters, at a line's end, valid UTF-8; GitLab's note is not cut at
// GitHub's limit.
func TestFitPerForge(t *testing.T) {
	line := strings.Repeat("⚠️ drift é", 20) + "\n"
	body := strings.Repeat(line, 200_000/utf8.RuneCountInString(line))
	for _, c := range []struct {
		forge string
		max   int
		cut   bool
	}{{"github", github.MaxCommentChars, true}, {"gitlab", gitlab.MaxCommentChars, false}} {
		got := Fit(body, c.max)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > c.max {
			t.Errorf("%s: %d characters (limit %d), valid UTF-8 %v", c.forge, utf8.RuneCountInString(got), c.max, utf8.ValidString(got))
		}
		if cut := got != body; cut != c.cut {
			t.Errorf("%s: cut %v, want %v", c.forge, cut, c.cut)
		}
		if c.cut && !strings.Contains(got, line+"\n…the live plan is too long") {
			t.Errorf("%s: not cut at a line's end:\n%s", c.forge, got[len(got)-300:])
		}
	}
}
