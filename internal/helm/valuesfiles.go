package helm

import (
	"context"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	sigsyaml "sigs.k8s.io/yaml"
)

// valuesFiles are a chart's spec.valuesFiles, composed into its values
// as source-controller builds the chart (fluxcd/source-controller v1.9.1,
// internal/helm/chart): merged in order, they replace the chart's
// values.yaml (OverwriteChartDefaultValues, metadata.go:45-80) — even
// when every one was missing and ignored, which leaves the chart no
// values at all. A missing file fails the chart, naming it, unless
// ignoreMissingValuesFiles.
type valuesFiles struct {
	paths         []string // as the spec names them
	ignoreMissing bool
	// local says the chart is a directory of this repository: the paths
	// are relative to the source's root, and data holds what each names
	// (a missing one has no entry). Otherwise they name files of the
	// packaged chart.
	local bool
	data  map[string][]byte
}

// newValuesFiles is spec's valuesFiles; nil when the chart keeps its own
// values.
func newValuesFiles(spec ChartSpec) *valuesFiles {
	files := spec.valuesFiles()
	if len(files) == 0 {
		return nil
	}
	return &valuesFiles{paths: files, ignoreMissing: spec.IgnoreMissingValuesFiles}
}

// localReader reads a directory of a source that is this repository (as
// Env.Local).
type localReader func(ctx context.Context, kind, namespace, name, dir string) (map[string][]byte, bool, error)

// readLocal reads the files of a chart of this repository: paths are
// relative to the source's root and kept within it, as mergeFileValues
// joins them (builder_local.go:202-234); chartFiles are the files of the
// chart's directory dir, which most of them are in.
func (v *valuesFiles) readLocal(ctx context.Context, read localReader, src source, dir string, chartFiles map[string][]byte) error {
	v.local, v.data = true, map[string][]byte{}
	for _, f := range v.paths {
		p := cleanChartPath(f)
		rel, inChart := strings.CutPrefix(p, dir+"/")
		if dir == "." {
			rel, inChart = p, true
		}
		if inChart {
			if data, ok := chartFiles[rel]; ok {
				v.data[f] = data
			}
			continue
		}
		files, found, err := read(ctx, src.kind, src.ns, src.name, path.Dir(p))
		if err != nil {
			return fmt.Errorf("valuesFiles %s: %w", f, err)
		}
		if data, ok := files[path.Base(p)]; found && ok {
			v.data[f] = data
		}
	}
	return nil
}

// compose sets ch's values from the files, as source-controller's
// mergeFileValues (a repository chart) or mergeChartValues (a packaged
// one, builder_remote.go:238-269: values.yaml is the chart's values,
// another path a file of the chart) then OverwriteChartDefaultValues.
func (v *valuesFiles) compose(ch *chart.Chart) error {
	merged := map[string]any{}
	for _, f := range v.paths {
		if !v.local && path.Clean(f) == chartutil.ValuesfileName {
			merged = MergeMaps(merged, ch.Values)
			continue
		}
		data, ok := v.file(ch, f)
		if !ok {
			if v.ignoreMissing {
				continue
			}
			return &MissingValuesFileError{Path: f}
		}
		var values map[string]any
		if err := sigsyaml.Unmarshal(data, &values); err != nil {
			return fmt.Errorf("valuesFiles %s: %w", f, err)
		}
		merged = MergeMaps(merged, values)
	}
	if !hasRaw(ch, chartutil.ValuesfileName) {
		return fmt.Errorf("valuesFiles: the chart has no %s for them to replace (source-controller fails it: \"failed to locate values file\")", chartutil.ValuesfileName)
	}
	ch.Values = merged
	return nil
}

// file is the content of the values file f.
func (v *valuesFiles) file(ch *chart.Chart, f string) ([]byte, bool) {
	if v.local {
		data, ok := v.data[f]
		return data, ok
	}
	// chart.Files: not the templates, Chart.yaml, values.yaml or
	// dependencies, as the loader sorts a chart's files.
	name := path.Clean(f)
	for _, cf := range ch.Files {
		if cf.Name == name {
			return cf.Data, true
		}
	}
	return nil, false
}

func hasRaw(ch *chart.Chart, name string) bool {
	for _, raw := range ch.Raw {
		if raw.Name == name {
			return true
		}
	}
	return false
}

// MissingValuesFileError is a valuesFiles entry the chart's source does
// not hold: source-controller fails the chart, so the release fails.
type MissingValuesFileError struct {
	Path string // as the spec names it
}

func (e *MissingValuesFileError) Error() string {
	return fmt.Sprintf("valuesFiles %s: no values file found at path '%s' (source-controller fails the chart; spec.chart.spec.ignoreMissingValuesFiles: true skips a missing file)", e.Path, e.Path)
}
