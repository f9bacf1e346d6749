package charts

import (
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// A registry's tag list comes from the network: the tag picked for a
// version range satisfies it, or is the version asked for exactly.
func FuzzNewestTag(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/tags/*") {
		f.Add(string(s))
	}
	f.Fuzz(func(t *testing.T, s string) {
		lines := strings.Split(s, "\n")
		constraint := lines[len(lines)-1]
		tag, err := newestTag(lines[:len(lines)-1], constraint)
		if err != nil || (tag == constraint && constraint != "") {
			return
		}
		c, cerr := semver.NewConstraint(cmpOr(constraint, "*"))
		v, verr := semver.StrictNewVersion(strings.ReplaceAll(tag, "_", "+"))
		if cerr != nil || verr != nil || !c.Check(v) {
			t.Fatalf("tag %q picked for %q", tag, constraint)
		}
	})
}

// A chart archive comes from the network: it unpacks or is refused, and
// what it unpacks stays in the chart, under a name that is a directory.
func FuzzFiles(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/archive/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := Files(data)
		if err != nil {
			return
		}
		for _, file := range files {
			if strings.HasPrefix(file.Name, "/") || file.Name == ".." || strings.HasPrefix(file.Name, "../") {
				t.Fatalf("entry %q leaves the chart", file.Name)
			}
		}
		name, err := Name(files)
		if err == nil && (name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`)) {
			t.Fatalf("chart name %q is not a directory name", name)
		}
	})
}

// Helm's repositories.yaml holds passwords: whatever it holds, it reads
// or is refused with an error that quotes none of it.
func FuzzRepositories(f *testing.F) {
	for _, s := range fuzzseed.Files(f, "testdata/repositories/*") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := parseRepositories(data)
		if err != nil && err.Error() != "cannot be read as Helm's repositories.yaml" {
			t.Fatalf("error %q", err)
		}
	})
}
