package charts

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	sigsyaml "sigs.k8s.io/yaml"
)

// File is one file of a chart, by path relative to the chart's
// directory ("templates/deployment.yaml").
type File = loader.BufferedFile

// Files unpacks a chart archive: the one untar of kplan's charts, for
// every consumer. It reads the archive as Helm does, with its loader's
// LoadArchiveFiles, which `helm template`, `helm dependency build` and
// `helm pull --untar` (chartutil.Expand) share, under Helm's bounds of
// the archive (100 MiB unpacked, 5 MiB a file): the chart's files by
// path relative to its directory, each relative and inside it.
func Files(tgz []byte) ([]*File, error) {
	files, err := loader.LoadArchiveFiles(bytes.NewReader(tgz))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		p := path.Clean(f.Name)
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(f.Name, "\\") {
			return nil, fmt.Errorf("entry %q leaves the chart", f.Name)
		}
		f.Name = p
	}
	return files, nil
}

// Name is the name of the chart files hold, from its Chart.yaml: the
// directory `helm pull --untar` writes it to, held to the rules of
// chartutil.Expand (helm v3.22.0 pkg/chartutil/expand.go): set, no dot
// segment, no separator.
func Name(files []*File) (string, error) {
	name := ""
	for _, f := range files {
		if f.Name == "Chart.yaml" {
			var m chart.Metadata
			if err := sigsyaml.Unmarshal(f.Data, &m); err != nil {
				return "", fmt.Errorf("cannot load Chart.yaml: %w", err)
			}
			name = m.Name
		}
	}
	switch {
	case name == "":
		return "", errors.New("chart name not specified (no Chart.yaml, or no name in it)")
	case name == "." || name == ".." || strings.ContainsAny(name, `/\`):
		return "", fmt.Errorf("chart name %q is not a directory name", name)
	}
	return name, nil
}

// FileMap is Files' files by path.
func FileMap(files []*File) map[string][]byte {
	m := make(map[string][]byte, len(files))
	for _, f := range files {
		m[f.Name] = f.Data
	}
	return m
}
