// Package gittest runs the git command line in tests, with an identity
// and settings that make commits work on any machine.
package gittest

import (
	"os/exec"
	"strings"
	"testing"
)

// Git runs git with args in dir and returns its trimmed output; a failure
// fails the test with git's own message.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	base := []string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "protocol.file.allow=always"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
