package deployer

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log the deployer's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunPrunesGitBases: Run removes from every target's git-base cache,
// a target no longer configured included, the trees no deploy used for
// longer than GitBasesMaxAge, keeps the recent ones, and logs what it
// removed, naming the target where it is configured.
func TestRunPrunesGitBases(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	prod := named("prod")
	old, recent := strings.Repeat("a", 40), strings.Repeat("b", 40)
	long := time.Now().Add(-48 * time.Hour)
	var caches []string
	for _, name := range []string{gitBasesName(prod), "0123456789abcdef"} {
		dir := filepath.Join(root, name)
		caches = append(caches, dir)
		for _, c := range []string{old, recent} {
			if err := os.MkdirAll(filepath.Join(dir, "trees", c, "app"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(filepath.Join(dir, "trees", old), long, long); err != nil {
			t.Fatal(err)
		}
	}
	var logs lockedBuffer
	// The target's deploys fail (its branch cannot be fetched): pruning
	// is no part of them.
	m := newFakeMirror("c1", nil)
	m.failFetch = 1 << 30
	d := New([]Target{prod}, m, &fakeReporter{}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	d.GitBases, d.GitBasesMaxAge, d.Resync = root, 24*time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), "removed git bases no deploy used") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	out := logs.String()
	if !strings.Contains(out, `msg="removed git bases no deploy used" dir=`+caches[0]+" target=prod removed=1 maxAge=24h0m0s") ||
		!strings.Contains(out, `msg="removed git bases no deploy used" dir=`+caches[1]+" removed=1") {
		t.Errorf("the logs do not say what was removed from each cache:\n%s", out)
	}
	for _, dir := range caches {
		if _, err := os.Stat(filepath.Join(dir, "trees", old)); !os.IsNotExist(err) {
			t.Errorf("%s: the tree unused for 48h is still there (%v)", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "trees", recent, "app")); err != nil {
			t.Errorf("%s: the recent tree: %v", dir, err)
		}
	}
}
