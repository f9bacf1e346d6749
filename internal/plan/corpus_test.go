package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Corpus returns the kubeflow corpus tarball (KPLAN_CORPUS, default
// ../shared/corpus beside the checkout). Without it the test skips, but
// under CI=true it fails: CI must run the corpus checks.
func Corpus(t *testing.T) string {
	t.Helper()
	p := os.Getenv("KPLAN_CORPUS")
	if p == "" {
		p = "../../../shared/corpus/kubeflow-manifests.tar.gz"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no corpus at %s: set KPLAN_CORPUS to kubeflow-manifests.tar.gz", p)
		}
		t.Skipf("no corpus at %s (set KPLAN_CORPUS)", p)
	}
	if raceEnabled || testing.Short() {
		t.Skip("the corpus checks run without -race and -short (make test runs them so)")
	}
	return p
}

// On a real, large repository the changed-only plan equals the full plan
// for a one-application change and for a change to a file many overlays
// read.
func TestCorpusChangedOnlyEqualsFull(t *testing.T) {
	tarball := Corpus(t)
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", tarball, err, out)
	}
	repo := filepath.Join(dir, "kubeflow-manifests")
	git(t, repo, "init", "-q", "-b", "main")
	base := commit(t, repo, "corpus")
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
