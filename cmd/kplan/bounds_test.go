package main

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/render/hostiletest"
)

// A pull request that merges an alias bomb into one overlay: kplan diff
// reports that overlay failed (the change breaks it), naming the file,
// and plans the others — quickly, without expanding the bomb. kplan
// render of the overlay fails the same way.
func TestDiffAliasBombFailsItsOverlayOnly(t *testing.T) {
	dir := commitRepo(t, map[string]string{
		"good/kustomization.yaml": "resources: [cm.yaml]\n",
		"good/cm.yaml":            configMap("good", "v: 1"),
		"bomb/kustomization.yaml": "resources: [cm.yaml]\n",
		"bomb/cm.yaml":            configMap("bomb", "v: 1"),
	}, map[string]string{
		"good/cm.yaml": configMap("good", "v: 2"),
		"bomb/cm.yaml": hostiletest.AliasBomb("bomb"),
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for _, full := range []bool{false, true} {
		args := []string{"-C", dir, "--base", "main~1", "--head", "main"}
		if full {
			args = append(args, "--full")
		}
		p := diffJSON(t, args...)
		bomb, good := p.overlay(t, "bomb"), p.overlay(t, "good")
		if bomb.Status != "error" || bomb.Failure != "introduced" || !strings.Contains(bomb.Error, "bomb/cm.yaml") || !strings.Contains(bomb.Error, "alias") {
			t.Errorf("full=%v: bomb overlay: status %q, failure %q, error %q; want an introduced failure naming bomb/cm.yaml", full, bomb.Status, bomb.Failure, bomb.Error)
		}
		if good.Status != "changed" || len(good.Changed) != 1 {
			t.Errorf("full=%v: good overlay: %+v, want planned as changed", full, good)
		}
		if p.Totals.IntroducedFailures != 1 {
			t.Errorf("full=%v: totals %+v", full, p.Totals)
		}
	}
	// The change breaks an overlay: exit 1, as for any broken overlay.
	if _, _, err := kplan(t, nil, "diff", "-C", dir, "--base", "main~1", "--head", "main"); !errors.Is(err, exitError(1)) {
		t.Errorf("kplan diff: %v, want exit 1", err)
	}
	_, _, err := kplan(t, nil, "render", dir+"/bomb")
	if err == nil || !strings.Contains(err.Error(), "bomb/cm.yaml") {
		t.Errorf("kplan render bomb: %v, want an error naming bomb/cm.yaml", err)
	}
	runtime.ReadMemStats(&after)
	took, allocated := time.Since(start), (after.TotalAlloc-before.TotalAlloc)>>20
	t.Logf("3 plans and a render in %s, %d MB allocated", took.Round(time.Millisecond), allocated)
	// Expanded, the bomb alone would allocate ~400 GB.
	if allocated > 512 {
		t.Errorf("allocated %d MB", allocated)
	}
}
