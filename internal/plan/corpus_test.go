package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// corpusRepo is the kubeflow corpus (testkit.Corpus) as a git
// repository of one commit, base.
func corpusRepo(t *testing.T) (repo, base string) {
	t.Helper()
	dir := t.TempDir()
	testkit.Untar(t, testkit.Corpus(t), dir)
	repo = filepath.Join(dir, "kubeflow-manifests")
	git(t, repo, "init", "-q", "-b", "main")
	return repo, commit(t, repo, "corpus")
}

// On a real, large repository the changed-only plan equals the full plan
// for a one-application change and for a change to a file many overlays
// read.
func TestCorpusChangedOnlyEqualsFull(t *testing.T) {
	repo, base := corpusRepo(t)
	edit := func(rel, old, new string) {
		p := filepath.Join(repo, rel)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s lacks %q", rel, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// One application, and the common Istio namespace every install reads.
	edit("applications/katib/upstream/components/controller/controller.yaml", "replicas: 1", "replicas: 2")
	edit("common/istio/istio-namespace/base/namespace.yaml", "istio-injection: disabled", "istio-injection: enabled")
	head := commit(t, repo, "head")
	full, changed, st := plans(t, repo, base, head)
	if full.Totals.ChangedOverlays == 0 || st.Skipped == 0 {
		t.Fatalf("the corpus change planned %d changed overlays and skipped %d; want both above 0", full.Totals.ChangedOverlays, st.Skipped)
	}
	t.Logf("%d overlays, %d changed, %d skipped; changed-only equals full", len(changed.Overlays), full.Totals.ChangedOverlays, st.Skipped)
}
