package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func reset(t *testing.T, v, c, d string) {
	t.Helper()
	old := [3]string{Version, Commit, Date}
	oldModified := modified
	Version, Commit, Date, modified = v, c, d, false
	t.Cleanup(func() { Version, Commit, Date, modified = old[0], old[1], old[2], oldModified })
}

func TestFillFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	reset(t, "dev", "", "")
	fill(info)
	if got := String(); !strings.HasPrefix(got, "dev (commit 0123456789ab-dirty, built 2026-01-02T03:04:05Z, go") {
		t.Errorf("String() = %q", got)
	}

	// What the linker stamped wins over what go build recorded.
	reset(t, "1.2.3", "fedcba9876543210fedcba9876543210fedcba98", "2026-02-03T04:05:06Z")
	fill(info)
	if got := String(); !strings.HasPrefix(got, "1.2.3 (commit fedcba987654, built 2026-02-03T04:05:06Z, go") {
		t.Errorf("String() = %q", got)
	}

	// go install github.com/kplan-dev/kplan/cmd/kplan@v1.2.3
	reset(t, "dev", "", "")
	fill(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}})
	if got := String(); !strings.HasPrefix(got, "v1.2.3 (commit unknown, built unknown, go") {
		t.Errorf("String() = %q", got)
	}
}

// TestLdflags builds a program with the -X flags .goreleaser.yaml passes
// and checks that they reach the package. Without the release's
// -trimpath and CGO_ENABLED=0, which change nothing -X does: with them,
// the standard library was compiled again (20 s on a fresh machine).
func TestLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	dir := t.TempDir()
	const pkg = "github.com/kplan-dev/kplan/internal/version"
	bin := filepath.Join(dir, "v")
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-s -w -X "+pkg+".Version=9.8.7 -X "+pkg+".Commit=abcdefabcdefabcdef -X "+pkg+".Date=2026-03-04T05:06:07Z", "./testdata/printversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.HasPrefix(got, "9.8.7 (commit abcdefabcdef, built 2026-03-04T05:06:07Z, go") {
		t.Errorf("stamped binary says %q", got)
	}
}
