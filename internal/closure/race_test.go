//go:build race

package closure_test

// raceEnabled skips the corpus check under the race detector, which makes
// its hundreds of sequential renders take minutes and adds nothing there.
const raceEnabled = true
