package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Fetcher fetches what a render names by URL, as its network policy
// allows (netpolicy.Policy): at most max bytes, and an error that says
// which setting allows a refused host.
type Fetcher interface {
	Fetch(ctx context.Context, url string, max int64) ([]byte, error)
}

// Remote resources never reach kustomize's own loader, which fetches
// http(s) URLs with a client of its own (any host, any address, the
// environment's proxy) and hands a URL that does not answer 200 to `git
// clone`. Instead, every kustomization krusty reads is rewritten as it is
// read: an http(s) URL in a field that loads a file becomes a path under
// the kustomization's directory (remoteDir), which guardFS serves by
// fetching the URL through Options.Remote; a git base (a resources or
// components entry kustomize would clone) is fetched by Options.Git
// (gitbase.go). Builtin
// plugin configs (apiVersion: builtin) read through the render are
// rewritten the same way, since their paths load through the same
// loader.

// remoteDir is the directory, in the kustomization's own, where fetched
// URLs appear to krusty. Load restrictions hold: it is below the root.
const remoteDir = ".kplan-remote"

// listKeys name lists of files or bases; scalarKeys a single file.
var (
	listKeys = map[string]bool{
		"resources": true, "bases": true, "components": true, "crds": true, "configurations": true,
		"patchesStrategicMerge": true, "envs": true, "files": true, "paths": true,
		"generators": true, "transformers": true, "validators": true,
	}
	scalarKeys = map[string]bool{"path": true, "env": true, "targetFilePath": true, "valuesFile": true}
	baseKeys   = map[string]bool{"resources": true, "bases": true, "components": true}
)

// RemoteError says a render met a remote base, and has no git cache to
// fetch it with.
type RemoteError struct {
	File, Field, Ref string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s entry %q of %s is a remote git base: kustomize would clone it with git, outside kplan's network policy, and this render fetches no git repository; vendor the base into the repository", e.Field, e.Ref, e.File)
}

// mayBeRemote is a cheap first look before parsing a file.
func mayBeRemote(data []byte) bool {
	for _, s := range []string{"://", "git::", "github.com", "?ref=", "?version=", "_git/", "@"} {
		if bytes.Contains(data, []byte(s)) {
			return true
		}
	}
	return false
}

// isKustomization says whether p is named as krusty names kustomization
// files.
func isKustomization(p string) bool {
	base := path.Base(p)
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		if base == n {
			return true
		}
	}
	return false
}

// rewriteRemote returns data (the file at p, absolute in the render's file
// system) with every remote reference replaced by a path guardFS serves,
// and records those paths. A git base is refused. Data that is neither a
// kustomization nor builtin plugin configs, or names nothing remote, is
// returned as it is.
func (g *guardFS) rewriteRemote(p string, data []byte) ([]byte, error) {
	if !mayBeRemote(data) {
		return data, nil
	}
	kust := isKustomization(p)
	docs, others, err := yamldocs.Split(data)
	if err != nil {
		return data, nil // krusty reports what it makes of it
	}
	changed := false
	for _, doc := range docs {
		if !kust && !builtinConfig(doc) {
			continue
		}
		c, err := g.rewriteNode(p, doc, "")
		if err != nil {
			return nil, err
		}
		changed = changed || c
	}
	if !changed {
		return data, nil
	}
	if others > 0 {
		return nil, fmt.Errorf("%s names a remote reference and holds a YAML document that is not a mapping (a list or a scalar): kustomize reads neither a kustomization nor a plugin config from it; make each document a mapping", relName(p))
	}
	var out bytes.Buffer
	for i, doc := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		s, err := doc.String()
		if err != nil {
			return nil, fmt.Errorf("rewrite %s: %w", relName(p), err)
		}
		out.WriteString(s)
	}
	return out.Bytes(), nil
}

func builtinConfig(doc *yaml.RNode) bool {
	n := doc.YNode()
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "apiVersion" {
			return n.Content[i+1].Value == konfig.BuiltinPluginApiVersion
		}
	}
	return false
}

// rewriteNode rewrites the references below n, whose key is key.
func (g *guardFS) rewriteNode(file string, doc *yaml.RNode, key string) (bool, error) {
	return g.rewrite(file, doc.YNode(), key)
}

func (g *guardFS) rewrite(file string, n *yaml.Node, key string) (bool, error) {
	changed := false
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			ch, err := g.rewrite(file, c, key)
			if err != nil {
				return false, err
			}
			changed = changed || ch
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ch, err := g.rewrite(file, v, k.Value)
			if err != nil {
				return false, err
			}
			changed = changed || ch
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind == yaml.ScalarNode && listKeys[key] {
				ch, err := g.rewriteRef(file, c, key)
				if err != nil {
					return false, err
				}
				changed = changed || ch
				continue
			}
			ch, err := g.rewrite(file, c, "")
			if err != nil {
				return false, err
			}
			changed = changed || ch
		}
	case yaml.ScalarNode:
		if scalarKeys[key] {
			return g.rewriteRef(file, n, key)
		}
	}
	return changed, nil
}

// rewriteRef rewrites one reference, the scalar n of field key in file.
func (g *guardFS) rewriteRef(file string, n *yaml.Node, key string) (bool, error) {
	ref := n.Value
	prefix := ""
	if key == "files" {
		// "key=path", as krusty's ParseFileSource.
		if k, v, ok := strings.Cut(ref, "="); ok && !strings.Contains(k, "://") {
			prefix, ref = k+"=", v
		}
	}
	dir := path.Dir(file)
	if closure.IsRemoteFile(ref) {
		if key == "components" || (baseKeys[key] && gitURL(ref)) {
			// A directory in a git repository: kustomize would clone.
			return g.gitBase(file, dir, key, n, ref)
		}
		n.Value = prefix + g.remoteFile(dir, ref)
		n.Style = 0
		return true, nil
	}
	if baseKeys[key] && closure.IsRemote(ref) && !g.fs(dir).Exists(path.Join(dir, ref)) {
		return g.gitBase(file, dir, key, n, ref)
	}
	return false, nil
}

// gitURL says whether an http(s) URL names a git repository as
// kustomize's remote bases do: a ref or version query, a .git or _git
// path, or the "//" that separates the repository from a directory in it.
// Fetched, such a URL answers with a web page, and kustomize then clones.
func gitURL(ref string) bool {
	u, err := url.Parse(ref)
	if err != nil {
		return false
	}
	q := u.Query()
	return q.Has("ref") || q.Has("version") || strings.Contains(u.Path, ".git") ||
		strings.Contains(u.Path, "/_git/") || strings.Contains(u.Path, "//")
}

// remoteFile is the path at which the URL ref appears to krusty: in the
// kustomization's directory dir, under a name that keeps the URL's last
// element (a generator's file source without a key is named by it).
func (g *guardFS) remoteFile(dir, ref string) string {
	sum := sha256.Sum256([]byte(ref))
	name := "remote"
	if u, err := url.Parse(ref); err == nil {
		if b := path.Base(u.Path); b != "." && b != "/" && b != "" {
			name = b
		}
	}
	p := path.Join(dir, remoteDir, hex.EncodeToString(sum[:8]), name)
	g.mu.Lock()
	if g.remote == nil {
		g.remote = map[string]string{}
	}
	g.remote[p] = ref
	g.mu.Unlock()
	return p
}

// remoteURL is the URL a path of remoteFile stands for, if it is one.
func (g *guardFS) remoteURL(p string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u, ok := g.remote[path.Clean(p)]
	return u, ok
}

// remoteDirOf says whether p is the directory of a path of remoteFile.
func (g *guardFS) remoteDirOf(p string) bool {
	p = path.Clean(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	for f := range g.remote {
		if path.Dir(f) == p || path.Dir(path.Dir(f)) == p {
			return true
		}
	}
	return false
}

// fetch reads the URL behind a path of remoteFile through the render's
// network policy.
func (g *guardFS) fetch(ref string) ([]byte, error) {
	if g.fetcher == nil {
		return nil, g.fail(fmt.Errorf("fetch %s refused: this render fetches from no host (hosts are listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts)", ref))
	}
	data, err := g.fetcher.Fetch(g.ctx, ref, g.bytesLeft())
	if err != nil {
		// Any failure fails the render as it is: kplan does not go on to
		// try the URL as a git repository, as kustomize would.
		return nil, g.fail(err)
	}
	return data, nil
}
