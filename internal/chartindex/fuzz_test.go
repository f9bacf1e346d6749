package chartindex

import (
	"testing"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// A chart repository's index.yaml comes from the network: whatever it
// holds, a version is picked or refused, never a panic.
func FuzzParseIndex(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/*") {
		f.Add(s, "1.x", false)
		f.Add(s, "", true)
	}
	f.Fuzz(func(t *testing.T, data []byte, version string, devel bool) {
		ix, err := Parse(data)
		if err != nil {
			return
		}
		e, err := ix.Pick("demo", version, devel)
		if err == nil && (e == nil || e.Version == "") {
			t.Fatalf("picked %v without a version", e)
		}
	})
}
