package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/githubapi"
	"github.com/kplan-dev/kplan/test/gittest"
)

// pushEvent copies GitHub's example push payload as a push of sha to
// branch.
func pushEvent(t *testing.T, branch, sha string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "push", "payload.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	ev["ref"], ev["after"], ev["base_ref"] = "refs/heads/"+branch, sha, nil
	out, _ := json.Marshal(ev)
	p := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// planWork is what the JSON plan of a run says it rendered, and the
// builds its overlays needed on each side.
type planWork struct {
	Rendered, CacheHits, Skipped int
	// BaseBuilds and HeadBuilds count the overlays present on each side
	// (none is skipped in this test's plans, so each side is a build).
	BaseBuilds, HeadBuilds int
}

func readWork(t *testing.T, r *runner) planWork {
	t.Helper()
	data, err := os.ReadFile(r.outputs(t)["report-json"])
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Overlays []struct{ Path, Status string }
		Work     *struct{ Rendered, CacheHits, Skipped int }
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Work == nil {
		t.Fatalf("report-json: %v, work %v\n%s", err, p.Work, data)
	}
	w := planWork{Rendered: p.Work.Rendered, CacheHits: p.Work.CacheHits, Skipped: p.Work.Skipped}
	for _, o := range p.Overlays {
		if o.Status != "new" {
			w.BaseBuilds++
		}
		if o.Status != "removed" {
			w.HeadBuilds++
		}
	}
	return w
}

// A cache the Action filled on a push to main (restored into the same
// directory, as actions/cache does) makes a pull request's plan render
// only its head side; the pull request's next push renders only the
// overlay that push changed.
func TestActionCacheWarmedOnPushServesThePullRequest(t *testing.T) {
	upstream := t.TempDir()
	repo := demoPR(t, upstream)
	cache := filepath.Join(t.TempDir(), "kplan-cache")

	warm := newRunner(t, checkout(t, upstream, "main"), pushEvent(t, "main", repo.Base), "", "")
	warm.env["GITHUB_EVENT_NAME"] = "push"
	warm.env["INPUT_CACHE-DIR"] = cache
	if err := warm.run(t); err != nil {
		t.Fatalf("run on the push to main: %v", err)
	}
	if w := readWork(t, warm); w.Rendered == 0 || w.Skipped != 0 {
		t.Errorf("the push run rendered %d and skipped %d overlays: it should render every overlay into the cache", w.Rendered, w.Skipped)
	}

	pr := newRunner(t, checkout(t, upstream, "changes"), pullRequestEvent(t, "opened.payload.json", repo.Base, repo.Head), "", "")
	pr.env["INPUT_CACHE-DIR"] = cache
	if err := pr.run(t); err != nil {
		t.Fatalf("run on the pull request: %v", err)
	}
	w := readWork(t, pr)
	if w.Skipped != 0 || w.BaseBuilds == 0 || w.HeadBuilds == 0 {
		t.Fatalf("the demo change is not the case this test is for: %+v", w)
	}
	if w.CacheHits != w.BaseBuilds || w.Rendered != w.HeadBuilds {
		t.Errorf("the pull request's plan took %d builds from the cache and rendered %d; want its %d base sides from the cache and its %d head sides rendered", w.CacheHits, w.Rendered, w.BaseBuilds, w.HeadBuilds)
	}

	// The pull request's second push changes one overlay.
	git(t, upstream, "checkout", "-q", "changes")
	kust := filepath.Join(upstream, "overlays/dev/kustomization.yaml")
	data, err := os.ReadFile(kust)
	if err != nil {
		t.Fatal(err)
	}
	gittest.Write(t, upstream, map[string]string{"overlays/dev/kustomization.yaml": string(data) + "\nnamePrefix: dev-\n"})
	git(t, upstream, "commit", "-qam", "dev gets a prefix")
	head2 := git(t, upstream, "rev-parse", "HEAD")
	again := newRunner(t, checkout(t, upstream, "changes"), pullRequestEvent(t, "synchronize.payload.json", repo.Base, head2), "", "")
	again.env["INPUT_CACHE-DIR"] = cache
	if err := again.run(t); err != nil {
		t.Fatalf("run on the second push: %v", err)
	}
	if w := readWork(t, again); w.Rendered != 1 || w.CacheHits != w.BaseBuilds+w.HeadBuilds-1 {
		t.Errorf("the second push's plan rendered %d builds and took %d from the cache; want only overlays/dev's head rendered (%+v)", w.Rendered, w.CacheHits, w)
	}
}

// Shard jobs post nothing and write their parts; the merge job posts the
// comment the unsharded run posts (but for the footer's work and time).
func TestActionShardsAndMerge(t *testing.T) {
	upstream := t.TempDir()
	repo := demoPR(t, upstream)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	event := pullRequestEvent(t, "opened.payload.json", repo.Base, repo.Head)

	parts := t.TempDir()
	for _, s := range []string{"1/2", "2/2"} {
		r := newRunner(t, checkout(t, upstream, "changes"), event, gh.URL(), "ghs_test")
		r.env["INPUT_SHARD"] = s
		if err := r.run(t); err != nil {
			t.Fatalf("shard %s: %v", s, err)
		}
		part := r.outputs(t)["part-file"]
		data, err := os.ReadFile(part)
		if err != nil {
			t.Fatalf("shard %s part-file %q: %v", s, part, err)
		}
		// As download-artifact lays out artifacts: a directory each.
		gittest.Write(t, parts, map[string]string{"part-" + strings.ReplaceAll(s, "/", "-") + "/" + filepath.Base(part): string(data)})
	}
	if n := len(gh.Comments("Codertocat", "Hello-World", 2)); n != 0 {
		t.Fatalf("the shard jobs posted %d comments, want none", n)
	}

	merge := newRunner(t, t.TempDir(), event, gh.URL(), "ghs_test")
	merge.env["INPUT_MERGE"] = parts
	if err := merge.run(t); err != nil {
		t.Fatalf("merge: %v", err)
	}
	merged := gh.Comments("Codertocat", "Hello-World", 2)
	whole := newRunner(t, checkout(t, upstream, "changes"), event, gh.URL(), "ghs_test")
	if err := whole.run(t); err != nil {
		t.Fatalf("unsharded: %v", err)
	}
	unsharded := gh.Comments("Codertocat", "Hello-World", 2)
	if len(merged) != 1 || len(unsharded) != 1 {
		t.Fatalf("%d comments after the merge, %d after the unsharded run; want one, edited", len(merged), len(unsharded))
	}
	if got, want := withoutFooter(merged[0].Body), withoutFooter(unsharded[0].Body); got != want {
		t.Errorf("the merge job's comment:\n%s\nwant the unsharded run's:\n%s", got, want)
	}
	if out := merge.outputs(t); out["changed"] != "5" || out["has-changes"] != "true" {
		t.Errorf("merge outputs = %v", out)
	}
}

// withoutFooter leaves out the line of a Markdown plan saying what the
// run rendered and how long it took.
func withoutFooter(md string) string {
	var keep []string
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "<sub>kplan planned") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
