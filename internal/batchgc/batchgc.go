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
)

// Tune applies kplan's collector settings, unless the user chose their
// own with GOGC or GOMEMLIMIT.
func Tune(getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(percent)
	debug.SetMemoryLimit(limit)
}
