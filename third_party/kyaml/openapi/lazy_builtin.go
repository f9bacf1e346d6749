// Copyright 2026 The Kubernetes Authors.
// SPDX-License-Identifier: Apache-2.0

package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/kustomize/kyaml/errors"
	"sigs.k8s.io/kustomize/kyaml/openapi/internal/builtinopenapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// kplan's patch: the built-in bundle's definitions are decoded one by one,
// on their first lookup, instead of all 618 at once. Decoding every
// definition into spec.Schema was 37 ms of CPU, on the critical path of
// every build (a build waits for the schema), while a build looks up a few
// dozen definitions at most (those a strategic merge patch walks). The
// bundle is still read whole, its gzip checksum checked, and its resources
// indexed at once; only the definitions' bodies wait.
//
// A definition is looked up the ways the eager parse made it reachable:
// by resource type (SchemaForResourceType, through the bundle's resources,
// which the bundle's own Validate ties to the definitions'
// x-kubernetes-group-version-kind) and by reference from the global schema
// (Resolve with Schema()). Definitions added eagerly (the kustomization
// schema, AddDefinitions) are looked up first, as they were written after
// the built-in ones and so replaced them.
type lazyDefinitions struct {
	mu      sync.Mutex
	raw     map[string]json.RawMessage
	decoded map[string]*spec.Schema
	byType  map[yaml.TypeMeta]string
}

// lazyBundle is the bundle's layout with its definitions left as JSON.
type lazyBundle struct {
	FormatVersion   int                        `json:"formatVersion"`
	Coverage        builtinopenapi.Coverage    `json:"coverage"`
	SelectionPolicy string                     `json:"selectionPolicy"`
	Sources         []builtinopenapi.Source    `json:"sources"`
	Definitions     map[string]json.RawMessage `json:"definitions"`
	Resources       []builtinopenapi.Resource  `json:"resources"`
}

// decodeLazyBundle reads the compressed bundle, leaving each definition as
// JSON. It checks what the bundle's Validate checks that does not need the
// definitions decoded; the rest is checked by kplan's test of the patch
// (internal/render), which decodes every definition both ways.
func decodeLazyBundle(compressed []byte) (*lazyBundle, error) {
	reader, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, errors.Wrap(err)
	}
	data, err := io.ReadAll(reader)
	if err != nil {
		return nil, errors.Wrap(err)
	}
	if err := reader.Close(); err != nil {
		return nil, fmt.Errorf("close gzip reader: %w", err)
	}
	var b lazyBundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, errors.Wrap(err)
	}
	if b.FormatVersion != builtinopenapi.FormatVersion {
		return nil, fmt.Errorf("unsupported built-in OpenAPI bundle format %d", b.FormatVersion)
	}
	if b.SelectionPolicy != builtinopenapi.SelectionPolicy {
		return nil, fmt.Errorf("unsupported built-in OpenAPI selection policy %q", b.SelectionPolicy)
	}
	if len(b.Definitions) == 0 {
		return nil, fmt.Errorf("built-in OpenAPI bundle has no definitions")
	}
	for _, r := range b.Resources {
		if r.Definition == "" {
			continue
		}
		if _, found := b.Definitions[r.Definition]; !found {
			return nil, fmt.Errorf("built-in OpenAPI bundle resource %s %s names missing definition %q", r.APIVersion, r.Kind, r.Definition)
		}
	}
	return &b, nil
}

// parseBuiltinBundleLazily indexes the bundle's resources (scope and
// definition) and keeps its definitions for lookups.
func parseBuiltinBundleLazily(compressed []byte) error {
	b, err := decodeLazyBundle(compressed)
	if err != nil {
		return err
	}
	l := &lazyDefinitions{raw: b.Definitions, decoded: map[string]*spec.Schema{}, byType: map[yaml.TypeMeta]string{}}
	if globalSchema.namespaceabilityByResourceType == nil {
		globalSchema.namespaceabilityByResourceType = make(map[yaml.TypeMeta]bool)
	}
	for _, resource := range b.Resources {
		typeMeta := yaml.TypeMeta{APIVersion: resource.APIVersion, Kind: resource.Kind}
		if resource.Definition != "" {
			l.byType[typeMeta] = resource.Definition
		}
		switch resource.Scope {
		case builtinopenapi.ScopeUnknown:
		case builtinopenapi.ScopeNamespaced:
			globalSchema.namespaceabilityByResourceType[typeMeta] = true
		case builtinopenapi.ScopeCluster:
			globalSchema.namespaceabilityByResourceType[typeMeta] = false
		}
	}
	globalSchema.lazy = l
	return nil
}

// definition returns the named definition, decoding it the first time.
// The bundle is built into the binary: a definition that does not decode
// is a broken build, as the eager parse's panic said.
func (l *lazyDefinitions) definition(name string) (*spec.Schema, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.decoded[name]; ok {
		return s, true
	}
	raw, ok := l.raw[name]
	if !ok {
		return nil, false
	}
	s := new(spec.Schema)
	if err := s.UnmarshalJSON(raw); err != nil {
		panic(fmt.Errorf("built-in OpenAPI definition %q: %w", name, err))
	}
	l.decoded[name] = s
	return s, true
}

// forType returns the definition of a resource type.
func (l *lazyDefinitions) forType(t yaml.TypeMeta) (*spec.Schema, bool) {
	name, ok := l.byType[t]
	if !ok {
		return nil, false
	}
	return l.definition(name)
}

// resolveLazily resolves ref against the global schema when it points into
// a built-in definition no eager one replaced: the definition is decoded
// and the rest of the pointer followed inside it.
func resolveLazily(root interface{}, ref *spec.Ref) (*spec.Schema, bool, error) {
	l := globalSchema.lazy
	// As resolve does, only the pointer counts, whatever the URL before it.
	if l == nil || root != &globalSchema.schema {
		return nil, false, nil
	}
	tokens := ref.GetPointer().DecodedTokens()
	if len(tokens) < 2 || tokens[0] != Definitions {
		return nil, false, nil
	}
	if _, eager := globalSchema.schema.Definitions[tokens[1]]; eager {
		return nil, false, nil
	}
	def, ok := l.definition(tokens[1])
	if !ok {
		return nil, false, nil
	}
	if len(tokens) == 2 {
		c := *def
		return &c, true, nil
	}
	one := &spec.Schema{SchemaProps: spec.SchemaProps{Definitions: spec.Definitions{tokens[1]: *def}}}
	s, err := resolve(one, ref)
	return s, true, err
}
