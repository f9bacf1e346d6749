// Package config reads the webhook's configuration file: which
// repositories and branches deploy which overlays to which clusters.
//
// The file is YAML, kind WebhookConfig of apiVersion kplan.dev/v1alpha1.
// example.yaml in this directory sets every field, with its default and
// meaning; it is the one reference (docs/webhook.md copies it, and tests
// load it and check it against the parser's fields). A file without
// apiVersion and kind is read as v1alpha1 with a deprecation warning
// (Config.Warnings).
//
// A repository target (from targetsFrom) whose environment is not listed
// under environments is reported on its commit and not deployed. Two
// targets of one cluster (same kubeconfig and context) must not share an
// inventory: explicit inventories, and one overlay of one branch deployed
// twice to a cluster and namespace, are errors here; inventories the
// overlays render are checked by the deployer.
//
// Relative kubeconfig and stateDir paths are relative to the directory of
// the configuration file. Unknown fields are errors, so a misspelt field
// does not silently fall back to a default. Secrets are never read from
// this file: see Secrets.
package config

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/render"
)

// The version of the file's format, and its kind.
const (
	APIVersion = "kplan.dev/v1alpha1"
	Kind       = "WebhookConfig"
)

// Defaults of optional fields.
const (
	DefaultGitBaseURL       = "https://github.com"
	DefaultGitLabURL        = "https://gitlab.com"
	DefaultAPIBaseURL       = "https://api.github.com/"
	DefaultResyncInterval   = 5 * time.Minute
	DefaultStateDir         = "/var/lib/kplan"
	DefaultGitBasesMaxAge   = 7 * 24 * time.Hour
	DefaultReconcileTimeout = 5 * time.Minute
	DefaultInventoryPolicy  = "must-match"
	DefaultNamespace        = "default"
)

// Config is a parsed and validated configuration file.
type Config struct {
	// File is the name the configuration was parsed from, for messages.
	File         string
	Repositories []Repository
	GitBaseURL   string // no trailing slash
	// GitLabURL is the GitLab instance of the repositories whose forge is
	// GitLab (no trailing slash): clone URLs <GitLabURL>/<path>.git, the
	// API at <GitLabURL>/api/v4.
	GitLabURL      string
	APIBaseURL     string // with a trailing slash, as go-github wants
	ResyncInterval time.Duration
	StateDir       string
	// GitBasesMaxAge is how long a git remote base no deploy uses stays in
	// the cache under StateDir; 0 keeps them.
	GitBasesMaxAge time.Duration
	// DeployNowLabel, added to a merged pull request by a user with write
	// access, deploys its merge at once, outside its targets' windows and
	// freeze (DefaultDeployNowLabel).
	DeployNowLabel string
	// Warnings are what the file should change but still works with (no
	// apiVersion and kind), for the caller to log.
	Warnings []string
}

// The forges a repository can be on (Repository.Forge).
const (
	GitHub = "github"
	GitLab = "gitlab"
)

// Repository is one repository (a GitHub repository, a GitLab project)
// and the branches that deploy.
type Repository struct {
	Name string // owner/repo (GitLab: the project's full path) as written in the file
	// Forge is where the repository is: GitHub (the default) or GitLab. A
	// delivery deploys it only from its own forge.
	Forge    string
	CloneURL string // the override as written; see Config.CloneURL
	Branches []Branch
}

// Branch lists the targets a branch deploys to: those of the file, and,
// with TargetsFrom, those the repository declares at the deployed commit.
type Branch struct {
	Name    string
	Targets []Target
	// TargetsFrom is the repository file (.kplan.yaml) whose targets the
	// branch deploys, read at each deployed commit; "" for none.
	TargetsFrom string
	// Environments map the environments the repository's targets name to
	// clusters and settings; a target whose environment is not here is
	// reported and not deployed.
	Environments []Environment
}

// Settings say how a target deploys to its cluster.
type Settings struct {
	Kubeconfig       string // empty: in-cluster config
	Context          string
	Prune            bool
	ReconcileTimeout time.Duration
	InventoryPolicy  string // must-match, adopt-if-no-inventory or adopt-all
	AllowRemoteBases bool
	// RemoteHosts are the hosts the target's renders may fetch http(s)
	// resources from (netpolicy: HOST, *.DOMAIN or *); none by default.
	RemoteHosts []string
	// AllowReplaceInventory lets a deploy prune every object its inventory
	// held while it adds others (the signature of a copied inventory).
	AllowReplaceInventory bool
	// RequireReviewedPlan refuses to apply a merged render that is not
	// the one the pull request's plan comment showed (its digest).
	RequireReviewedPlan bool
	// ChartCredentials, when set, are the target's own chart
	// credentials, in place of the webhook's (the standard places,
	// charts.Standard): what its charts are fetched with, and nothing
	// else's.
	ChartCredentials *ChartCredentials
	// Render holds the target's render options: the fields of
	// render.Options tagged `target:"name"` (enableHelm: helmCharts with
	// the helm on the webhook's PATH, as kplan diff --enable-helm).
	Render render.Options
}

// ChartCredentials are files holding chart credentials (a mounted
// Secret's), read again at each deploy.
type ChartCredentials struct {
	// RegistryConfig is a Docker config.json (`helm registry login`'s)
	// for OCI registries; "" none.
	RegistryConfig string
	// RepositoryConfig is Helm's repositories.yaml for HTTP chart
	// repositories (username, password, TLS files); "" none.
	RepositoryConfig string
}

// ApplyUnreviewedLabel, added to a merged pull request, deploys its merge
// once without requireReviewedPlan's check while it is still the
// branch's tip: someone with write access owns the difference.
const ApplyUnreviewedLabel = "kplan/apply-unreviewed"

// Cluster identifies the cluster the settings point at, for the check
// that no two targets share an inventory there.
func (s Settings) Cluster() string { return s.Kubeconfig + "\x00" + s.Context }

// Target is one overlay deployed to one cluster.
type Target struct {
	Name        string
	Overlay     string // clean, slash-separated, relative to the repository root ("." for the root)
	Environment string // never empty: defaults to Name
	// Namespace receives namespaced objects rendered without a namespace;
	// never empty: defaults to "default".
	Namespace string
	Inventory *Inventory // nil: the inventory the overlay renders
	Settings
	// FromFile is set only on the stand-in target Config.Targets returns
	// for a branch with TargetsFrom: it names the file whose targets deploy.
	FromFile string
	// DependsOn names targets of the same repository and branch that
	// must have deployed a commit (applied, every object reconciled)
	// before this target applies it; one that failed stops it.
	DependsOn []string
	// Windows are when the target may deploy (none: any time); a merge
	// outside them waits for the next one.
	Windows []Window
	// Freeze stops the target's deploys until it is unset (or the
	// deploy-now label overrides it).
	Freeze bool
}

// Environment maps an environment name of .kplan.yaml to a cluster.
type Environment struct {
	Name string
	Settings
}

// Source is a branch whose targets come from a repository file.
type Source struct {
	Name         string // SourceName(Repo, Branch): the stand-in target's name
	Repo         string // as written in the file
	Branch       string
	CloneURL     string
	Forge        string // GitHub or GitLab
	File         string
	Environments []Environment
}

// SourceName names the stand-in target of a branch's repository targets.
func SourceName(repo, branch string) string { return repo + "@" + branch }

// Inventory overrides the inventory object an overlay renders; its ID
// is never empty once parsed (default <name>-<namespace>).
type Inventory = inventory.Identity

// TargetRef is a target with the repository and branch it deploys from.
type TargetRef struct {
	Repo     string // as written in the file
	Branch   string
	CloneURL string
	Forge    string // GitHub or GitLab
	Target   Target
}

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Repository returns the configured repository named repo (owner/name,
// case-insensitively, as GitHub treats names), or nil.
func (c *Config) Repository(repo string) *Repository {
	for i := range c.Repositories {
		if strings.EqualFold(c.Repositories[i].Name, repo) {
			return &c.Repositories[i]
		}
	}
	return nil
}

// Targets returns the targets that branch of repo deploys to, nil when
// the repository or branch is not configured. Branch names are exact: git
// branch names are case-sensitive. A branch that takes its targets from a
// repository file adds one stand-in target (FromFile set, named
// SourceName), since which targets the file lists is known only at the
// commit.
func (c *Config) Targets(repo, branch string) []Target {
	r := c.Repository(repo)
	if r == nil {
		return nil
	}
	for _, b := range r.Branches {
		if b.Name == branch {
			if b.TargetsFrom == "" {
				return b.Targets
			}
			return append(slices.Clone(b.Targets), Target{Name: SourceName(r.Name, b.Name), FromFile: b.TargetsFrom})
		}
	}
	return nil
}

// Sources lists every branch that takes its targets from a repository
// file, in file order.
func (c *Config) Sources() []Source {
	var out []Source
	for _, r := range c.Repositories {
		for _, b := range r.Branches {
			if b.TargetsFrom != "" {
				out = append(out, Source{Name: SourceName(r.Name, b.Name), Repo: r.Name, Branch: b.Name,
					CloneURL: c.CloneURL(r.Name), Forge: c.ForgeOf(r.Name), File: b.TargetsFrom, Environments: b.Environments})
			}
		}
	}
	return out
}

// Environment returns the settings of the environment named name.
func (s Source) Environment(name string) (Environment, bool) {
	for _, e := range s.Environments {
		if e.Name == name {
			return e, true
		}
	}
	return Environment{}, false
}

// AllTargets lists every target of the file, in file order.
func (c *Config) AllTargets() []TargetRef {
	var refs []TargetRef
	for _, r := range c.Repositories {
		cloneURL := c.CloneURL(r.Name)
		for _, b := range r.Branches {
			for _, t := range b.Targets {
				refs = append(refs, TargetRef{Repo: r.Name, Branch: b.Name, CloneURL: cloneURL, Forge: c.ForgeOf(r.Name), Target: t})
			}
		}
	}
	return refs
}

// TargetNames lists the names of the file's targets of repo (owner/name,
// case-insensitively): a target the repository declares must not reuse
// one, or both would report on the same commit status.
func (c *Config) TargetNames(repo string) []string {
	var names []string
	for _, ref := range c.AllTargets() {
		if strings.EqualFold(ref.Repo, repo) {
			names = append(names, ref.Target.Name)
		}
	}
	return names
}

// CloneURL returns where repo is fetched from: its cloneURL override, else
// <gitBaseURL>/<owner>/<repo>.git; "" for a repository not configured.
func (c *Config) CloneURL(repo string) string {
	r := c.Repository(repo)
	if r == nil {
		return ""
	}
	if r.CloneURL != "" {
		return r.CloneURL
	}
	if r.Forge == GitLab {
		var parts []string
		for _, p := range strings.Split(r.Name, "/") {
			parts = append(parts, url.PathEscape(p))
		}
		return c.GitLabURL + "/" + strings.Join(parts, "/") + ".git"
	}
	owner, name, _ := strings.Cut(r.Name, "/")
	return c.GitBaseURL + "/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + ".git"
}

// ClustersOf says which clusters the file's targets deploy each overlay
// of repo to, on any of its branches: what a plan of that repository
// needs to tell which overlays meet in one cluster (kplan diff
// --webhook-config, the Action's webhook-config). A cluster is named by
// its kubeconfig and context ("in-cluster" for the webhook's own); the
// targets a branch takes from the repository's file are not listed:
// the plan reads that file itself.
func (c *Config) ClustersOf(repo string) map[string][]string {
	r := c.Repository(repo)
	if r == nil {
		return nil
	}
	out := map[string][]string{}
	for _, b := range r.Branches {
		for _, t := range b.Targets {
			cl := cmp.Or(t.Kubeconfig, "in-cluster")
			if t.Context != "" {
				cl += "#" + t.Context
			}
			if !slices.Contains(out[t.Overlay], cl) {
				out[t.Overlay] = append(out[t.Overlay], cl)
			}
		}
	}
	return out
}

// DeployedTo reads the webhook's configuration file at path for a plan of
// repository repo: ClustersOf that repository, and its RolloutNotes. With
// repo empty, the file must configure exactly one repository. A plan's
// front ends (kplan diff --webhook-config, the Action's webhook-config
// input) call it.
func DeployedTo(path, repo string) (clusters, notes map[string][]string, err error) {
	c, err := Load(path)
	if err != nil {
		return nil, nil, err
	}
	if repo == "" {
		if len(c.Repositories) != 1 {
			names := make([]string, len(c.Repositories))
			for i, r := range c.Repositories {
				names[i] = r.Name
			}
			return nil, nil, fmt.Errorf("%s configures %d repositories (%s): say which one this is (kplan diff --repository)", path, len(c.Repositories), strings.Join(names, ", "))
		}
		repo = c.Repositories[0].Name
	}
	if c.Repository(repo) == nil {
		return nil, nil, fmt.Errorf("%s does not configure repository %s: no overlay of it deploys from there", path, repo)
	}
	return c.ClustersOf(repo), c.RolloutNotes(repo), nil
}

// ForgeOf is the forge repo is on (GitHub when it is not configured).
func (c *Config) ForgeOf(repo string) string {
	if r := c.Repository(repo); r != nil && r.Forge != "" {
		return r.Forge
	}
	return GitHub
}

// HasForge says whether any repository is on forge.
func (c *Config) HasForge(forge string) bool {
	for _, r := range c.Repositories {
		if r.Forge == forge {
			return true
		}
	}
	return false
}
