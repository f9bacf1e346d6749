package test

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// built holds the programs the tests run as their users do, each built
// once per run of this package: linking a 40 MB program takes seconds,
// and dozens of tests start the webhook.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// End-to-end tests that mostly wait (on a cluster, the webhook, GitHub's
// local server) call t.Parallel; those that measure time or memory, or
// render much, do not, so they run alone in this package.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// program is the binary of the main package pkg ("../cmd/webhook"),
// built on first use.
func program(t *testing.T, pkg string) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if bin, ok := built.bins[pkg]; ok {
		return bin
	}
	if err, ok := built.errs[pkg]; ok {
		t.Fatal(err)
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "kplan-test-programs-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.bins, built.errs = dir, map[string]string{}, map[string]error{}
	}
	bin := filepath.Join(built.dir, path.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		built.errs[pkg] = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		t.Fatal(built.errs[pkg])
	}
	built.bins[pkg] = bin
	return bin
}
