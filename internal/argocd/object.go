package argocd

import (
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// objectOf is a parsed YAML mapping as Argo CD reads an object: as
// sigs.k8s.io/yaml decodes it (YAML 1.1 scalars through go-yaml v2,
// then JSON: numbers are float64), in one pass over the node kyaml
// parsed. Writing the node out as YAML text and decoding that again
// gives the same value, at several times the cost: on a repository of
// thousands of Applications that was most of a plan.
//
// The pass decides plain scalars as go-yaml v2 does. What it does not
// decide alike (explicit tags, aliases, merge keys, keys that are not
// plain strings, text that is not UTF-8, numbers JSON cannot hold) goes
// the long way, which is the definition: objectSlow.
func objectOf(n *yaml.RNode) (map[string]any, error) {
	if m, ok := jsonValue(n.YNode(), false).(map[string]any); ok {
		return m, nil
	}
	return objectSlow(n)
}

// objectSlow writes n as YAML and decodes it with sigs.k8s.io/yaml.
func objectSlow(n *yaml.RNode) (map[string]any, error) {
	s, err := n.String()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := sigsyaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// slow is jsonValue's answer for a node it does not decide.
type slow struct{}

// jsonValue is the value of n as objectOf reads it, or slow{}; flow
// says n is inside a flow collection ({…}, […]).
func jsonValue(n *yaml.Node, flow bool) any {
	if n.Style&yaml.TaggedStyle != 0 || n.Anchor != "" {
		return slow{}
	}
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, ok := plainKey(n.Content[i])
			if !ok {
				return slow{}
			}
			v := jsonValue(n.Content[i+1], flow)
			if _, s := v.(slow); s {
				return slow{}
			}
			m[k] = v // a key written twice: the last, as go-yaml v2
		}
		return m
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			v := jsonValue(c, flow)
			if _, s := v.(slow); s {
				return slow{}
			}
			out[i] = v
		}
		return out
	case yaml.ScalarNode:
		return scalarValue(n, flow)
	}
	return slow{} // an alias
}

// plainKey is a mapping key that reads as the same string in go-yaml v2
// and JSON.
func plainKey(k *yaml.Node) (string, bool) {
	if k.Kind != yaml.ScalarNode || k.Style&yaml.TaggedStyle != 0 || k.Anchor != "" || !utf8.ValidString(k.Value) {
		return "", false
	}
	if k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return k.Value, true
	}
	if k.Value == "" || k.Value == "<<" {
		return "", false // null, a merge
	}
	switch v2Class[k.Value[0]] {
	case 0:
		return k.Value, true
	case 'M':
		_, word := v2Words[k.Value]
		return k.Value, !word // a boolean or null key is written anew
	}
	return "", false // perhaps a number

}

// scalarValue is a scalar as go-yaml v2 resolves it, through JSON.
func scalarValue(n *yaml.Node, flow bool) any {
	v := n.Value
	if !utf8.ValidString(v) {
		return slow{}
	}
	// Quoted and block scalars are strings; so is a plain one over
	// several lines, which YAML text writes as a block.
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 || containsNewline(v) {
		return v
	}
	// An empty plain scalar is written quoted inside a flow collection,
	// and so is one kyaml takes for a string though its text reads as
	// null.
	if v == "" {
		if flow || n.Tag == "!!str" {
			return v
		}
		return nil
	}
	switch v2Class[v[0]] {
	case 0:
		if v == "<<" {
			return slow{}
		}
		return v
	case 'M':
		if w, ok := v2Words[v]; ok && !(n.Tag == "!!str" && v3Words[v]) {
			return w
		}
		return v
	}
	// A sign, a digit or a dot: an int, a float, a timestamp (a string
	// to sigs.k8s.io/yaml) or a string, as go-yaml v2 decides, reading
	// the scalar alone.
	var x any
	if err := sigsyaml.Unmarshal([]byte(v), &x); err != nil {
		return slow{}
	}
	switch x := x.(type) {
	case float64, bool:
		return x
	case string:
		if x == v {
			return x
		}
	}
	return slow{} // read alone, it is not that scalar ("---", "1:")
}

func containsNewline(s string) bool {
	for i := range len(s) {
		if s[i] == '\n' {
			return true
		}
	}
	return false
}

// v2Class is go-yaml v2's resolve table: the first characters of plain
// scalars that may not be strings ('M': a word of v2Words; 'S', 'D',
// '.': a number or a timestamp perhaps).
var v2Class = func() [256]byte {
	var t [256]byte
	t['+'], t['-'] = 'S', 'S'
	for _, c := range "0123456789" {
		t[c] = 'D'
	}
	for _, c := range "yYnNtTfFoO~" {
		t[c] = 'M'
	}
	t['.'] = '.'
	return t
}()

// v2Words are the plain words go-yaml v2 reads as booleans or null
// (YAML 1.1's yes, on, off… too, as Argo CD reads them).
var v2Words = func() map[string]any {
	m := map[string]any{}
	for v, words := range map[any][]string{
		true:  {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"},
		false: {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"},
	} {
		for _, w := range words {
			m[w] = v
		}
	}
	for _, w := range []string{"~", "null", "Null", "NULL"} {
		m[w] = nil
	}
	return m
}()

// v3Words are the words of v2Words kyaml's YAML reads as booleans or
// null too: a string of such a word is written quoted.
var v3Words = map[string]bool{"true": true, "True": true, "TRUE": true, "false": true, "False": true, "FALSE": true,
	"~": true, "null": true, "Null": true, "NULL": true}
