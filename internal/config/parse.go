package config

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"io"
	"maps"
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
	versioned, err := p.version(root)
	if err != nil {
		return nil, err
	}
	cfg := p.config(root)
	if !versioned {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s has no apiVersion and kind: reading it as %s %s; add \"apiVersion: %s\" and \"kind: %s\" at its top, as unversioned files will be refused in a later version", p.file, APIVersion, Kind, APIVersion, Kind))
	}
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

// version checks the file's apiVersion and kind before anything else: a
// file of another version or kind is refused whole, not as a list of
// fields this version does not know. It says whether the file is
// versioned; a file with neither is read as the current version.
func (p *parser) version(root *yaml.Node) (bool, error) {
	root = deref(root)
	if root.Kind != yaml.MappingNode {
		return false, nil // config reports it
	}
	var apiVersion, kind *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = deref(root.Content[i+1])
		case "kind":
			kind = deref(root.Content[i+1])
		}
	}
	switch {
	case apiVersion == nil && kind == nil:
		return false, nil
	case apiVersion == nil:
		return false, fmt.Errorf("%s:%d: apiVersion: required with kind (apiVersion: %s)", p.file, kind.Line, APIVersion)
	case kind == nil:
		return false, fmt.Errorf("%s:%d: kind: required with apiVersion (kind: %s)", p.file, apiVersion.Line, Kind)
	case apiVersion.Kind != yaml.ScalarNode || apiVersion.Value != APIVersion:
		return false, fmt.Errorf("%s:%d: apiVersion: %q is not a version this kplan-webhook reads (%s)", p.file, apiVersion.Line, apiVersion.Value, APIVersion)
	case kind.Kind != yaml.ScalarNode || kind.Value != Kind:
		hint := ""
		if kind.Value == "Repository" {
			hint = "; kind Repository is a repository's .kplan.yaml"
		}
		return false, fmt.Errorf("%s:%d: kind: %q is not %s, the webhook's configuration%s", p.file, kind.Line, kind.Value, Kind, hint)
	}
	return true, nil
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
		GitLabURL:      DefaultGitLabURL,
		APIBaseURL:     DefaultAPIBaseURL,
		ResyncInterval: DefaultResyncInterval,
		StateDir:       DefaultStateDir,
		GitBasesMaxAge: DefaultGitBasesMaxAge,
		DeployNowLabel: DefaultDeployNowLabel,
	}
	p.targets = map[string]int{}
	repos := map[string]int{}
	seen := p.fields(root, "", map[string]func(*yaml.Node, string){
		"apiVersion": func(*yaml.Node, string) {}, // checked by version
		"kind":       func(*yaml.Node, string) {},
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
		"gitlabURL": func(v *yaml.Node, field string) {
			if u, ok := p.url(v, field); ok {
				cfg.GitLabURL = strings.TrimRight(u, "/")
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
		"gitBasesMaxAge": func(v *yaml.Node, field string) {
			if d, ok := p.duration(v, field); ok {
				if d < 0 {
					p.errorf(v, field, "must be positive, or 0s to keep git bases")
				} else {
					cfg.GitBasesMaxAge = d
				}
			}
		},
		"deployNowLabel": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				cfg.DeployNowLabel = s
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
	p.sharedInventories(cfg)
	p.dependencies(cfg)
	return cfg
}

// sharedInventories refuses two targets that would apply through the same
// inventory in the same cluster: each apply would prune the other's
// objects. What the file alone decides is checked here: explicit
// inventory overrides, and the same overlay of the same branch deployed
// twice to one cluster and namespace. Inventories the overlays render are
// checked by the deployer when it renders them.
func (p *parser) sharedInventories(cfg *Config) {
	type seen struct {
		name string
		line int
	}
	byInventory := map[string]seen{}
	byOverlay := map[string]seen{}
	for _, ref := range cfg.AllTargets() {
		t := ref.Target
		line := p.targets[strings.ToLower(t.Name)]
		var keys [][2]string // key, what it is; the object before the id
		if i := t.Inventory; i != nil {
			id := i.ID
			keys = [][2]string{
				{t.Cluster() + "\x00object\x00" + i.Kind + "\x00" + i.Namespace + "\x00" + i.Name, fmt.Sprintf("%s %s/%s", i.Kind, i.Namespace, i.Name)},
				{t.Cluster() + "\x00id\x00" + id, "inventory-id " + id},
			}
		} else {
			k := t.Cluster() + "\x00" + strings.ToLower(ref.Repo) + "\x00" + ref.Branch + "\x00" + t.Overlay + "\x00" + t.Namespace
			if first, dup := byOverlay[k]; dup {
				p.errs = append(p.errs, fmt.Errorf("%s:%d: targets %q (line %d) and %q deploy overlay %s of %s@%s to the same cluster and namespace, so both apply through the inventory it renders and each would prune the other's objects: give one its own inventory (inventory: in this file, or kplan init in a copy of the overlay)",
					p.file, line, first.name, first.line, t.Name, t.Overlay, ref.Repo, ref.Branch))
			} else {
				byOverlay[k] = seen{t.Name, line}
			}
		}
		for _, k := range keys {
			if first, dup := byInventory[k[0]]; dup {
				p.errs = append(p.errs, fmt.Errorf("%s:%d: targets %q (line %d) and %q use the same inventory (%s) in the same cluster (kubeconfig %q, context %q): applying one would prune the other's objects; give each target its own inventory",
					p.file, line, first.name, first.line, t.Name, k[1], t.Kubeconfig, t.Context))
				break
			}
		}
		for _, k := range keys {
			if _, dup := byInventory[k[0]]; !dup {
				byInventory[k[0]] = seen{t.Name, line}
			}
		}
	}
}

func (p *parser) repository(n *yaml.Node, at string) (Repository, bool) {
	r := Repository{Forge: GitHub}
	branches := map[string]int{}
	var nameNode *yaml.Node
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				r.Name, nameNode = s, v
			}
		},
		"forge": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if s != GitHub && s != GitLab {
					p.errorf(v, field, "%q is not a forge: github or gitlab", s)
					return
				}
				r.Forge = s
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
	// A GitLab project's path may hold subgroups: checked once the
	// forge is known.
	if nameNode != nil {
		if msg := checkRepoName(r.Name, r.Forge); msg != "" {
			p.errorf(nameNode, at+".name", "%q %s", r.Name, msg)
			r.Name = ""
		}
	}
	p.required(n, at, seen, "name", "branches")
	return r, r.Name != ""
}

func (p *parser) branch(n *yaml.Node, at string) (Branch, bool) {
	var b Branch
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"targetsFrom": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if clean, msg := checkOverlay(s); msg != "" || clean == "." {
					p.errorf(v, field, "%q must name a file in the repository, such as .kplan.yaml", s)
				} else {
					b.TargetsFrom = clean
				}
			}
		},
		"environments": func(v *yaml.Node, field string) {
			b.Environments = p.environments(v, field)
		},
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
	if seen["targetsFrom"] {
		p.required(n, at, seen, "name", "environments")
	} else {
		p.required(n, at, seen, "name", "targets")
		if seen["environments"] {
			p.errorf(deref(n), join(at, "environments"), "only used with targetsFrom (the environments of the repository's targets)")
		}
	}
	return b, b.Name != ""
}

// environments reads a mapping of environment name to cluster settings.
func (p *parser) environments(n *yaml.Node, at string) []Environment {
	n = deref(n)
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		p.errorf(n, at, "want a mapping of environment names to clusters (kubeconfig, context, prune, …), got %s", describe(n))
		return nil
	}
	var out []Environment
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := join(at, k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			p.errorf(k, at, "an environment name must be a non-empty string")
			continue
		}
		if line, dup := lines[k.Value]; dup {
			p.errorf(k, field, "set twice (first at line %d)", line)
			continue
		}
		lines[k.Value] = k.Line
		e := Environment{Name: k.Value, Settings: defaultSettings()}
		if deref(v).Tag == "!!null" {
			out = append(out, e) // all defaults: the in-cluster config
			continue
		}
		if p.fields(v, field, p.settings(&e.Settings)) != nil {
			out = append(out, e)
		}
	}
	return out
}

func defaultSettings() Settings {
	return Settings{Prune: true, ReconcileTimeout: DefaultReconcileTimeout, InventoryPolicy: DefaultInventoryPolicy}
}

// settings are the handlers of the fields a target and an environment
// share: how to reach the cluster and how to apply there.
func (p *parser) settings(s *Settings) map[string]func(*yaml.Node, string) {
	handlers := p.renderOptions(&s.Render)
	maps.Copy(handlers, map[string]func(*yaml.Node, string){
		"kubeconfig": func(v *yaml.Node, field string) {
			if str, ok := p.str(v, field); ok && str != "" {
				s.Kubeconfig = p.localPath(str)
			}
		},
		"context": func(v *yaml.Node, field string) {
			if str, ok := p.str(v, field); ok {
				s.Context = str
			}
		},
		"prune": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				s.Prune = b
			}
		},
		"reconcileTimeout": func(v *yaml.Node, field string) {
			if d, ok := p.duration(v, field); ok {
				if d < 0 {
					p.errorf(v, field, "must not be negative")
				} else {
					s.ReconcileTimeout = d
				}
			}
		},
		"inventoryPolicy": func(v *yaml.Node, field string) {
			if str, ok := p.str(v, field); ok {
				switch str {
				case "must-match", "adopt-if-no-inventory", "adopt-all":
					s.InventoryPolicy = str
				default:
					p.errorf(v, field, "%q is not one of must-match, adopt-if-no-inventory, adopt-all", str)
				}
			}
		},
		"allowRemoteBases": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				s.AllowRemoteBases = b
			}
		},
		"remoteHosts": func(v *yaml.Node, field string) {
			s.RemoteHosts = nil
			for i, item := range p.list(v, field, "host") {
				h, ok := p.nonEmpty(item, fmt.Sprintf("%s[%d]", field, i))
				if !ok {
					continue
				}
				if _, err := netpolicy.New([]string{h}, ""); err != nil {
					p.errorf(item, fmt.Sprintf("%s[%d]", field, i), "%v", err)
					continue
				}
				s.RemoteHosts = append(s.RemoteHosts, h)
			}
		},
		// What the target's cluster runs, for the charts its helmCharts
		// inflate (render.Options KubeVersion and APIVersions).
		"kubeVersion": func(v *yaml.Node, field string) {
			if str, ok := p.nonEmpty(v, field); ok {
				kv, err := kubeversion.Parse(str)
				if err != nil {
					p.errorf(v, field, "%v", err)
					return
				}
				s.Render.KubeVersion = kv
			}
		},
		"apiVersions": func(v *yaml.Node, field string) {
			s.Render.APIVersions = nil
			for i, item := range p.list(v, field, "API version") {
				at := fmt.Sprintf("%s[%d]", field, i)
				a, ok := p.nonEmpty(item, at)
				if !ok {
					continue
				}
				if err := kubeversion.CheckAPIVersions([]string{a}); err != nil {
					p.errorf(item, at, "%q: want group/version or group/version/Kind (e.g. monitoring.coreos.com/v1/ServiceMonitor)", a)
					continue
				}
				s.Render.APIVersions = append(s.Render.APIVersions, a)
			}
		},
		"chartCredentials": func(v *yaml.Node, field string) {
			c := &ChartCredentials{}
			p.fields(v, field, map[string]func(*yaml.Node, string){
				"registryConfig": func(v *yaml.Node, field string) {
					if str, ok := p.nonEmpty(v, field); ok {
						c.RegistryConfig = p.localPath(str)
					}
				},
				"repositoryConfig": func(v *yaml.Node, field string) {
					if str, ok := p.nonEmpty(v, field); ok {
						c.RepositoryConfig = p.localPath(str)
					}
				},
			})
			if c.RegistryConfig == "" && c.RepositoryConfig == "" {
				p.errorf(v, field, "name registryConfig (a Docker config.json) or repositoryConfig (Helm's repositories.yaml), or both")
				return
			}
			s.ChartCredentials = c
		},
		"allowReplaceInventory": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				s.AllowReplaceInventory = b
			}
		},
		"requireReviewedPlan": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				s.RequireReviewedPlan = b
			}
		},
	})
	return handlers
}

func (p *parser) target(n *yaml.Node, at string) (Target, bool) {
	t := Target{Settings: defaultSettings()}
	handlers := p.settings(&t.Settings)
	maps.Copy(handlers, map[string]func(*yaml.Node, string){
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
		"inventory": func(v *yaml.Node, field string) {
			if v.Tag == "!!null" {
				return
			}
			t.Inventory = p.inventory(v, field)
		},
		"namespace": func(v *yaml.Node, field string) {
			if s, ok := p.nonEmpty(v, field); ok {
				if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
					p.errorf(v, field, "%q is not a valid namespace: %s", s, strings.Join(msgs, "; "))
				} else {
					t.Namespace = s
				}
			}
		},
		"dependsOn": func(v *yaml.Node, field string) {
			for i, item := range p.list(v, field, "target") {
				if s, ok := p.nonEmpty(item, fmt.Sprintf("%s[%d]", field, i)); ok {
					t.DependsOn = append(t.DependsOn, s)
				}
			}
		},
		"deployWindows": func(v *yaml.Node, field string) {
			t.Windows = p.windows(v, field)
		},
		"freeze": func(v *yaml.Node, field string) {
			if b, ok := p.bool(v, field); ok {
				t.Freeze = b
			}
		},
	})
	seen := p.fields(n, at, handlers)
	if seen == nil {
		return t, false
	}
	p.required(n, at, seen, "name", "overlay")
	if t.Environment == "" {
		t.Environment = t.Name
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	return t, t.Name != "" && t.Overlay != ""
}

func (p *parser) inventory(n *yaml.Node, at string) *Inventory {
	inv := &Inventory{Kind: inventory.DefaultBackend}
	seen := p.fields(n, at, map[string]func(*yaml.Node, string){
		"kind": func(v *yaml.Node, field string) {
			if s, ok := p.str(v, field); ok {
				if _, ok := inventory.BackendOf(s); !ok {
					p.errorf(v, field, "%q is not %s", s, inventory.BackendKinds())
				} else if s != "" {
					inv.Kind = s
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
	// One naming rule with the plan and the apply (inventory.IdentityOf).
	id := inventory.IdentityOf(inv.Kind, inv.Name, inv.Namespace, map[string]string{inventory.InventoryIDLabel: inv.ID}, "")
	return &id
}
