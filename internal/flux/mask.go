package flux

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Masking what Secret variables make.
//
// Flux substitutes variables in an object's YAML text and parses the
// result again: a value is cut at " #" (the rest is a comment), trimmed,
// unquoted, unescaped ("\x41" is "A"), split into several fields or keys
// ("a, b" in a flow sequence), or turned into a number. Searching the
// printed objects for a Secret's value finds none of these forms. So
// masking goes by provenance instead: the substitution is made twice,
// with the real values (what Flux applies) and with a token in place of
// each Secret variable's value (the twin, which holds no Secret's text
// by construction), and the two results are walked side by side. A
// field is printed from the real objects only where it equals the
// twin's (so nothing a Secret made is in it); elsewhere the twin's
// field is printed, each token shown as its mask, "(value from Secret
// ns/name key K, hidden)"; where the twin has no token there (a Secret's
// value moved text, or a function like ${X:0:3} cut the token),
// maskDerived is printed. Every printed field is thus secret-free text,
// whatever the re-parse did.
//
// A Flux target's digest is taken over the masked objects: kplan does
// not apply Flux targets, and a digest over a Secret's value would let
// whoever sees the plan test guesses of it. That a masked value changed
// is told apart in memory (Result.Masked): the plan marks it changed
// without printing or digesting anything of it.

// maskDerived stands for a field a Secret variable's value made that
// cannot be shown as the twin's.
const maskDerived = "(value from a Secret, hidden)"

// maskOf is the mask that stands for the value from source ("Secret
// ns/name key K", a Helm values leaf adding " path P").
func maskOf(source string) string { return "(value from " + source + ", hidden)" }

// secretSource names where postBuild variable name of a Flux
// Kustomization in namespace ns takes its value: a key of Secret secret.
func secretSource(ns, secret, name string) string {
	return fmt.Sprintf("Secret %s/%s key %s", ns, secret, name)
}

// The errors of a substitution that fails with the Secret variables'
// values, or only without them.
const (
	errHidden     = "postBuild substitution fails with the values of its Secret variables (the error is not shown: it may quote them)"
	errCannotTell = "kplan cannot tell which fields the values of its Secret variables make: without them the substitution fails"
)

// secretTokens are the tokens standing for the Secret variables of one
// substitution.
type secretTokens struct {
	token  map[string]string // variable name -> token
	marker *strings.Replacer // token -> its mask (maskOf)
	prefix string
}

// newSecretTokens picks a token for each Secret variable (secrets:
// name -> value) that none of objs' text and no variable's value holds,
// so that a token in the twin comes from the substitution alone. Tokens
// are plain alphanumerics (a YAML string in every context) of one width,
// so none is a prefix of another. source names where each variable's
// value comes from, for its mask.
func newSecretTokens(objs []*yaml.RNode, vars, secrets map[string]string, source func(name string) string) *secretTokens {
	var text strings.Builder
	for _, o := range objs {
		s, _ := o.String()
		text.WriteString(s)
	}
	for _, v := range vars {
		text.WriteString("\x00" + v)
	}
	prefix := "kplansecret"
	for strings.Contains(strings.ToLower(text.String()), prefix) {
		prefix += "q"
	}
	names := slices.Sorted(maps.Keys(secrets))
	t := &secretTokens{token: map[string]string{}, prefix: prefix}
	width := len(fmt.Sprint(len(names)))
	var rs []string
	for i, n := range names {
		tok := fmt.Sprintf("%s%0*dz", prefix, width, i)
		t.token[n] = tok
		rs = append(rs, tok, maskOf(source(n)))
	}
	t.marker = strings.NewReplacer(rs...)
	return t
}

// hide replaces the tokens in s with their markers, and says whether
// there were any.
func (t *secretTokens) hide(s string) (string, bool) {
	if !strings.Contains(s, t.prefix) {
		return s, false
	}
	return t.marker.Replace(s), true
}

// hideErr is the error to show for Flux Kustomization id's substitution
// that failed with the real values: the real error may quote what the
// values made, the twin's (terr, nil if the twin did not fail) holds
// tokens only.
func (t *secretTokens) hideErr(id string, terr error) error {
	if terr == nil {
		return fmt.Errorf("Flux Kustomization %s: %s", id, errHidden)
	}
	s, _ := t.hide(terr.Error())
	return errors.New(s)
}

// cannotTell is the error for a substitution that only fails with the
// tokens in place of the Secret variables' values (a value that
// completes the YAML around it): which fields they make is unknown.
func (t *secretTokens) cannotTell(id string, terr error) error {
	s, _ := t.hide(terr.Error())
	return fmt.Errorf("Flux Kustomization %s: %s (%s)", id, errCannotTell, s)
}

// maskSecretFields returns real (what Flux applies) with every field a
// Secret variable's value made masked, twin being the substitution with
// tokens; both lists are the same build's objects, in order.
func (t *secretTokens) maskSecretFields(real, twin []*yaml.RNode) []*yaml.RNode {
	out := make([]*yaml.RNode, len(real))
	for i, r := range real {
		out[i] = yaml.NewRNode(t.field(r.YNode(), twin[i].YNode()))
	}
	return out
}

// field is what of r may be printed, tw being its twin.
func (t *secretTokens) field(r, tw *yaml.Node) *yaml.Node {
	if equalNodes(r, tw) {
		return r // tw holds no token (no real value holds one): r is secret-free
	}
	switch {
	case r.Kind == yaml.MappingNode && tw.Kind == yaml.MappingNode:
		return t.mapping(r, tw)
	case r.Kind == yaml.SequenceNode && tw.Kind == yaml.SequenceNode && len(r.Content) == len(tw.Content):
		out := *r
		out.Content = make([]*yaml.Node, len(r.Content))
		for i := range r.Content {
			out.Content[i] = t.field(r.Content[i], tw.Content[i])
		}
		return &out
	}
	if shown, ok := t.template(tw); ok {
		return shown
	}
	return yaml.NewStringRNode(maskDerived).YNode()
}

// mapping is what of mapping r may be printed: its keys that equal the
// twin's, with their values' fields; the twin's keys made by a Secret
// variable, with the twin's values.
func (t *secretTokens) mapping(r, tw *yaml.Node) *yaml.Node {
	twinKey := map[string]int{}
	for j := 0; j+1 < len(tw.Content); j += 2 {
		twinKey[tw.Content[j].Value] = j
	}
	out := *r
	out.Content = nil
	used := map[int]bool{}
	unmatched := false
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := r.Content[i], r.Content[i+1]
		j, ok := twinKey[k.Value]
		if !ok || used[j] || !equalNodes(k, tw.Content[j]) {
			unmatched = true // a key a Secret's value made
			continue
		}
		used[j] = true
		out.Content = append(out.Content, k, t.field(v, tw.Content[j+1]))
	}
	shown := false
	for j := 0; j+1 < len(tw.Content); j += 2 {
		if used[j] {
			continue
		}
		k, ok := t.template(tw.Content[j])
		if !ok {
			continue // a key the real values removed: Flux applies none
		}
		v, _ := t.template(tw.Content[j+1])
		out.Content = append(out.Content, k, v)
		shown = true
	}
	if unmatched && !shown {
		out.Content = append(out.Content, yaml.NewStringRNode(maskDerived).YNode(), yaml.NewStringRNode(maskDerived).YNode())
	}
	return &out
}

// template is a copy of n with its tokens shown as markers, and whether
// it held any.
func (t *secretTokens) template(n *yaml.Node) (*yaml.Node, bool) {
	out := *n
	v, any := t.hide(n.Value)
	if any {
		out.Value, out.Tag, out.Style = v, yaml.NodeTagString, 0
	}
	if len(n.Content) > 0 {
		out.Content = make([]*yaml.Node, len(n.Content))
		for i, c := range n.Content {
			var ok bool
			out.Content[i], ok = t.template(c)
			any = any || ok
		}
	}
	return &out, any
}

// equalNodes says whether a and b are the same YAML (kind, tag, text,
// content; not style or position).
func equalNodes(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !equalNodes(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}
