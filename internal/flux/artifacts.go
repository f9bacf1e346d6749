package flux

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// generatorGroup is the API group of Flux's ArtifactGenerator (Flux 2.7,
// source-watcher), whose ExternalArtifacts Kustomizations can build from.
const generatorGroup = "source.extensions.fluxcd.io"

// artifact is an ExternalArtifact an ArtifactGenerator makes by copying
// directories of this repository: root is the repository directory the
// artifact's top is, within the directories it holds; why says why it
// cannot be built from the repository, when it cannot.
type artifact struct {
	root   string
	within []string
	why    string
}

// artifacts are the ExternalArtifacts (namespace/name) the
// ArtifactGenerators among objs make from the repository's own sources.
func (e *Engine) artifacts(objs []*yaml.RNode, into map[string]*artifact) {
	for _, o := range objs {
		// Read as a map: kyaml's getters panic on a node of another kind.
		if o.YNode().Kind != yaml.MappingNode {
			continue
		}
		m, err := asMap(o)
		if err != nil {
			continue
		}
		apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
		kind, _, _ := unstructured.NestedString(m, "kind")
		if g, _, _ := strings.Cut(apiVersion, "/"); g != generatorGroup || kind != "ArtifactGenerator" {
			continue
		}
		ns, _, _ := unstructured.NestedString(m, "metadata", "namespace")
		if ns == "" {
			ns = "default"
		}
		ours := map[string]bool{} // aliases of this repository
		srcs, _, _ := unstructured.NestedSlice(m, "spec", "sources")
		for _, r := range srcs {
			src, _ := r.(map[string]any)
			alias, _ := src["alias"].(string)
			kind, _ := src["kind"].(string)
			name, _ := src["name"].(string)
			sns, _ := src["namespace"].(string)
			if sns == "" {
				sns = ns
			}
			if kind == "GitRepository" && slices.Contains(e.opts.Sources, sns+"/"+name) {
				ours[alias] = true
			}
		}
		arts, _, _ := unstructured.NestedSlice(m, "spec", "artifacts")
		for _, r := range arts {
			a, _ := r.(map[string]any)
			name, _ := a["name"].(string)
			if name == "" {
				continue
			}
			copies, _ := a["copy"].([]any)
			into[ns+"/"+name] = mapArtifact(copies, ours)
		}
	}
}

// mapArtifact reads an artifact's copy operations as one repository
// directory narrowed to some of its subdirectories: each copies
// "@alias/<root>/<sub>/**" to "@artifact/<sub>/", with the same root.
// Any other shape (globs, renames, another source) is not built.
func mapArtifact(copies []any, ours map[string]bool) *artifact {
	a := &artifact{}
	root := ""
	for i, r := range copies {
		c, _ := r.(map[string]any)
		from, _ := c["from"].(string)
		to, _ := c["to"].(string)
		if _, ok := c["exclude"]; ok {
			return &artifact{why: fmt.Sprintf("copy %d excludes files, which kplan does not reproduce", i)}
		}
		alias, src, ok := strings.Cut(strings.TrimPrefix(from, "@"), "/")
		if !strings.HasPrefix(from, "@") || !ok {
			src = ""
		}
		if !ours[alias] {
			return &artifact{why: fmt.Sprintf("copy %d is from %q, not this repository", i, from)}
		}
		dst, ok := strings.CutPrefix(to, "@artifact/")
		if !ok && to != "@artifact" {
			return &artifact{why: fmt.Sprintf("copy %d writes to %q", i, to)}
		}
		dir, glob := strings.CutSuffix(src, "/**")
		if !glob || strings.ContainsAny(dir, "*?[") {
			return &artifact{why: fmt.Sprintf("copy %d copies %q, not a whole directory", i, from)}
		}
		dir, dst = cleanPath(dir), cleanPath(dst)
		r := dir
		if dst != "." {
			var cut bool
			if r, cut = strings.CutSuffix(dir, "/"+dst); !cut {
				if dir != dst {
					return &artifact{why: fmt.Sprintf("copy %d moves %s to %s", i, dir, dst)}
				}
				r = "."
			}
		}
		if i > 0 && r != root {
			return &artifact{why: fmt.Sprintf("its copies place %s and %s at its top", root, r)}
		}
		root = r
		a.within = append(a.within, dir)
	}
	if len(copies) == 0 {
		return &artifact{why: "it copies nothing"}
	}
	a.root = root
	return a
}

// outside is the first path of paths a build of an artifact reads that
// the artifact does not hold ("" for none): directories above what it
// holds are walked, not read.
func outside(paths, within []string) string {
	for _, p := range paths {
		ok := false
		for _, w := range within {
			if w == "." || p == w || strings.HasPrefix(p, w+"/") || w == p || strings.HasPrefix(w, p+"/") || p == "." {
				ok = true
				break
			}
		}
		if !ok {
			return p
		}
	}
	return ""
}

// inArtifact resolves k's ExternalArtifact source against arts: k then
// builds from the repository directory the artifact copies. It says why
// not, or "".
func inArtifact(k *Kustomization, arts map[string]*artifact) string {
	_, id := k.Source()
	a := arts[id]
	if a == nil {
		return fmt.Sprintf("its source ExternalArtifact %s is made by no ArtifactGenerator of this repository", id)
	}
	if a.why != "" {
		return fmt.Sprintf("its source ExternalArtifact %s is not a directory of this repository: %s", id, a.why)
	}
	if a.root == "." {
		k.Root = ""
	} else {
		k.Root = a.root
	}
	k.Within = a.within
	return ""
}
