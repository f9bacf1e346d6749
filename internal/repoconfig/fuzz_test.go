package repoconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// .kplan.yaml comes with the pull request: whatever it holds, Parse
// returns a configuration or an error naming the file, never panics, and
// each target it returns is found by its name and its overlay.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/kplan-yaml/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/kplan-yaml: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		for _, tg := range c.Targets {
			if got, ok := c.Target(tg.Name); !ok || got != tg {
				t.Fatalf("target %+v parsed, Target(%q) = %+v, %v", tg, tg.Name, got, ok)
			}
			if len(c.TargetsOf(tg.Overlay)) == 0 {
				t.Fatalf("target %+v parsed, not among TargetsOf(%q)", tg, tg.Overlay)
			}
		}
		c.Overlays()
	})
}
