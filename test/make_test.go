package test

import (
	"os/exec"
	"strings"
	"testing"
)

// make's long steps say what they build before they start and how long
// they took: `make test` on a fresh machine was silent for half an hour
// and `make demo` compiled for minutes showing only `go run`. The
// binaries are compiled with the tests' flags (no -trimpath), so their
// packages are compiled once for both.
func TestMakeStepsSayWhatTheyBuildAndBuildOnce(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	for _, target := range []string{"demo", "vet", "build", "cluster-apiserver", "cluster-helm", "race", "tests"} {
		out, err := exec.Command("make", "-n", "-C", "..", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		said := false
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, `echo "make `+target+": ") {
				said = true
			}
			if strings.Contains(l, "go ") && (strings.Contains(l, " build ") || strings.Contains(l, " run ") || strings.Contains(l, " test ") || strings.Contains(l, " vet ")) {
				if !said {
					t.Errorf("make %s runs %q before saying what it builds", target, l)
				}
				if !strings.Contains(l, "t0=$(date +%s)") {
					t.Errorf("make %s: %q is not timed", target, l)
				}
				if strings.Contains(l, "-trimpath") || (target == "demo" && strings.Contains(l, "go run")) {
					t.Errorf("make %s: %q compiles apart from the tests' build cache, or on every run", target, l)
				}
			}
		}
		if !said {
			t.Errorf("make %s says nothing:\n%s", target, out)
		}
	}
}
