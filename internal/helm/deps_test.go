package helm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/testchart"
)

// A chart's missing dependencies are built as helm dependency build
// does: a remote one at the version Chart.lock locks, else the newest
// its range allows; a vendored one is left alone; a file:// one copied
// from its directory; a remote one refused without a fetcher, and one
// named from Helm's repository configuration said so.
func TestBuildDependencies(t *testing.T) {
	repo := testchart.ServeRepo(t)
	for _, v := range []string{"1.0.0", "1.0.1", "1.1.0"} {
		repo.Add(t, testchart.Package(t, demo, v, v))
	}
	local := func(_ context.Context, rel string) (map[string][]byte, bool, error) {
		if rel != "../lib" {
			return nil, false, nil
		}
		return map[string][]byte{"Chart.yaml": []byte("apiVersion: v2\nname: lib\nversion: 0.1.0\n")}, true, nil
	}
	dep := func(d string) string {
		return "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n  - " + d + "\n"
	}
	for _, tc := range []struct {
		name, chart, lock string
		vendored          bool
		remote            bool
		want              []string // the charts/ files added
		err               string
	}{
		{"range", dep("{name: demo, version: ~1.0, repository: " + repo.URL + "}"), "", false, true, []string{"charts/demo-1.0.1.tgz"}, ""},
		{"locked", dep("{name: demo, version: ~1.0, repository: " + repo.URL + "}"), "dependencies:\n  - {name: demo, version: 1.0.0, repository: " + repo.URL + "}\n", false, true, []string{"charts/demo-1.0.0.tgz"}, ""},
		{"vendored", dep("{name: demo, version: ~1.0, repository: " + repo.URL + "}"), "", true, true, nil, ""},
		{"file", dep("{name: lib, version: 0.1.0, repository: 'file://../lib'}"), "", false, false, []string{"charts/lib/Chart.yaml"}, ""},
		{"file missing", dep("{name: lib, version: 0.1.0, repository: 'file://../nowhere'}"), "", false, false, nil, "dependency lib (file://../nowhere): not in the repository"},
		{"remote refused", dep("{name: demo, version: ~1.0, repository: " + repo.URL + "}"), "", false, false, nil, "its dependency demo from " + repo.URL + " is not vendored under charts/"},
		{"repository name", dep("{name: demo, version: ~1.0, repository: '@stable'}"), "", false, true, nil, "a name from Helm's repository configuration"},
		{"no version", dep("{name: demo, version: ~3.0, repository: " + repo.URL + "}"), "", false, true, nil, "no chart version matches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{"Chart.yaml": []byte(tc.chart)}
			if tc.lock != "" {
				files["Chart.lock"] = []byte(tc.lock)
			}
			if tc.vendored {
				files["charts/demo-0.9.0.tgz"] = []byte("vendored")
			}
			before := len(files)
			src := DependencySource{Local: local}
			if tc.remote {
				src.Remote = charts.New(charts.Options{Policy: loopback(t)})
			}
			err := BuildDependencies(context.Background(), files, src)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if tc.name == "remote refused" && !errors.Is(err, ErrRemoteDependency) {
					t.Errorf("error %v is not ErrRemoteDependency", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var added []string
			for f := range files {
				if strings.HasPrefix(f, "charts/") && f != "charts/demo-0.9.0.tgz" {
					added = append(added, f)
				}
			}
			slices.Sort(added)
			if !slices.Equal(added, tc.want) || len(files)-before != len(tc.want) {
				t.Errorf("added %q, want %q", added, tc.want)
			}
		})
	}
}
