package helm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
)

// ErrRemoteDependency is the category of a chart dependency from a chart
// repository or registry that a build was not allowed to fetch.
var ErrRemoteDependency = errors.New("dependency from a chart repository")

// DependencySource is where BuildDependencies finds the dependencies a
// chart's charts/ does not hold.
type DependencySource struct {
	// Local reads a file:// dependency's directory, given relative to
	// the chart's (cleaned, slash-separated): its files by path relative
	// to it; ok is false when it is not there.
	Local func(ctx context.Context, rel string) (files map[string][]byte, ok bool, err error)
	// Remote pulls dependencies from Helm repositories and OCI
	// registries; nil refuses them with ErrRemoteDependency.
	Remote *charts.Fetcher
}

// BuildDependencies adds to files (a chart's files by path relative to
// it) the dependencies its Chart.yaml lists that its charts/ does not
// hold, as `helm dependency build` does before the chart is templated:
// a file:// one as charts/<name>/ from its directory, another pulled
// from its repository at the version Chart.lock locks (else the newest
// Chart.yaml's range allows) as charts/<name>-<version>.tgz. Which are
// enabled (condition, tags) and their aliases are the templating's, as
// Helm's chartutil decides them. A Chart.yaml that does not parse is
// left for the chart loader to report.
func BuildDependencies(ctx context.Context, files map[string][]byte, src DependencySource) error {
	var meta chart.Metadata
	if err := sigsyaml.Unmarshal(files["Chart.yaml"], &meta); err != nil {
		return nil
	}
	var lock chart.Lock
	if data, ok := files["Chart.lock"]; ok {
		_ = sigsyaml.Unmarshal(data, &lock) // an unreadable lock: the ranges of Chart.yaml
	}
	// What charts/ holds before the build: a chart listed twice (two
	// aliases, two versions) is built for each listing.
	have := map[string]bool{}
	for _, d := range meta.Dependencies {
		if d != nil && vendored(files, d.Name) {
			have[d.Name] = true
		}
	}
	for _, d := range meta.Dependencies {
		if d == nil || d.Name == "" || have[d.Name] {
			continue
		}
		if rel, ok := strings.CutPrefix(d.Repository, "file://"); ok {
			if src.Local == nil {
				return fmt.Errorf("dependency %s (%s): not read", d.Name, d.Repository)
			}
			dir := path.Clean(rel)
			got, ok, err := src.Local(ctx, dir)
			if err != nil {
				return fmt.Errorf("dependency %s (%s): %w", d.Name, d.Repository, err)
			}
			if !ok || len(got) == 0 {
				return fmt.Errorf("dependency %s (%s): not in the repository", d.Name, d.Repository)
			}
			for f, data := range got {
				files["charts/"+d.Name+"/"+f] = data
			}
			continue
		}
		if src.Remote == nil {
			return fmt.Errorf("%w: its dependency %s from %s is not vendored under charts/", ErrRemoteDependency, d.Name, d.Repository)
		}
		if d.Repository == "" || strings.HasPrefix(d.Repository, "@") || strings.HasPrefix(d.Repository, "alias:") {
			return fmt.Errorf("dependency %s: repository %q is a name from Helm's repository configuration, which kplan does not have: write its URL in Chart.yaml", d.Name, d.Repository)
		}
		if _, err := url.Parse(d.Repository); err != nil {
			return fmt.Errorf("dependency %s: repository %q: %w", d.Name, d.Repository, err)
		}
		version := d.Version
		for _, l := range lock.Dependencies {
			if l != nil && l.Name == d.Name && l.Repository == d.Repository && l.Version != "" {
				version = l.Version
			}
		}
		got, err := src.Remote.Pull(ctx, charts.Ref{Repo: d.Repository, Name: d.Name, Version: version})
		if err != nil {
			return fmt.Errorf("dependency %s %s from %s: %w", d.Name, version, d.Repository, err)
		}
		files["charts/"+d.Name+"-"+got.Version+".tgz"] = got.Archive
	}
	return nil
}

// vendored reports whether files hold dependency name under charts/, as
// a directory or an archive.
func vendored(files map[string][]byte, name string) bool {
	for f := range files {
		if strings.HasPrefix(f, "charts/"+name+"/") || (strings.HasPrefix(f, "charts/"+name+"-") && strings.HasSuffix(f, ".tgz")) {
			return true
		}
	}
	return false
}
