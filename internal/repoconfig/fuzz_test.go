package repoconfig

import (
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// .kplan.yaml comes with the pull request: whatever it holds, Parse
// returns a configuration or an error naming the file, never panics, and
// each target it returns is found by its name and its overlay.
func FuzzParse(f *testing.F) {
	for _, data := range fuzzseed.Files(f, "testdata/kplan-yaml/*") {
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
		// What a cluster runs is a version Helm parses, whatever the
		// declaration (Parse normalised it).
		for _, ids := range [][]string{nil, {"production"}, {"https://10.0.0.1:6443"}} {
			if v := c.Capabilities(ids...).Version; v != "" {
				if _, err := kubeversion.Parse(v); err != nil {
					t.Fatalf("Capabilities(%q).Version %q: %v", ids, v, err)
				}
			}
		}
		for _, tg := range c.Targets {
			c.TargetCapabilities(tg.Overlay)
		}
		// Each artifact maps to a directory inside the repository.
		for u, dir := range c.FluxArtifactPaths() {
			if dir == ".." || strings.HasPrefix(dir, "../") || strings.HasPrefix(dir, "/") || !strings.HasPrefix(u, "oci://") {
				t.Fatalf("fluxArtifacts %q → %q parsed", u, dir)
			}
		}
	})
}
