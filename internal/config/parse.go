package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Parse parses and validates a configuration file's content; name is the
// file's path, used in messages and to resolve relative paths. Every
// problem found is reported, each as "file:line: field: what is wrong".
func Parse(name string, data []byte) (*Config, error) {
	p := &parser{file: name, dir: filepath.Dir(name)}
	root, err := p.document(data)
	if err != nil {
		return nil, err
	}
	cfg := p.config(root)
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parser walks the YAML node tree by hand rather than decoding into
// structs, so that every error carries its line and field path and all
// of them are reported at once.
type parser struct {
	file string
	dir  string // relative paths in the file are relative to it
	errs []error

	targets map[string]int // lower-cased target name → line, for uniqueness
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.file, n.Line, msg))
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document returns the root node of the file's only YAML document.
func (p *parser) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the configuration is empty", p.file)
		}
		return nil, p.syntax(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, fmt.Errorf("%s:%d: a second YAML document; the configuration is one document", p.file, extra.Line)
	case !errors.Is(err, io.EOF):
		return nil, p.syntax(err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the configuration is empty", p.file)
	}
	return doc.Content[0], nil
}

func (p *parser) syntax(err error) error {
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s: %s", p.file, m[1], m[2])
	}
	return fmt.Errorf("%s: %w", p.file, err)
}

func (p *parser) config(root *yaml.Node) *Config {
	cfg := &Config{
		File:           p.file,
		GitBaseURL:     DefaultGitBaseURL,
		APIBaseURL:     DefaultAPIBaseURL,
		ResyncInterval: DefaultResyncInterval,
		StateDir:       DefaultStateDir,
	}
	p.targets = map[string]int{}
	repos := map[string]int{}
	seen := p.fields(root, "", map[string]func(*yaml.Node, string){
		"repositories": func(v *yaml.Node, field string) {
			for i, item := range p.list(v, field, "repository") {
				r, ok := p.repository(item, fmt.Sprintf("%s[%d]", field, i))
				if !ok {
					continue
				}
				key := strings.ToLower(r.Name)
				if line, dup := repos[key]; dup {
					p.errorf(item, fmt.Sprintf("%s[%d].name", field, i), "repository %q is already configured at line %d", r.Name, line)
					continue
				}
				repos[key] = item.Line
				cfg.Repositories = append(cfg.Repositories, r)
			}
		},
		"gitBaseURL": func(v *yaml.Node, field string) {
			if u, ok := p.url(v, field); ok {
				cfg.GitBaseURL = strings.TrimRight(u, "/")
			}
		},
		"apiBaseURL": func(v *yaml.Node, field string) {
			if u, ok := p.url(v, field); ok {
				cfg.APIBaseURL = strings.TrimRight(u, "/") + "/"
			}
		},
		"resyncInterval": func(v *yaml.Node, field string) {
			if d, ok := p.duration(v, field); ok {
				if d <= 0 {
					p.errorf(v, field, "must be positive")
				} else {
					cfg.ResyncInterval = d
				}
			}
		},
		"stateDir": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				cfg.StateDir = p.localPath(s)
			}
		},
	})
	if seen != nil {
		p.required(root, "", seen, "repositories")
	}
	return cfg
}

func (p *parser) repository(n *yaml.Node, at string) (Repository, bool) {
	var r Repository
	branches := map[string]int{}
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if msg := checkRepoName(s); msg != "" {
					p.errorf(v, field, "%q %s", s, msg)
					return
				}
				r.Name = s
			}
		},
		"cloneURL": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok && s != "" {
				if u, ok := p.url(v, field); ok {
					r.CloneURL = u
				}
			}
		},
		"branches": func(v *yaml.Node, field string) {
			for i, item := range p.list(v, field, "branch") {
				b, ok := p.branch(item, fmt.Sprintf("%s[%d]", field, i))
				if !ok {
					continue
				}
				if line, dup := branches[b.Name]; dup {
					p.errorf(item, fmt.Sprintf("%s[%d].name", field, i), "branch %q is already configured at line %d", b.Name, line)
					continue
				}
				branches[b.Name] = item.Line
				r.Branches = append(r.Branches, b)
			}
		},
	})
	if seen == nil {
		return r, false
	}
	p.required(n, at, seen, "name", "branches")
	return r, r.Name != ""
}

func (p *parser) branch(n *yaml.Node, at string) (Branch, bool) {
	var b Branch
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if msg := checkBranchName(s); msg != "" {
					p.errorf(v, field, "%q %s", s, msg)
					return
				}
				b.Name = s
			}
		},
		"targets": func(v *yaml.Node, field string) {
			for i, item := range p.list(v, field, "target") {
				if t, ok := p.target(item, fmt.Sprintf("%s[%d]", field, i)); ok {
					b.Targets = append(b.Targets, t)
				}
			}
		},
	})
	if seen == nil {
		return b, false
	}
	p.required(n, at, seen, "name", "targets")
	return b, b.Name != ""
}

func (p *parser) target(n *yaml.Node, at string) (Target, bool) {
	t := Target{
		Prune:            true,
		ReconcileTimeout: DefaultReconcileTimeout,
		InventoryPolicy:  DefaultInventoryPolicy,
	}
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, field string) {
			s, ok := p.nonEmpty(v, field)
			if !ok {
				return
			}
			if !targetName.MatchString(s) {
				p.errorf(v, field, "%q must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", s)
				return
			}
			if line, dup := p.targets[strings.ToLower(s)]; dup {
				p.errorf(v, field, "target %q is already defined at line %d; target names are unique in the file", s, line)
				return
			}
			p.targets[strings.ToLower(s)] = v.Line
			t.Name = s
		},
		"overlay": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if clean, msg := checkOverlay(s); msg != "" {
					p.errorf(v, field, "%q %s", s, msg)
				} else {
					t.Overlay = clean
				}
			}
		},
		"environment": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				t.Environment = s
			}
		},
		"kubeconfig": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok && s != "" {
				t.Kubeconfig = p.localPath(s)
			}
		},
		"context": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				t.Context = s
			}
		},
		"inventory": func(v *yaml.Node, field string) {
			if v.Tag == "!!null" {
				return
			}
			t.Inventory = p.inventory(v, field)
		},
		"prune": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				t.Prune = b
			}
		},
		"reconcileTimeout": func(v *yaml.Node, field string) {
			if d, ok := p.duration(v, field); ok {
				if d < 0 {
					p.errorf(v, field, "must not be negative")
				} else {
					t.ReconcileTimeout = d
				}
			}
		},
		"inventoryPolicy": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				switch s {
				case "must-match", "adopt-if-no-inventory", "adopt-all":
					t.InventoryPolicy = s
				default:
					p.errorf(v, field, "%q is not one of must-match, adopt-if-no-inventory, adopt-all", s)
				}
			}
		},
		"allowRemoteBases": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				t.AllowRemoteBases = b
			}
		},
	})
	if seen == nil {
		return t, false
	}
	p.required(n, at, seen, "name", "overlay")
	if t.Environment == "" {
		t.Environment = t.Name
	}
	return t, t.Name != "" && t.Overlay != ""
}

func (p *parser) inventory(n *yaml.Node, at string) *Inventory {
	inv := &Inventory{Kind: "ResourceGroup"}
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"kind": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				switch s {
				case "ResourceGroup", "ConfigMap":
					inv.Kind = s
				case "":
				default:
					p.errorf(v, field, "%q is not ResourceGroup or ConfigMap", s)
				}
			}
		},
		"name": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if msgs := validation.IsDNS1123Subdomain(s); len(msgs) > 0 {
					p.errorf(v, field, "%q is not a valid object name: %s", s, strings.Join(msgs, "; "))
				} else {
					inv.Name = s
				}
			}
		},
		"namespace": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
					p.errorf(v, field, "%q is not a valid namespace: %s", s, strings.Join(msgs, "; "))
				} else {
					inv.Namespace = s
				}
			}
		},
		"id": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				if msgs := validation.IsValidLabelValue(s); len(msgs) > 0 {
					p.errorf(v, field, "%q is not a valid label value: %s", s, strings.Join(msgs, "; "))
				} else {
					inv.ID = s
				}
			}
		},
	})
	if seen == nil {
		return nil
	}
	p.required(n, at, seen, "name", "namespace")
	return inv
}
