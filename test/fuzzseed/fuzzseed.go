// Package fuzzseed reads a fuzz target's seed corpus from testdata: the
// files a glob matches, each one seed. Plain go test runs the seeds, so
// every fuzz target is a regression test in make test.
package fuzzseed

import (
	"os"
	"path/filepath"
	"testing"
)

// Files returns the contents of the files glob matches (relative to the
// package's directory); none is a failure, since a target without seeds
// tests nothing in make test.
func Files(f *testing.F, glob string) [][]byte {
	f.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		f.Fatalf("no fuzz seeds match %s: %v", glob, err)
	}
	out := make([][]byte, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}
