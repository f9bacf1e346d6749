package argocd

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// The repo server's parameter override files, read at a source's path
// (argo-cd reposerver/repository/repository.go:81-82 at 37ee0097cf):
// the first for every Application, the second for the one whose
// instance name it carries. Argo CD Image Updater's git write-back
// writes the second.
const (
	repoSourceFile = ".argocd-source.yaml"
	appSourceFile  = ".argocd-source-%s.yaml"
)

// instanceName is the name the repo server is given for an Application
// (Application.InstanceName, pkg/apis/application/v1alpha1/types.go:4137
// at 37ee0097cf): its name in the control plane's namespace, else
// namespace_name.
func instanceName(a *Application) string {
	if a.Namespace == "" || a.Namespace == DefaultNamespace {
		return a.Name
	}
	return a.Namespace + "_" + a.Name
}

// overrideFiles are the override files a source of a at dir is merged
// with, in the repo server's order.
func overrideFiles(a *Application, dir string) []string {
	return []string{join(dir, repoSourceFile), join(dir, fmt.Sprintf(appSourceFile, instanceName(a)))}
}

// ownDir is the directory of this repository src renders from; false
// for a chart, another repository's source or a values-only ref source.
func (e *Engine) ownDir(src Source) (string, bool) {
	if src.Chart != "" || !e.opts.Repos.Has(src.RepoURL) || (src.Ref != "" && src.Path == "") {
		return "", false
	}
	return cleanPath(src.Path), true
}

// sources are t's sources as the repo server renders them: each of this
// repository's, with a path, merged with the override files at that path
// (mergeSourceParameters, reposerver/repository/repository.go:1896-1947
// at 37ee0097cf): each file, YAML, a JSON merge patch over the source in
// turn; then chart, path, repoURL and targetRevision put back as the
// Application has them, so that only the tools' settings change.
func (e *Engine) sources(ctx context.Context, s *snapshot.Snapshot, t *Target) ([]Source, error) {
	all := t.Spec().AllSources()
	var out []Source
	for i, src := range all {
		dir, ok := e.ownDir(src)
		if !ok {
			continue
		}
		files := overrideFiles(t.Application, dir)
		data, err := s.ReadFiles(ctx, files)
		if err != nil {
			return nil, err
		}
		if len(data) == 0 {
			continue
		}
		merged, err := mergeOverrides(src, files, data)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = append([]Source(nil), all...)
		}
		out[i] = merged
	}
	if out == nil {
		return all, nil
	}
	return out, nil
}

// mergeOverrides merges the override files present (data by path) into
// src, in files' order.
func mergeOverrides(src Source, files []string, data map[string][]byte) (Source, error) {
	merged, err := json.Marshal(src)
	if err != nil {
		return src, err
	}
	for _, f := range files {
		patch, ok := data[f]
		if !ok {
			continue
		}
		if patch == nil {
			return src, fmt.Errorf("%s: over the file size limit", f)
		}
		p, err := sigsyaml.YAMLToJSON(patch)
		if err != nil {
			return src, fmt.Errorf("%s: %w (Argo CD's repo server fails the Application on it)", f, err)
		}
		if merged, err = jsonpatch.MergePatch(merged, p); err != nil {
			return src, fmt.Errorf("%s: %w (Argo CD's repo server fails the Application on it)", f, err)
		}
	}
	var out Source
	if err := json.Unmarshal(merged, &out); err != nil {
		return src, fmt.Errorf("%s merged with the override files at its path: %w (Argo CD's repo server fails the Application on it)", src.Path, err)
	}
	out.Chart, out.Path, out.RepoURL, out.TargetRevision = src.Chart, src.Path, src.RepoURL, src.TargetRevision
	return out, nil
}
