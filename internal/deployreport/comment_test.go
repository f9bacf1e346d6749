package deployreport

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
)

// A deploy comment past a forge's limit is cut to that forge's limit, in
// characters, never inside one: objects named in multi-byte characters
// leave valid UTF-8 behind. GitLab's note holds what GitHub's comment
// cannot.
func TestCommentCutPerForge(t *testing.T) {
	var objs []deploy.ObjectResult
	for i := range 3000 {
		objs = append(objs, deploy.ObjectResult{Key: fmt.Sprintf("_ConfigMap_app_配置-%04d-%s", i, strings.Repeat("é", 10)), Action: deploy.Configured})
	}
	byTarget := map[string]deployer.Outcome{"prod": {SHA: "0123456789", Result: &deploy.Result{Objects: objs}}}
	whole := Comment(byTarget, 1<<30)
	if n := utf8.RuneCountInString(whole); n <= github.MaxCommentChars || n > gitlab.MaxCommentChars || len(whole) <= n {
		t.Fatalf("the test wants a multi-byte comment between the two limits: %d characters, %d bytes", n, len(whole))
	}
	for _, c := range []struct {
		forge string
		max   int
		cut   bool
	}{{"github", github.MaxCommentChars, true}, {"gitlab", gitlab.MaxCommentChars, false}} {
		body := Comment(byTarget, c.max)
		if !utf8.ValidString(body) || utf8.RuneCountInString(body) > c.max {
			t.Errorf("%s: %d characters (limit %d), valid UTF-8 %v", c.forge, utf8.RuneCountInString(body), c.max, utf8.ValidString(body))
		}
		if cut := strings.Contains(body, "cut to fit the comment size limit"); cut != c.cut || (!cut && body != whole) {
			t.Errorf("%s: cut %v, want %v", c.forge, cut, c.cut)
		}
	}
}

// Clip bounds bytes (forges' status fields) and never cuts a character.
func TestClipKeepsCharactersWhole(t *testing.T) {
	for n := 2; n < 12; n++ {
		got := Clip("ééééééé", n)
		if !utf8.ValidString(got) || len(got) > n-1+len("…") {
			t.Errorf("Clip(%d) = %q", n, got)
		}
	}
}
