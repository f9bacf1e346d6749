package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Render errors end up in PR comments, commit statuses and logs, and
// kustomize's errors quote what they fail on: a malformed inline patch of
// a Secret whole, an env file line as a list of bytes, a literal. So
// every render error passes through one scrubber, which hides
//
//   - the secret material the render read, in each encoding an error may
//     print it in: Secret data and stringData values, generator literals,
//     the content and lines of generator source files, inline patches of
//     Secrets (scrubber.collect gathers them as files are read);
//   - the forms in which kustomize quotes input, whatever it holds
//     (quoteForms), for what was not collected (a file that did not
//     parse).
//
// What is hidden is replaced by "(hidden)", so a reader knows.
type scrubber struct {
	mu        sync.Mutex
	values    map[string]bool // secret strings, as read
	sensitive map[string]bool // generator source files (absolute)
}

// minSecret is the shortest value hidden wherever it appears: shorter
// ones ("1", "no") would hide words of the message, not secrets.
const minSecret = 4

const hidden = "(hidden)"

func (s *scrubber) add(v string) {
	v = strings.TrimSpace(v)
	if len(v) < minSecret {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]bool{}
	}
	s.values[v] = true
}

// addText adds a text and each of its lines, and for KEY=VALUE lines the
// value.
func (s *scrubber) addText(text string) {
	s.add(text)
	for line := range strings.SplitSeq(text, "\n") {
		s.add(line)
		if _, v, ok := strings.Cut(line, "="); ok {
			s.add(v)
		}
		if _, v, ok := strings.Cut(line, ":"); ok {
			s.add(v)
		}
	}
}

// collect gathers the secret material in data, the content of the file
// p (absolute) that the render read.
func (s *scrubber) collect(p string, data []byte) {
	s.mu.Lock()
	sensitive := s.sensitive[path.Clean(p)]
	s.mu.Unlock()
	if sensitive {
		s.addText(string(data))
		return
	}
	if isKustomization(p) {
		s.kustomization(path.Dir(p), data)
		return
	}
	if bytes.Contains(data, []byte("Secret")) {
		s.secrets(data)
	}
}

// kustomization gathers generator literals, marks generator files as
// sensitive, and gathers inline patches that may touch a Secret.
func (s *scrubber) kustomization(dir string, data []byte) {
	var k struct {
		SecretGenerator       []generator   `json:"secretGenerator"`
		ConfigMapGenerator    []generator   `json:"configMapGenerator"`
		Patches               []inlinePatch `json:"patches"`
		PatchesJSON6902       []inlinePatch `json:"patchesJson6902"`
		PatchesStrategicMerge []string      `json:"patchesStrategicMerge"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		// Not parsed, so not known: hide what looks like generator input.
		if bytes.Contains(data, []byte("Generator")) || bytes.Contains(data, []byte("Secret")) {
			s.addText(string(data))
		}
		return
	}
	for _, g := range append(k.SecretGenerator, k.ConfigMapGenerator...) {
		for _, l := range g.Literals {
			s.add(l)
			if _, v, ok := strings.Cut(l, "="); ok {
				s.add(v)
			}
		}
		files := append(slices.Clone(g.Envs), g.Env)
		for _, f := range g.Files {
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			files = append(files, f)
		}
		s.mu.Lock()
		if s.sensitive == nil {
			s.sensitive = map[string]bool{}
		}
		for _, f := range files {
			if f != "" {
				s.sensitive[path.Join(dir, f)] = true
			}
		}
		s.mu.Unlock()
	}
	// An inline patch may set a Secret's values, and kustomize quotes a
	// malformed one whole; patches of other kinds stay readable.
	for _, p := range k.PatchesStrategicMerge {
		if strings.Contains(p, "\n") && strings.Contains(p, "Secret") {
			s.addText(p)
		}
	}
	for _, p := range append(k.Patches, k.PatchesJSON6902...) {
		if p.Target.Kind == "Secret" || strings.Contains(p.Patch, "Secret") {
			s.addText(p.Patch)
		}
	}
}

type inlinePatch struct {
	Patch  string `json:"patch"`
	Target struct {
		Kind string `json:"kind"`
	} `json:"target"`
}

type generator struct {
	Literals []string `json:"literals"`
	Envs     []string `json:"envs"`
	Env      string   `json:"env"`
	Files    []string `json:"files"`
}

// secrets gathers the data and stringData values of the Secrets in data,
// read as objects through yamldocs: a file mentioning "Secret" may be a
// list (a JSON 6902 patch, a replacements file), which is no object.
func (s *scrubber) secrets(data []byte) {
	docs, err := yamldocs.Mappings(data)
	if err != nil {
		if bytes.Contains(data, []byte("kind: Secret")) {
			s.addText(string(data)) // malformed: hide all of it
		}
		return
	}
	for _, d := range docs {
		if d.GetKind() != "Secret" {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, err := d.Pipe(yaml.Lookup(field))
			if err != nil || m == nil {
				continue
			}
			_ = m.VisitFields(func(f *yaml.MapNode) error {
				s.addText(f.Value.YNode().Value)
				return nil
			})
		}
	}
}

// quoteForms are the ways kustomize quotes its input in errors; what
// they quote is hidden whatever it is.
var quoteForms = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A line of an env file, printed as Go prints a []byte.
	{regexp.MustCompile(`line \[[0-9 ]*\] (has invalid utf8 bytes)`), "line (hidden) $1"},
	{regexp.MustCompile(`(has invalid utf8 bytes) : .*`), "$1 (line content hidden)"},
	// A builtin's whole config, inline patches included.
	{regexp.MustCompile("(?s)(with config: )`.*?\n`"), "$1(config hidden)"},
	// A patch quoted as Go quotes a string.
	{regexp.MustCompile(`(?s)(patch from )\[.*\]`), "$1(patch hidden)"},
	// An inline patch taken for a file name.
	{regexp.MustCompile(`(?s)'[^']*\n[^']*' (doesn't exist)`), "(inline patch hidden) $1"},
	{regexp.MustCompile(`invalid literal source .*?, expected key=value`), "invalid literal source (hidden), expected key=value"},
	{regexp.MustCompile(`literal sources \[.*?\]: `), "literal sources (hidden): "},
	{regexp.MustCompile(`(missing (?:key name|file path) for (?:file path|key name)) "[^"]*" in source "[^"]*"`), "$1 (source hidden)"},
	{regexp.MustCompile(`source "[^"]*" (key name or file path contains '=')`), "source (hidden) $1"},
}

// scrub returns msg with the collected secrets, in every encoding, and
// kustomize's quotes of input hidden.
func (s *scrubber) scrub(msg string) string {
	for _, q := range quoteForms {
		msg = q.re.ReplaceAllString(msg, q.repl)
	}
	if s == nil {
		return msg
	}
	s.mu.Lock()
	values := make([]string, 0, len(s.values))
	for v := range s.values {
		values = append(values, v)
	}
	s.mu.Unlock()
	var forms []string
	for _, v := range values {
		forms = append(forms, encodings(v)...)
	}
	// Longest first, so a value is hidden whole before a part of it.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range forms {
		if len(f) >= minSecret {
			msg = strings.ReplaceAll(msg, f, hidden)
		}
	}
	return msg
}

// encodings are the forms in which an error may print v: as is, quoted
// by Go (%q) or JSON, as a list of bytes (%v of a []byte), base64 in its
// four forms, and decoded from base64 (a Secret's data holds its values
// so).
func encodings(v string) []string {
	out := []string{v}
	q := strconv.Quote(v)
	out = append(out, q[1:len(q)-1])
	if j, err := json.Marshal(v); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	b := fmt.Sprint([]byte(v))
	out = append(out, b[1:len(b)-1])
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
		if d, err := enc.DecodeString(v); err == nil && len(d) >= minSecret {
			out = append(out, encodings(string(d))[:4]...) // not base64 of base64
		}
	}
	return out
}

// scrubErr is err with its message scrubbed. An error whose message
// changes becomes a plain error: its chain held the secret.
func (s *scrubber) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.scrub(msg); clean != msg {
		return errors.New(clean)
	}
	return err
}
