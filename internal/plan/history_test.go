package plan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// corpusBundles are the real histories CI replays (../shared/corpus, see
// its README): each a linear first-parent history.
var corpusBundles = []string{
	"kubeflow-manifests-100.bundle",
	"onedr0p-home-ops-150.bundle",
	"flux2-kustomize-helm-example.bundle",
}

// Every commit of real repositories kplan was not built for, planned
// against its parent as a pull request would be: no plan fails as a
// whole, no overlay fails with a kplan bug (a recovered panic), the plan
// with the render cache the plan of the commit before left (its indexes
// serving the base, as a push to the default branch leaves them) says
// what the plan without a cache says, and on every fullEvery-th commit
// (KPLAN_REPLAY_FULL_EVERY, default 10; 1 for all) the changed-only plan
// says what the full plan says. make test
// replays the last KPLAN_REPLAY_COMMITS commits of each (default 40, about
// two minutes in all; 0 replays every commit: about six minutes).
func TestCorpusHistoriesReplay(t *testing.T) {
	dir := filepath.Dir(testkit.Corpus(t))
	fullEvery := 10
	if v, err := strconv.Atoi(os.Getenv("KPLAN_REPLAY_FULL_EVERY")); err == nil && v > 0 {
		fullEvery = v
	}
	last := 40
	if v, err := strconv.Atoi(os.Getenv("KPLAN_REPLAY_COMMITS")); err == nil && v >= 0 {
		last = v
	}
	for _, name := range corpusBundles {
		bundle := filepath.Join(dir, name)
		t.Run(strings.TrimSuffix(name, ".bundle"), func(t *testing.T) {
			if _, err := os.Stat(bundle); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true and no history at %s", bundle)
				}
				t.Skipf("no history at %s", bundle)
			}
			repo := filepath.Join(t.TempDir(), "repo")
			if out, err := exec.Command("git", "clone", "-q", bundle, repo).CombinedOutput(); err != nil {
				t.Fatalf("clone %s: %v\n%s", bundle, err, out)
			}
			commits := strings.Fields(git(t, repo, "rev-list", "--first-parent", "--reverse", "HEAD"))
			if last > 0 && len(commits) > last+1 {
				commits = commits[len(commits)-last-1:]
			}
			start := time.Now()
			cache := t.TempDir()
			var planned, compared, changedOverlays int
			for i := 1; i < len(commits); i++ {
				base, head := commits[i-1], commits[i]
				opts := Options{RepoDir: repo, Base: base, Head: head, Resolver: notFound{}}
				changed, _, err := Execute(context.Background(), opts)
				if err != nil {
					t.Errorf("commit %d %s: the plan failed as a whole: %v", i, head[:7], err)
					continue
				}
				planned++
				changedOverlays += changed.Totals.ChangedOverlays
				noBug(t, head, changed)
				everyCluster(t, repo, head, changed)
				opts.CacheDir = cache
				cached, _, err := Execute(context.Background(), opts)
				if err != nil {
					t.Errorf("commit %d %s: the plan with the cache failed as a whole: %v", i, head[:7], err)
					continue
				}
				sameChanges(t, "commit "+head[:7]+" with the cache", changed, cached)
				opts.CacheDir = ""
				if i%fullEvery != 0 && i != len(commits)-1 {
					continue
				}
				opts.Full = true
				full, _, err := Execute(context.Background(), opts)
				if err != nil {
					t.Errorf("commit %d %s: the full plan failed as a whole: %v", i, head[:7], err)
					continue
				}
				noBug(t, head, full)
				sameChanges(t, "commit "+head[:7]+" changed-only", full, changed)
				compared++
			}
			t.Logf("%s: %d commits planned, %d overlay changes, %d compared with --full, in %s",
				name, planned, changedOverlays, compared, time.Since(start).Round(time.Second))
		})
	}
}

// everyCluster fails the test when a commit whose clusters/ directory
// holds several clusters' Flux Kustomizations (Flux's documented layout)
// is not planned in each of them: every target is then named by its
// cluster, and each cluster has one.
func everyCluster(t *testing.T, repo, head string, p *inventorydiff.Plan) {
	t.Helper()
	files := strings.Fields(git(t, repo, "ls-tree", "-r", "--name-only", head, "clusters/"))
	want := map[string]bool{}
	for _, f := range files {
		if parts := strings.Split(f, "/"); len(parts) == 3 && strings.HasSuffix(f, ".yaml") {
			data := git(t, repo, "show", head+":"+f)
			if strings.Contains(data, "kustomize.toolkit.fluxcd.io") {
				want[parts[1]] = true
			}
		}
	}
	if len(want) < 2 {
		return
	}
	got := map[string]bool{}
	for _, o := range p.Overlays {
		if c, _, ok := strings.Cut(o.Path, ": "); ok {
			got[c] = true
		}
	}
	for c := range want {
		if !got[c] {
			t.Errorf("commit %s: cluster %s is not planned (targets named by cluster: %v)", head[:7], c, got)
		}
	}
}

// noBug fails the test for an overlay that failed with a kplan bug.
func noBug(t *testing.T, head string, p *inventorydiff.Plan) {
	t.Helper()
	for _, o := range p.Overlays {
		for _, e := range []string{o.BaseErr, o.HeadErr} {
			if strings.Contains(e, crash.Marker) {
				t.Errorf("commit %s: %s failed with a kplan bug: %s", head[:7], o.Path, e)
			}
		}
	}
}
