//go:build race

package plan

// raceEnabled skips the corpus checks under the race detector, which makes
// their hundreds of renders take minutes; make test runs them without it.
const raceEnabled = true
