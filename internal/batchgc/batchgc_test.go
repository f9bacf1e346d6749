package batchgc

import (
	"runtime/debug"
	"testing"
)

// TestSettings pins what each setting leaves the collector with: kplan's
// own, Go's default for a small plan, and the user's when they chose any.
func TestSettings(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	none := func(string) string { return "" }
	percent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	debug.SetGCPercent(100)
	gc := Tune(none)
	if got := percent(); got != 400 {
		t.Errorf("after Tune, GOGC %d; want 400", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 400<<20 {
		t.Errorf("after Tune, memory limit %d; want 400 MiB", got)
	}
	gc.Small()
	if got := percent(); got != 100 {
		t.Errorf("after Small, GOGC %d; want 100", got)
	}

	debug.SetGCPercent(250)
	user := func(k string) string {
		if k == "GOGC" {
			return "250"
		}
		return ""
	}
	gc = Tune(user)
	gc.Small()
	New(user).Small()
	if got := percent(); got != 250 {
		t.Errorf("with the user's GOGC=250, GOGC %d after Tune and Small; want theirs", got)
	}
	var nilTuner *Tuner
	nilTuner.Small() // a server's plan: nothing to tighten
	if got := percent(); got != 250 {
		t.Errorf("a nil Tuner changed GOGC to %d", got)
	}
}
