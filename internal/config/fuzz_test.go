package config

import (
	"os"
	"path/filepath"
	"testing"
)

// The webhook's configuration file is parsed at start: whatever it holds,
// Parse returns a configuration or an error naming the file, never
// panics, and what it returns can be looked up.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/webhook-yaml/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/webhook-yaml: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
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
		}
		cfg.Sources()
	})
}
