package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// directory reads a directory source's manifests as the repo server
// does: its .yaml, .yml and .json files (below it too with recurse)
// that include matches and exclude does not, each object of a List
// apart. jsonnet files are returned as skipped.
// skipFileRenderingMarker in a file keeps a directory source from
// reading it (reposerver/repository/repository.go:84, 2204-2207 at
// argo-cd 37ee0097cf).
const skipFileRenderingMarker = "+argocd:skip-file-rendering"

func directory(ctx context.Context, s *snapshot.Snapshot, src Source) (objs []*yaml.RNode, skipped, marked []string, err error) {
	dir := cleanPath(src.Path)
	d := src.Directory
	if d == nil {
		d = &Directory{}
	}
	include, err := globs(d.Include)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("directory.include: %w", err)
	}
	exclude, err := globs(d.Exclude)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("directory.exclude: %w", err)
	}
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	var files []string
	for _, f := range tree(s, dir, d.Recurse) {
		rel := strings.TrimPrefix(f, prefix)
		ext := path.Ext(f)
		// The extension filter (manifestFile, getPotentiallyValidManifestFile,
		// reposerver/repository/repository.go:1995, 2148-2153 at
		// 37ee0097cf), unless disableExtensionFilter.
		if !d.DisableExtensionFilter && ext != ".yaml" && ext != ".yml" && ext != ".json" && ext != ".jsonnet" {
			continue
		}
		if (include != nil && !include.MatchString(rel)) || (exclude != nil && exclude.MatchString(rel)) {
			continue
		}
		if ext == ".jsonnet" {
			skipped = append(skipped, f)
			continue
		}
		files = append(files, f)
	}
	data, err := s.ReadFiles(ctx, files)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, f := range files {
		if bytes.Contains(data[f], []byte(skipFileRenderingMarker)) {
			marked = append(marked, f)
			continue
		}
		got, err := manifests(data[f])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, got...)
	}
	return objs, skipped, marked, nil
}

// manifests are the objects of a YAML or JSON file, Lists expanded.
func manifests(data []byte) ([]*yaml.RNode, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		var list []any
		if err := json.Unmarshal(t, &list); err != nil {
			return nil, err
		}
		y, err := sigsyaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
		if err != nil {
			return nil, err
		}
		data = y
	}
	objs, err := yamldocs.Objects(data)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if len(o.YNode().Content) > 0 {
			render.AsYAML11(o.YNode())
		}
	}
	return slices.DeleteFunc(objs, func(o *yaml.RNode) bool { return len(o.YNode().Content) == 0 }), nil
}

// globs compiles Argo CD's include/exclude pattern (a glob, or several
// in braces: "{a.yaml,b/*.yaml}"), * matching across slashes as Argo
// CD's glob does; nil for "".
func globs(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("%q: unbalanced }", p)
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		case '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("%q: unclosed [", p)
			}
			class := p[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: unclosed {", p)
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("%q: %w", p, err)
	}
	return re, nil
}
