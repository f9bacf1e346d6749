package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// The plan comment records, hidden, the digest of each overlay's head
// render: the Action's marker equals the JSON's digests, is the same from
// another checkout and from the CLI's full plan, and a change to one
// overlay changes only that overlay's digest.
func TestPlanDigestIsStableAndPerOverlay(t *testing.T) {
	s := newPRStory(t)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})

	reviewed := func(ws string) (markers.Reviewed, map[string]string) {
		t.Helper()
		r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", s.fork, s.pr), gh.URL(), "ghs_test")
		body := planComment(t, r, gh, ws)
		rv, ok, err := markers.ParseReviewed(body)
		if err != nil || !ok {
			t.Fatalf("the plan comment has no reviewed-plan marker (%v):\n%s", err, body)
		}
		var js struct {
			Overlays []struct {
				Path, Digest string
				Skipped      bool
			}
			Settings struct{ RemoteHosts []string }
		}
		data, err := os.ReadFile(r.outputs(t)["report-json"])
		if err != nil || json.Unmarshal(data, &js) != nil {
			t.Fatalf("report-json: %v", err)
		}
		digests := map[string]string{}
		for _, o := range js.Overlays {
			digests[o.Path] = o.Digest
			if o.Skipped {
				digests[o.Path] = "skipped" + o.Digest
			}
		}
		return rv, digests
	}
	first, js := reviewed(checkoutRef(t, s.upstream, "refs/pull/2/merge"))
	if first.Base != s.moved || first.Head != s.merge {
		t.Errorf("marker commits %s..%s, want %s..%s", first.Base, first.Head, s.moved, s.merge)
	}
	a := js["overlays/a"]
	if !strings.HasPrefix(a, "sha256:") || len(a) != 71 || first.Digests["overlays/a"] != markers.ShortDigest(a) {
		t.Errorf("overlay a: JSON digest %q, marker %q", a, first.Digests["overlays/a"])
	}
	// b, which the change cannot affect, was not rendered: it has no
	// digest (not the empty render's), in the JSON and in the marker,
	// which lists it as skipped.
	if js["overlays/b"] != "skipped" || first.Digests["overlays/b"] != "" || !first.WasSkipped("overlays/b") {
		t.Errorf("the unrendered overlay b: JSON %q, marker digest %q, skipped %v", js["overlays/b"], first.Digests["overlays/b"], first.Skipped)
	}
	// Another checkout, elsewhere on disk: the same marker.
	if again, _ := reviewed(checkoutRef(t, s.upstream, "refs/pull/2/merge")); again.Digests["overlays/a"] != first.Digests["overlays/a"] {
		t.Errorf("the digest changed between runs: %v, then %v", first.Digests, again.Digests)
	}

	// The CLI's full plan renders every overlay: the same digest for a.
	kplan := buildKplan(t)
	full := func(base, head string) map[string]string {
		t.Helper()
		out, err := exec.Command(kplan, "diff", "-C", s.upstream, "--base", base, "--head", head, "--full", "-o", "json").Output()
		if err != nil {
			t.Fatalf("kplan diff --full: %v", err)
		}
		var js struct {
			Overlays []struct{ Path, Digest string }
		}
		if err := json.Unmarshal(out, &js); err != nil {
			t.Fatal(err)
		}
		d := map[string]string{}
		for _, o := range js.Overlays {
			d[o.Path] = o.Digest
		}
		return d
	}
	atMerge := full(s.moved, s.merge)
	if atMerge["overlays/a"] != a || atMerge["overlays/b"] == "" {
		t.Errorf("full plan digests %v, the Action's a %s", atMerge, a)
	}
	// A value changed in a only: a's digest changes, b's does not.
	git(t, s.upstream, "checkout", "-q", "--detach", s.merge)
	gittest.Write(t, s.upstream, map[string]string{"overlays/a/app.yaml": strings.Replace(configMap("app-a"), "k: v", "k: v2", 1)})
	git(t, s.upstream, "commit", "-qam", "a value")
	next := full(s.merge, git(t, s.upstream, "rev-parse", "HEAD"))
	if next["overlays/a"] == atMerge["overlays/a"] || next["overlays/b"] != atMerge["overlays/b"] {
		t.Errorf("after changing a value in a: %v, before %v", next, atMerge)
	}
}

// buildKplan builds the kplan CLI for a test.
func buildKplan(t *testing.T) string {
	return program(t, "../cmd/kplan")
}
