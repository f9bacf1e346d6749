package argocd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/helm"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// errNotHere is the category of a value file or file parameter that is
// neither in this repository nor in the chart.
var errNotHere = errors.New("not in this repository")

// helm templates a Helm source as the repo server's `helm template`
// does: the chart (a directory of this repository, its dependencies
// built as `helm dependency build` does, or a chart pulled from a Helm
// repository or OCI registry through the render network policy and the
// shared chart cache), release name the Application's (or
// helm.releaseName), namespace the destination's (or helm.namespace),
// value files in order, then values (valuesObject replacing values),
// then parameters (--set, then --set-string), then fileParameters
// (--set-file); helm.kubeVersion and helm.apiVersions as
// --kube-version and --api-versions; CRDs unless skipCrds; hooks except
// tests. Charts see the destination cluster's Kubernetes (Options.
// Kubernetes).
func (e *Engine) helm(ctx context.Context, s *snapshot.Snapshot, t *Target, src Source, refs map[string]Source, env map[string]string) ([]*yaml.RNode, error) {
	h := src.Helm
	if h == nil {
		h = &Helm{}
	}
	ch, dir, err := e.chart(ctx, s, src)
	if err != nil {
		return nil, err
	}
	// read reads a value file or file parameter as Argo CD resolves its
	// path: $ref/path in a ref source of this repository; else, for a
	// chart of this repository, relative to it (absolute: to the
	// repository's root); for a pulled chart, within the chart.
	read := func(p string) ([]byte, string, error) {
		rp, inRepo, ok := resolve(dir, p, refs, e.opts.Repos, env)
		if !ok {
			return nil, p, fmt.Errorf("%w: a URL, a file of another repository or a path above the root (Argo CD refuses one, kplan reads none)", errNotHere)
		}
		if inRepo {
			b, err := s.ReadFile(ctx, rp)
			if errors.Is(err, fs.ErrNotExist) {
				// Without the snapshot's revision: a file missing on both
				// sides fails alike, as its target is then unchanged.
				err = fs.ErrNotExist
			}
			return b, rp, err
		}
		for _, f := range ch.Raw {
			if f.Name == rp {
				return f.Data, rp, nil
			}
		}
		return nil, rp, fmt.Errorf("the chart %s %s holds no %s", src.Chart, src.TargetRevision, rp)
	}
	vals := map[string]any{}
	for _, vf := range h.ValueFiles {
		b, p, err := read(vf)
		if err != nil {
			if h.IgnoreMissingValueFiles && !errors.Is(err, errNotHere) {
				continue
			}
			return nil, fmt.Errorf("helm.valueFiles %s: %s: %w (ignoreMissingValueFiles skips a missing one)", vf, p, err)
		}
		var v map[string]any
		if err := sigsyaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("helm.valueFiles %s: %w", p, err)
		}
		vals = helm.MergeMaps(vals, v)
	}
	switch {
	case h.ValuesObject != nil:
		vals = helm.MergeMaps(vals, h.ValuesObject)
	case h.Values != "":
		var v map[string]any
		if err := sigsyaml.Unmarshal([]byte(h.Values), &v); err != nil {
			return nil, fmt.Errorf("helm.values: %w", err)
		}
		vals = helm.MergeMaps(vals, v)
	}
	// The repo server keeps parameters in maps by name (the last of a
	// name wins) and passes every --set before every --set-string, and
	// Helm applies them in that order.
	for _, force := range []bool{false, true} {
		params := map[string]string{}
		var order []string
		for _, p := range h.Parameters {
			if p.ForceString != force {
				continue
			}
			if _, seen := params[p.Name]; !seen {
				order = append(order, p.Name)
			}
			// Expanded as the repo server expands --set and --set-string
			// (helmTemplate, reposerver/repository/repository.go:1379-1384
			// at 37ee0097cf).
			params[p.Name] = envsubst(p.Value, env)
		}
		parse := strvals.ParseInto
		if force {
			parse = strvals.ParseIntoString
		}
		for _, name := range order {
			if err := parse(name+"="+escapeSet(params[name]), vals); err != nil {
				return nil, fmt.Errorf("helm.parameters %s: %w", name, err)
			}
		}
	}
	for _, fp := range h.FileParameters {
		b, p, err := read(fp.Path)
		if err != nil {
			return nil, fmt.Errorf("helm.fileParameters %s: %s: %w", fp.Name, p, err)
		}
		// --set-file: the file's content is the value, a string.
		err = strvals.ParseIntoFile(fp.Name+"=f", vals, func([]rune) (any, error) { return string(b), nil })
		if err != nil {
			return nil, fmt.Errorf("helm.fileParameters %s: %w", fp.Name, err)
		}
	}
	// The destination cluster's Kubernetes, the source's helm.kubeVersion
	// and apiVersions over it (Argo CD v3.5.1: GetKubeVersionOrDefault,
	// GetAPIVersionsOrDefault in pkg/apis/application/v1alpha1/types.go;
	// helmTemplate in reposerver/repository/repository.go).
	caps := e.kubernetes(t)
	apiVersions := caps.APIVersionSet()
	if h.KubeVersion != "" {
		caps.Version, caps.From = h.KubeVersion, "the Application's helm.kubeVersion"
		if v, err := kubeversion.Parse(h.KubeVersion); err == nil {
			caps.Version = v // as the repo server's parseKubeVersion reads it
		}
	}
	if len(h.APIVersions) > 0 {
		caps.APIVersions, caps.From, apiVersions = h.APIVersions, "the Application's helm.apiVersions", h.APIVersions
	}
	t.Kubernetes = &caps
	return helm.Template(ctx, ch, vals, helm.TemplateOptions{
		Name:        cmp.Or(h.ReleaseName, t.Application.Name),
		Namespace:   cmp.Or(h.Namespace, t.Namespace),
		IncludeCRDs: !h.SkipCrds,
		Hooks:       true,
		Timeout:     e.opts.Render.Timeout,
		KubeVersion: caps.Version,
		APIVersions: apiVersions,
		// helm template --skip-schema-validation (repository.go:1373).
		SkipSchemaValidation: h.SkipSchemaValidation,
	})
}

// chart loads a Helm source's chart, pulled (src.Chart) or the directory
// src.Path of the repository, with the dependencies its charts/ lacks
// built as the repo server's helm dependency build does (file:// ones
// from the repository, or from within a pulled chart). dir is the
// chart's repository directory, "" for a pulled chart.
func (e *Engine) chart(ctx context.Context, s *snapshot.Snapshot, src Source) (*chart.Chart, string, error) {
	var files map[string][]byte
	var local func(ctx context.Context, rel string) (map[string][]byte, bool, error)
	dir := ""
	what := ""
	if src.Chart != "" {
		got, err := e.charts.Pull(ctx, charts.Ref{Repo: src.RepoURL, Name: src.Chart, Version: src.TargetRevision})
		if err != nil {
			return nil, "", fmt.Errorf("chart %s %s from %s: %w", src.Chart, cmp.Or(src.TargetRevision, "*"), src.RepoURL, err)
		}
		what = fmt.Sprintf("chart %s %s from %s: ", src.Chart, got.Version, src.RepoURL)
		bf, err := charts.Files(got.Archive)
		if err != nil {
			return nil, "", fmt.Errorf("%s%w", what, err)
		}
		files = charts.FileMap(bf)
		local = func(_ context.Context, rel string) (map[string][]byte, bool, error) {
			got := map[string][]byte{}
			for name, data := range files {
				if r, ok := strings.CutPrefix(name, path.Clean(rel)+"/"); ok && !strings.HasPrefix(rel, "../") {
					got[r] = data
				}
			}
			return got, len(got) > 0, nil
		}
	} else {
		dir = cleanPath(src.Path)
		var err error
		if files, err = chartFiles(ctx, s, dir); err != nil {
			return nil, "", err
		}
		local = func(ctx context.Context, rel string) (map[string][]byte, bool, error) {
			if strings.HasPrefix(path.Join(dir, rel), "../") {
				return nil, false, nil // above the repository's root
			}
			got, err := chartFiles(ctx, s, join(dir, rel))
			return got, len(got) > 0, err
		}
	}
	err := helm.BuildDependencies(ctx, files, helm.DependencySource{Local: local, Remote: e.charts})
	if err != nil {
		return nil, "", fmt.Errorf("%s%w", what, err)
	}
	var bf []*loader.BufferedFile
	for _, name := range slices.Sorted(maps.Keys(files)) {
		bf = append(bf, &loader.BufferedFile{Name: name, Data: files[name]})
	}
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		if what == "" {
			what = "the chart " + dir + ": "
		}
		return nil, "", fmt.Errorf("load %s%w", what, err)
	}
	return ch, dir, nil
}

// chartFiles are the files below dir, by path relative to it.
func chartFiles(ctx context.Context, s *snapshot.Snapshot, dir string) (map[string][]byte, error) {
	paths := tree(s, dir, true)
	data, err := s.ReadFiles(ctx, paths)
	if err != nil {
		return nil, err
	}
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		out[strings.TrimPrefix(p, prefix)] = data[p]
	}
	return out, nil
}

// resolve is where a value file or file parameter p of a Helm source
// is: in the repository (inRepo, a repository path) for $ref/path in a
// ref source of this repository, and, for a chart of the repository
// (dir not ""), for a path relative to it or absolute from the
// repository's root, as Argo CD resolves them; else within a pulled
// chart (a path in the archive). ok is false for URLs, other
// repositories and paths above the root they are in, which the repo
// server refuses. A path that is no $ref has the build environment's
// variables expanded first, as the repo server's Envsubst does.
func resolve(dir, p string, refs map[string]Source, repos Repos, env map[string]string) (where string, inRepo, ok bool) {
	ref, _, _ := strings.Cut(strings.TrimPrefix(p, "$"), "/")
	if _, isRef := refs[ref]; !isRef || !strings.HasPrefix(p, "$") {
		p = envsubst(p, env)
	}
	if strings.Contains(p, "://") {
		return "", false, false
	}
	within := func(q string) (string, bool) {
		q = path.Clean(q)
		if q == ".." || strings.HasPrefix(q, "../") {
			return "", false
		}
		return cleanPath(q), true
	}
	if rest, isRef := strings.CutPrefix(p, "$"); isRef {
		ref, rp, _ := strings.Cut(rest, "/")
		src, found := refs[ref]
		if !found || !repos.Has(src.RepoURL) {
			return "", false, false // another repository's, or an unknown variable
		}
		where, ok = within(strings.TrimLeft(envsubst(rp, env), "/"))
		return where, ok, ok
	}
	switch {
	case dir == "":
		where, ok = within(strings.TrimLeft(p, "/"))
		return where, false, ok
	case path.IsAbs(p):
		where, ok = within(strings.TrimLeft(p, "/"))
	default:
		where, ok = within(path.Join(dir, p))
	}
	return where, ok, ok
}

// escapeSet escapes the commas of a parameter's value, as the repo
// server does before --set (a value written {a,b} is a list and kept).
func escapeSet(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	var b strings.Builder
	prev := rune(0)
	for _, r := range v {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}
