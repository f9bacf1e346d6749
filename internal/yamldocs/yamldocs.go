// Package yamldocs is kplan's reader of repository YAML as objects: the
// mapping documents of a file, every other document (a top-level list, as
// a JSON 6902 patch or a replacements file is; a scalar; an empty one)
// skipped, so that no caller meets a node kyaml's getters (GetKind,
// GetApiVersion, GetName …) panic on.
//
// It is the one door: test/yamlreaders_test.go fails on a direct
// multi-document parser (kio.ByteReader, a YAML decoder, yaml.Parse) of
// repository or chart text elsewhere in the tree.
package yamldocs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Mappings returns the mapping documents of data, in order, and an error
// when data does not parse as YAML. Aliases stay aliases (nothing is
// copied per alias, so an alias bomb costs its text, not its expansion);
// the nodes' decoders (RNode.Map, Decode) resolve them.
func Mappings(data []byte) ([]*yaml.RNode, error) {
	out, _, err := Split(data)
	return out, err
}

// Split returns the mapping documents of data, in order, and how many
// other non-empty documents (lists, scalars other than null, mappings
// whose metadata, labels or annotations are not mappings, on which
// kyaml's GetName and GetLabels panic and which no tool applies) it
// skipped: a caller
// for which such a document means "this file is not what I read" (a
// plugin config that is a path) asks for the count.
func Split(data []byte) (mappings []*yaml.RNode, others int, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return mappings, others, nil
		}
		if err != nil {
			return nil, 0, err
		}
		m := &n
		if m.Kind == yaml.DocumentNode {
			if len(m.Content) == 0 {
				continue
			}
			m = m.Content[0]
		}
		if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
			continue // an empty document, as kustomize and kubectl skip it
		}
		if m.Kind != yaml.MappingNode || !objectShaped(m) {
			others++
			continue
		}
		mappings = append(mappings, yaml.NewRNode(m))
	}
}

// Objects returns the objects of data as kubectl, Helm's client and Argo
// CD read a manifest stream: its mapping documents, a List (a kind ending
// in "List" with an items sequence) replaced by its mapping items.
func Objects(data []byte) ([]*yaml.RNode, error) {
	docs, err := Mappings(data)
	if err != nil {
		return nil, err
	}
	var out []*yaml.RNode
	for _, d := range docs {
		items := d.Field("items")
		if !strings.HasSuffix(scalar(d, "kind"), "List") || items == nil || items.Value.YNode().Kind != yaml.SequenceNode {
			out = append(out, d)
			continue
		}
		for _, it := range items.Value.YNode().Content {
			if it.Kind == yaml.MappingNode && objectShaped(it) {
				out = append(out, yaml.NewRNode(it))
			}
		}
	}
	return out, nil
}

// One returns the single mapping document of a file read as one object
// (a kustomization, a Kptfile), and an error when it does not parse or
// holds anything else.
func One(data []byte) (*yaml.RNode, error) {
	docs, others, err := Split(data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 || others != 0 {
		return nil, fmt.Errorf("want one YAML mapping, found %d mapping and %d other documents", len(docs), others)
	}
	return docs[0], nil
}

// scalar is the value of n's field k when it is a scalar, else "".
func scalar(n *yaml.RNode, k string) string {
	if f := n.Field(k); f != nil && f.Value.YNode().Kind == yaml.ScalarNode {
		return f.Value.YNode().Value
	}
	return ""
}

// objectShaped says whether kyaml's metadata getters can read the mapping
// m: each of its metadata fields (a key may repeat), and their labels and
// annotations, are mappings, or null.
func objectShaped(m *yaml.Node) bool {
	for _, meta := range fields(m, "metadata") {
		if meta.Kind != yaml.MappingNode {
			return false
		}
		for _, v := range append(fields(meta, "labels"), fields(meta, "annotations")...) {
			if v.Kind != yaml.MappingNode {
				return false
			}
		}
	}
	return true
}

// fields are the values of m's keys k that are not null, aliases
// resolved.
func fields(m *yaml.Node, k string) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != k {
			continue
		}
		v := m.Content[i+1]
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		out = append(out, v)
	}
	return out
}
