// Package atstart turns the garbage collector off while the program's
// packages initialize, for a batch process whose main calls
// batchgc.Tune first: the Kubernetes, Helm and kustomize packages kplan
// links build schemes and tables at init (about 7 MB, nearly all of it
// kept), and collecting while they do was a quarter of the CLI's start
// (8 ms of 30; bench/ measures a plan as a process, start included).
//
// Import it for its effect, from a main only: Go initializes a package
// that imports nothing of the module's before the heavy ones (the spec's
// order: the first package by import path whose imports are done), so
// the collector is off for most of the init; batchgc.Tune, main's first
// call, sets it again. With GOGC or GOMEMLIMIT set it does nothing: the
// user's settings hold from the start.
package atstart

import (
	"os"
	"runtime/debug"
)

func init() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(-1)
	}
}
