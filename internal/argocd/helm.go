package argocd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/helmrelease"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// helm templates a chart of the repository as the repo server's
// `helm template` does: release name the Application's (or
// helm.releaseName), namespace the destination's (or helm.namespace),
// value files in order, then values (valuesObject replacing values),
// then parameters; CRDs unless skipCrds; hooks except tests.
func (e *Engine) helm(ctx context.Context, s *snapshot.Snapshot, t *Target, src Source, refs map[string]Source) ([]*yaml.RNode, error) {
	dir := cleanPath(src.Path)
	files := tree(s, dir, true)
	data, err := s.ReadFiles(ctx, files)
	if err != nil {
		return nil, err
	}
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	var bf []*loader.BufferedFile
	for _, f := range files {
		bf = append(bf, &loader.BufferedFile{Name: strings.TrimPrefix(f, prefix), Data: data[f]})
	}
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		return nil, fmt.Errorf("load the chart %s: %w", dir, err)
	}
	// helm template refuses a chart missing a dependency its Chart.yaml
	// lists; Argo CD runs helm dependency build first, fetching it.
	for _, d := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(c *chart.Chart) bool { return c.Name() == d.Name }) {
			return nil, fmt.Errorf("chart %s: dependency %s %s from %s is not under charts/: Argo CD fetches it (helm dependency build), kplan does not fetch chart dependencies for Argo CD Applications yet", dir, d.Name, d.Version, d.Repository)
		}
	}
	h := src.Helm
	if h == nil {
		h = &Helm{}
	}
	vals := map[string]any{}
	for _, vf := range h.ValueFiles {
		p, ok := valueFile(dir, vf, refs, e.opts.Repos)
		if !ok {
			return nil, fmt.Errorf("helm.valueFiles %s: not in this repository (remote value files are not read)", vf)
		}
		b, err := s.ReadFile(ctx, p)
		if err != nil {
			if h.IgnoreMissingValueFiles {
				continue
			}
			return nil, fmt.Errorf("helm.valueFiles %s: %s: %w (ignoreMissingValueFiles skips it)", vf, p, err)
		}
		var v map[string]any
		if err := sigsyaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("helm.valueFiles %s: %w", p, err)
		}
		vals = helmrelease.MergeMaps(vals, v)
	}
	switch {
	case h.ValuesObject != nil:
		vals = helmrelease.MergeMaps(vals, h.ValuesObject)
	case h.Values != "":
		var v map[string]any
		if err := sigsyaml.Unmarshal([]byte(h.Values), &v); err != nil {
			return nil, fmt.Errorf("helm.values: %w", err)
		}
		vals = helmrelease.MergeMaps(vals, v)
	}
	for _, p := range h.Parameters {
		parse := strvals.ParseInto
		if p.ForceString {
			parse = strvals.ParseIntoString
		}
		if err := parse(p.Name+"="+p.Value, vals); err != nil {
			return nil, fmt.Errorf("helm.parameters %s: %w", p.Name, err)
		}
	}
	if len(h.FileParameters) > 0 {
		t.Notes = append(t.Notes, "helm.fileParameters are not applied")
	}
	return helmrelease.Template(ctx, ch, vals, helmrelease.TemplateOptions{
		Name:        cmp.Or(h.ReleaseName, t.Application.Name),
		Namespace:   cmp.Or(h.Namespace, t.Namespace),
		IncludeCRDs: !h.SkipCrds,
		Hooks:       true,
		Timeout:     e.opts.Render.Timeout,
	})
}

// valueFile is the repository path of a value file: relative to the
// chart's directory, or $ref/path in a source of this repository.
func valueFile(dir, vf string, refs map[string]Source, repos Repos) (string, bool) {
	if strings.Contains(vf, "://") {
		return "", false
	}
	if rest, ok := strings.CutPrefix(vf, "$"); ok {
		ref, p, _ := strings.Cut(rest, "/")
		src, ok := refs[ref]
		if !ok || !repos.Has(src.RepoURL) {
			return "", false
		}
		return cleanPath(p), true
	}
	return join(dir, vf), true
}
