package chartindex

import (
	"errors"
	"testing"
)

const index = `apiVersion: v1
entries:
  demo:
    - {name: demo, version: 1.2.0, urls: [demo-1.2.0.tgz], digest: abc}
    - {name: demo, version: 2.0.0-rc.1, urls: [demo-2.0.0-rc.1.tgz]}
    - {name: demo, version: not-semver, urls: [odd.tgz]}
    - {name: demo, version: 1.10.0, urls: [demo-1.10.0.tgz]}
    - null
    - {name: demo}
    - {name: demo, version: v1.3.0, urls: [demo-v1.3.0.tgz]}
`

// The versions Helm picks for `helm pull --version` and for a
// HelmRelease's spec.chart.spec.version, on one index.
func TestPick(t *testing.T) {
	ix, err := Parse([]byte(index))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		devel   bool
		want    string
		err     error
	}{
		{version: "", want: "1.10.0"},  // newest release, not the rc, not by string order
		{version: "*", want: "1.10.0"}, // same as no version
		{version: "", devel: true, want: "2.0.0-rc.1"},
		{version: "1.2.0", want: "1.2.0"},           // exact
		{version: "not-semver", want: "not-semver"}, // an exact string match wins before the range
		{version: "~1.2", want: "1.2.0"},
		{version: "1.3.0", want: "v1.3.0"}, // a range matches a v-prefixed version
		{version: ">=2.0.0-0", want: "2.0.0-rc.1"},
		{version: "3.x", err: ErrNoVersion},
	} {
		e, err := ix.Pick("demo", tc.version, tc.devel)
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("Pick(%q): err %v, want %v", tc.version, err, tc.err)
			}
		case err != nil:
			t.Errorf("Pick(%q): %v", tc.version, err)
		case e.Version != tc.want:
			t.Errorf("Pick(%q, devel %v) = %s, want %s", tc.version, tc.devel, e.Version, tc.want)
		}
	}
	if _, err := ix.Pick("other", "", false); !errors.Is(err, ErrNoVersion) {
		t.Errorf("a chart the index lacks: %v", err)
	}
	if _, err := ix.Pick("demo", "[bad", false); err == nil || errors.Is(err, ErrNoVersion) {
		t.Errorf("a version that is no range: %v", err)
	}
}
