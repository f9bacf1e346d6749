// Package version holds what a build of kplan says about itself. Releases
// stamp the three variables with the linker (see .goreleaser.yaml):
//
//	-X github.com/kplan-dev/kplan/internal/version.Version=1.2.3
//	-X github.com/kplan-dev/kplan/internal/version.Commit=<full sha>
//	-X github.com/kplan-dev/kplan/internal/version.Date=<RFC 3339 time>
//
// A build without them reports Version "dev" (or the module version, for
// go install ...@v1.2.3) and the commit and commit time that go build
// recorded from the git work tree, when it did.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X at release time; see the package comment.
var (
	Version = "dev"
	Commit  = ""
	Date    = ""
)

// modified is go build's vcs.modified: the work tree had local changes.
var modified bool

func init() {
	if info, ok := debug.ReadBuildInfo(); ok {
		fill(info)
	}
}

// fill completes, from Go's build information, what the linker did not
// stamp: the module version and the vcs.* settings.
func fill(info *debug.BuildInfo) {
	if Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		Version = info.Main.Version
	}
	stamped := Commit != ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if !stamped {
				Commit = s.Value
			}
		case "vcs.time":
			if Date == "" {
				Date = s.Value
			}
		case "vcs.modified":
			modified = !stamped && s.Value == "true"
		}
	}
}

// String is the one-line description for `kplan version` and
// `kplan-webhook --version`, without the program's name:
//
//	1.2.3 (commit 0123456789ab, built 2026-01-02T03:04:05Z, go1.26.0 linux/amd64)
func String() string {
	commit := Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if modified {
		commit += "-dirty"
	}
	date := Date
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, built %s, %s %s/%s)", Version, commit, date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
