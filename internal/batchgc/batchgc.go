// Package batchgc sets the Go garbage collector up for kplan: a short
// batch process whose work is parsing YAML, which allocates heavily and
// keeps little. With Go's default (GOGC=100) a plan of a large repository
// spends about a quarter of its CPU collecting; see bench/ for numbers.
package batchgc

import "runtime/debug"

const (
	// percent lets the heap grow well past what is live between
	// collections: most of a render's allocations die young.
	percent = 400
	// limit keeps the heap in bounds when the live heap is large: the
	// collector runs as needed to stay under it (up to half the CPU).
	limit = 400 << 20
	// smallPercent is Go's default, for a plan whose builds read little:
	// its live heap is a dozen MiB, and at 400 the heap grew to five times
	// that, half of the process's peak memory (the binary's own pages are
	// the other half), to save a few collections of a small heap.
	smallPercent = 100
)

// Tuner is kplan's collector settings in a batch process (the CLI, a CI
// job): nil, or off, leaves the collector alone.
type Tuner struct {
	on bool // the user chose no settings of their own
}

// Tune applies kplan's collector settings, unless the user chose their
// own with GOGC or GOMEMLIMIT, and returns the Tuner a plan tightens
// them through.
func Tune(getenv func(string) string) *Tuner {
	t := New(getenv)
	if t.on {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
	return t
}

// New is the Tuner of a process whose settings Tune applied (or, with
// GOGC or GOMEMLIMIT set, the user's), without applying them again.
func New(getenv func(string) string) *Tuner {
	return &Tuner{on: getenv("GOGC") == "" && getenv("GOMEMLIMIT") == ""}
}

// Small says the plan's builds read little: the heap stays near what is
// live (Go's default), which costs a few collections of a small heap.
func (t *Tuner) Small() {
	if t != nil && t.on {
		debug.SetGCPercent(smallPercent)
	}
}
