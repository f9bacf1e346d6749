// Package chartindex reads a Helm chart repository's index.yaml and picks
// a chart version from it as Helm does (`helm pull --version`,
// helm-controller's HelmChart), for the chart fetcher (internal/charts)
// that kustomize helmCharts, Flux HelmReleases and Argo CD share.
//
// It is written against the index's published shape rather than Helm's
// pkg/repo, whose import brings Helm's getters and through them its
// cluster client (pkg/kube, kubectl's command packages) into every plan.
package chartindex

import (
	"errors"
	"fmt"
	"slices"

	"github.com/Masterminds/semver/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// ErrNoVersion is returned when the index holds no version of a chart
// that the requested version or range picks.
var ErrNoVersion = errors.New("no chart version matches")

// Entry is one chart version of an index.
type Entry struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	// Digest is the sha256 of the chart archive, hex; "" when the index
	// does not say.
	Digest string `json:"digest"`
}

// Index is a parsed index.yaml: each chart's versions, newest first.
type Index struct {
	Entries map[string][]*Entry `json:"entries"`
}

// Parse reads an index.yaml. Entries that are empty or name no version
// are dropped (Helm drops those without metadata), and each chart's
// versions are sorted newest first, unparsable versions last, as Helm's
// IndexFile.SortEntries does.
func Parse(data []byte) (*Index, error) {
	var ix Index
	if err := sigsyaml.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("read index.yaml: %w", err)
	}
	for name, es := range ix.Entries {
		es = slices.DeleteFunc(es, func(e *Entry) bool { return e == nil || e.Version == "" })
		slices.SortStableFunc(es, newestFirst)
		ix.Entries[name] = es
	}
	return &ix, nil
}

func newestFirst(a, b *Entry) int {
	va, errA := semver.NewVersion(a.Version)
	vb, errB := semver.NewVersion(b.Version)
	switch {
	case errA != nil && errB != nil:
		return 0
	case errA != nil:
		return 1
	case errB != nil:
		return -1
	}
	return vb.Compare(va)
}

// Pick is the entry of chart name that version picks, as Helm's
// IndexFile.Get does: an exact match of the version string first, else
// the newest version satisfying it as a semver range ("" is "*", which
// leaves pre-releases out). devel with no version takes pre-releases too
// (`helm pull --devel`).
func (ix *Index) Pick(name, version string, devel bool) (*Entry, error) {
	es := ix.Entries[name]
	if len(es) == 0 {
		return nil, fmt.Errorf("%w: the index has no chart %s", ErrNoVersion, name)
	}
	if version != "" {
		for _, e := range es {
			if e.Version == version {
				return e, nil
			}
		}
	}
	rng := version
	switch {
	case rng == "" && devel:
		rng = ">0.0.0-0"
	case rng == "":
		rng = "*"
	}
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return nil, fmt.Errorf("version %q is neither a version nor a semver range: %w", version, err)
	}
	for _, e := range es {
		if v, err := semver.NewVersion(e.Version); err == nil && c.Check(v) {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%w: the index has no chart %s matching version %q", ErrNoVersion, name, version)
}
