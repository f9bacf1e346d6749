// Package yamldocs is kplan's reader of repository YAML as objects: the
// mapping documents of a file, every other document (a top-level list, as
// a JSON 6902 patch or a replacements file is; a scalar; an empty one)
// skipped, so that no caller meets a node kyaml's getters (GetKind,
// GetApiVersion, GetName …) panic on.
package yamldocs

import (
	"bytes"
	"errors"
	"io"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Mappings returns the mapping documents of data, in order, and an error
// when data does not parse as YAML. Aliases stay aliases (nothing is
// copied per alias, so an alias bomb costs its text, not its expansion);
// the nodes' decoders (RNode.Map, Decode) resolve them.
func Mappings(data []byte) ([]*yaml.RNode, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.RNode
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		m := &n
		if m.Kind == yaml.DocumentNode && len(m.Content) > 0 {
			m = m.Content[0]
		}
		if m.Kind == yaml.MappingNode {
			out = append(out, yaml.NewRNode(m))
		}
	}
}
