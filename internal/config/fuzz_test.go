package config

import (
	"testing"
	"time"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// The webhook's configuration file is parsed at start: whatever it holds,
// Parse returns a configuration or an error naming the file, never
// panics, and what it returns can be looked up.
func FuzzParse(f *testing.F) {
	for _, data := range fuzzseed.Files(f, "testdata/webhook-yaml/*") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("webhook.yaml", data)
		if err != nil {
			return
		}
		for _, r := range cfg.Repositories {
			if cfg.Repository(r.Name) == nil || cfg.CloneURL(r.Name) == "" {
				t.Fatalf("repository %q parsed, not found", r.Name)
			}
			for _, b := range r.Branches {
				if cfg.Targets(r.Name, b.Name) == nil && (len(b.Targets) > 0 || b.TargetsFrom != "") {
					t.Fatalf("branch %s of %s parsed with targets, none found", b.Name, r.Name)
				}
			}
			cfg.TargetNames(r.Name)
			cfg.RolloutNotes(r.Name)
			for _, b := range r.Branches {
				// Loaded means no cycle: every target gets a stage.
				n := 0
				for _, s := range RolloutOrder(b.Targets) {
					n += len(s)
				}
				if n != len(b.Targets) {
					t.Fatalf("branch %s: rollout order of %d targets has %d", b.Name, len(b.Targets), n)
				}
				for _, tg := range b.Targets {
					if ok, opens := tg.DeployAllowed(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)); !ok && !tg.Freeze && opens.IsZero() {
						t.Fatalf("target %s: not allowed and no window opens", tg.Name)
					}
				}
			}
		}
		cfg.Sources()
	})
}
