package test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCollectorOffWhilePackagesInitialize runs the programs a CI job
// starts as their users do and reads Go's own trace of their start: no
// collection runs while the Kubernetes, Helm and kustomize packages
// initialize (internal/batchgc/atstart), and the collector is back once
// main tunes it (a plan still collects). A GOGC the user set is theirs
// from the start.
func TestCollectorOffWhilePackagesInitialize(t *testing.T) {
	for _, pkg := range []string{"../cmd/kplan", "../cmd/action", "../cmd/kplan-gitlab"} {
		t.Run(pkg, func(t *testing.T) {
			bin := program(t, pkg)
			lines := startTrace(t, bin, "")
			first := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "/internal/batchgc/atstart @") })
			heavy := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "init k8s.io/client-go/kubernetes/scheme @") })
			if first < 0 || heavy < 0 {
				t.Fatalf("no init trace of atstart (%d) or client-go's scheme (%d):\n%s", first, heavy, strings.Join(lines, "\n"))
			}
			if first > heavy {
				t.Errorf("atstart initialized after client-go's scheme: the collector runs through the heavy inits")
			}
			// Up to the last package initialized: main runs next.
			last := heavy
			for i, l := range lines {
				if strings.HasPrefix(l, "init ") {
					last = i
				}
			}
			for _, l := range lines[first:last] {
				if strings.HasPrefix(l, "gc ") {
					t.Errorf("a collection while packages initialize, after atstart: %s", l)
				}
			}
			// The user's setting holds: with GOGC=1 the init collects.
			if !slices.ContainsFunc(startTrace(t, bin, "GOGC=1"), func(l string) bool { return strings.HasPrefix(l, "gc ") }) {
				t.Errorf("GOGC=1: no collection at all; atstart overrode the user's setting")
			}
		})
	}
}

// startTrace is what the runtime says of bin's start (GODEBUG inittrace
// and gctrace), run with --help.
func startTrace(t *testing.T, bin, env string) []string {
	t.Helper()
	cmd := exec.Command(bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1,gctrace=1", "GOGC=", "GOMEMLIMIT=")
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	out, _ := cmd.CombinedOutput() // --help's status is the program's business
	return strings.Split(string(out), "\n")
}
