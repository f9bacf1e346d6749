package config

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// deref follows aliases (*anchor) to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// fields walks mapping n, calling the handler of each known key with its
// value and the value's field path; unknown, repeated and secret-looking
// keys are errors. It returns the keys seen, or nil when n is not a
// mapping.
func (p *parser) fields(n *yaml.Node, at string, handlers map[string]func(v *yaml.Node, field string)) map[string]bool {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, at, "want a mapping of fields, got %s", describe(n))
		return nil
	}
	seen := map[string]bool{}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		key := k.Value
		field := join(at, key)
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, at, "a field name must be a plain string")
			continue
		}
		if line, dup := lines[key]; dup {
			p.errorf(k, field, "set twice (first at line %d)", line)
			continue
		}
		lines[key] = k.Line
		h, ok := handlers[key]
		if !ok {
			p.unknown(k, field, key, handlers)
			continue
		}
		seen[key] = true
		h(v, field)
	}
	return seen
}

// unknown reports a field the format does not have. Secret-looking names
// get a pointer to the environment and their value is never echoed.
func (p *parser) unknown(k *yaml.Node, field, key string, handlers map[string]func(*yaml.Node, string)) {
	if hint := secretHint(key); hint != "" {
		p.errorf(k, field, "secrets are not read from the configuration file: remove it and %s", hint)
		return
	}
	if key == "<<" {
		p.errorf(k, field, "merge keys are not supported; repeat the fields")
		return
	}
	known := make([]string, 0, len(handlers))
	for name := range handlers {
		if strings.EqualFold(name, key) {
			p.errorf(k, field, "unknown field; did you mean %s?", name)
			return
		}
		known = append(known, name)
	}
	slices.Sort(known)
	p.errorf(k, field, "unknown field (known: %s)", strings.Join(known, ", "))
}

func secretHint(key string) string {
	k := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(key))
	switch {
	case strings.Contains(k, "token"):
		return "set KPLAN_GITHUB_TOKEN or KPLAN_GITHUB_TOKEN_FILE in the environment"
	case strings.Contains(k, "secret"):
		return "set KPLAN_WEBHOOK_SECRET or KPLAN_WEBHOOK_SECRET_FILE in the environment"
	case strings.Contains(k, "password"), strings.Contains(k, "privatekey"), strings.Contains(k, "credential"), k == "apikey":
		return "set KPLAN_WEBHOOK_SECRET(_FILE) and KPLAN_GITHUB_TOKEN(_FILE) in the environment"
	}
	return ""
}

// required reports the keys missing from mapping n.
func (p *parser) required(n *yaml.Node, at string, seen map[string]bool, keys ...string) {
	for _, k := range keys {
		if !seen[k] {
			p.errorf(deref(n), join(at, k), "required")
		}
	}
}

// list returns the items of a sequence; a missing value or an empty
// sequence is an error, as every list of the format needs one item.
func (p *parser) list(v *yaml.Node, field, what string) []*yaml.Node {
	switch {
	case v.Kind == yaml.SequenceNode && len(v.Content) > 0:
		return v.Content
	case v.Kind == yaml.SequenceNode || v.Tag == "!!null":
		p.errorf(v, field, "at least one %s is required", what)
	default:
		p.errorf(v, field, "want a list, got %s", describe(v))
	}
	return nil
}

// str returns a string scalar; null is "". Other scalars (numbers,
// booleans) are errors rather than silently converted: a branch named
// 1.10 must be quoted to stay 1.10.
func (p *parser) str(v *yaml.Node, field string) (string, bool) {
	if v.Kind == yaml.ScalarNode {
		switch v.ShortTag() {
		case "!!str":
			return v.Value, true
		case "!!null":
			return "", true
		}
	}
	p.errorf(v, field, "want a string, got %s (quote it if it is meant as one)", describe(v))
	return "", false
}

func (p *parser) nonEmpty(v *yaml.Node, field string) (string, bool) {
	s, ok := p.str(v, field)
	if ok && s == "" {
		p.errorf(v, field, "must not be empty")
		return "", false
	}
	return s, ok
}

func (p *parser) bool(v *yaml.Node, field string) (bool, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
		return strings.EqualFold(v.Value, "true"), true
	}
	p.errorf(v, field, "want true or false, got %s", describe(v))
	return false, false
}

func (p *parser) duration(v *yaml.Node, field string) (time.Duration, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" {
		if d, err := time.ParseDuration(v.Value); err == nil {
			return d, true
		}
	}
	p.errorf(v, field, "%s is not a duration (e.g. 5m)", describe(v))
	return 0, false
}

// url returns an absolute http(s) URL. Credentials in it are refused and
// never echoed: they belong in the environment.
func (p *parser) url(v *yaml.Node, field string) (string, bool) {
	s, ok := p.nonEmpty(v, field)
	if !ok {
		return "", false
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		// Not echoed: an unparsable URL may still hold credentials.
		p.errorf(v, field, "not an http(s) URL such as https://github.example.com")
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		p.errorf(v, field, "%q is not an http(s) URL", u.Redacted())
	case u.User != nil:
		p.errorf(v, field, "must not carry credentials: remove them and set KPLAN_GITHUB_TOKEN or KPLAN_GITHUB_TOKEN_FILE in the environment")
	case u.RawQuery != "" || u.Fragment != "":
		p.errorf(v, field, "%q must not have a query or fragment", u.Redacted())
	default:
		return s, true
	}
	return "", false
}

// localPath resolves a path of this machine relative to the file's
// directory, so a configuration works from any working directory.
func (p *parser) localPath(s string) string {
	if filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return filepath.Join(p.dir, s)
}

// describe shows a node's value for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}

var (
	repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`)
	// projectPath is a GitLab project's full path: groups, subgroups and
	// the project, each starting with a letter, digit or underscore.
	projectPath = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$`)
	targetName  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
)

func checkRepoName(s, forge string) string {
	if forge == GitLab {
		switch {
		case !projectPath.MatchString(s):
			return "is not a GitLab project's full path (group/project, group/subgroup/project)"
		case strings.HasSuffix(s, ".git"):
			return "is not a project's path: drop the .git"
		}
		return ""
	}
	_, name, _ := strings.Cut(s, "/")
	switch {
	case !repoName.MatchString(s) || name == "." || name == "..":
		return "is not owner/repo"
	case strings.HasSuffix(name, ".git"):
		return "is not owner/repo: drop the .git"
	}
	return ""
}

// checkBranchName applies the rules of git check-ref-format that matter
// for a name written by hand.
func checkBranchName(s string) string {
	switch {
	case strings.HasPrefix(s, "refs/"):
		return "is a ref: write the branch name (main, not refs/heads/main)"
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) }),
		strings.Contains(s, ".."), strings.Contains(s, "@{"), strings.Contains(s, "//"), s == "@",
		strings.HasPrefix(s, "/"), strings.HasSuffix(s, "/"), strings.HasPrefix(s, "."), strings.HasSuffix(s, "."),
		strings.HasPrefix(s, "-"), strings.HasSuffix(s, ".lock"), strings.Contains(s, "/."):
		return "is not a valid branch name"
	}
	return ""
}

// checkOverlay returns the overlay path cleaned, or why it is refused: it
// must name a directory inside the repository.
func checkOverlay(s string) (string, string) {
	if strings.Contains(s, `\`) {
		return "", "must use / as the separator"
	}
	if path.IsAbs(s) || filepath.IsAbs(s) {
		return "", "must be relative to the repository root"
	}
	clean := path.Clean(s)
	if !fs.ValidPath(clean) {
		return "", "must stay inside the repository (no ..)"
	}
	return clean, ""
}
