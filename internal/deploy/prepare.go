package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/gitbase"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Network says whether a render may fetch what it names elsewhere.
type Network bool

const (
	// Offline renders fetch nothing: content nobody with write access
	// vouched for (a pull request's head, a reviewed commit never merged).
	Offline Network = false
	// Online renders fetch http(s) resources and git remote bases from
	// the target's RemoteHosts, as its deploys do.
	Online Network = true
)

// Source is the tree a target renders from.
type Source struct {
	// FS serves the tree: a commit's snapshot, or the disk
	// (snapshot.OpenDisk).
	FS *snapshot.FS
	// Snapshot is the commit FS belongs to, nil for the disk: with it, a
	// target whose remote resources are off is refused naming the remote
	// resource before anything renders.
	Snapshot *snapshot.Snapshot
	// Tree is FS's kustomizations; nil discovers them.
	Tree *render.Tree
}

// FromSnapshot is the Source of a commit's snapshot.
func FromSnapshot(s *snapshot.Snapshot) Source { return Source{FS: s.FS, Snapshot: s} }

// Settings say how a target renders and which inventory it applies
// through: everything Prepare needs besides the tree.
type Settings struct {
	// Name names the target in messages; with Environment, its cluster
	// in .kplan.yaml's kubernetes: (kubernetes).
	Name        string
	Environment string
	// Overlay is the overlay's directory, relative to the tree's root.
	Overlay string
	// Display is how messages name the overlay ("" is Overlay): the
	// directory `kplan apply` was given.
	Display string
	// Namespace receives namespaced objects (and the inventory) rendered
	// without one; "" is DefaultNamespace.
	Namespace string
	// Inventory, if set, is the inventory whatever the overlay renders.
	Inventory *kinv.Identity
	// RemoteHosts are the hosts an Online render may fetch from; with
	// none and not AllowRemoteBases, a remote resource is refused by name.
	RemoteHosts      []string
	AllowRemoteBases bool
	// ChartCredentials, when set, are where the target's chart fetches
	// find credentials, alone (the standard places otherwise).
	ChartCredentials *config.ChartCredentials
	// Render holds the render options besides what it may fetch (helm,
	// limits, the load restrictor). An Online render with Render.Remote
	// set fetches as given (the CLI's --remote-hosts and --git-cache);
	// otherwise Prepare sets Remote and Git from RemoteHosts and GitBases.
	Render render.Options
	// GitBases is the directory of the git-base cache an Online render
	// fetches git remote bases into; "" fetches none.
	GitBases string
	// RGFile, RGFileExplicit and HasKptfile: as TargetOptions.
	RGFile         string
	RGFileExplicit bool
	HasKptfile     bool
	// Plan asks for Prepared.Planned too.
	Plan bool
}

// SettingsOf is how a target of the webhook's configuration (or of a
// repository's targets file) renders: the one place a target's render
// options reach the render.
func SettingsOf(t config.Target) Settings {
	return Settings{
		Name: t.Name, Environment: t.Environment, Overlay: t.Overlay, Namespace: t.Namespace, Inventory: t.Inventory,
		RemoteHosts: t.RemoteHosts, AllowRemoteBases: t.AllowRemoteBases, ChartCredentials: t.ChartCredentials,
		Render: t.Render,
	}
}

// OptionsOf is how a target of the webhook's configuration (or of a
// repository's targets file) applies: the one place a target's apply
// options are read, as SettingsOf is for its render. The deployer
// applies with them, and the live plan and the drift check plan with
// them, so that the pre-apply checks (Checks) see in a preview what they
// see in the deploy. The options no target sets (DryRun, AllowEmpty,
// PrunePropagation, OnEvent) are kplan apply's flags.
func OptionsOf(t config.Target) Options {
	return Options{
		InventoryPolicy: t.InventoryPolicy, ReconcileTimeout: t.ReconcileTimeout, NoPrune: !t.Prune,
		Namespace: t.Namespace, AllowReplaceInventory: t.AllowReplaceInventory,
	}
}

// Prepared is a target ready to apply: its objects and the one
// inventory they are recorded in.
type Prepared struct {
	Target
	// Planned is the object set a plan computes of the same render
	// (declared.Planned), with Settings.Plan; a deploy compares its
	// digest with the plan reviewed.
	Planned *kinv.ObjectSet
}

// Prepare renders a target's overlay of src as a deploy does and names
// its inventory. The deployer, its check that a merge applies what was
// reviewed, the live plan, the drift check and `kplan apply` all prepare
// through it, so that what they show is what a deploy applies.
func Prepare(ctx context.Context, src Source, s Settings, net Network) (*Prepared, error) {
	ropts, done, err := s.renderOptions(ctx, src, net)
	if err != nil {
		return nil, err
	}
	defer done()
	tree := src.Tree
	if tree == nil {
		if tree, err = render.Discover(src.FS, render.Filter{}); err != nil {
			return nil, err
		}
	}
	if ropts, err = s.kubernetes(src, ropts); err != nil {
		return nil, err
	}
	rs, err := render.Render(ctx, src.FS, tree, []string{s.Overlay}, ropts)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errors.New("the render returned nothing")
	}
	r := rs[0]
	if r.Err != nil {
		return nil, r.Err
	}
	if s.Display != "" {
		r.Path = s.Display
	}
	files := func(name string) ([]byte, error) { return src.FS.ReadFile(snapshot.Abs(path.Join(s.Overlay, name))) }
	p := &Prepared{}
	if s.Plan {
		if p.Planned, err = declared.Planned(r, files, s.namespace()); err != nil {
			return nil, err
		}
	}
	// NewTarget copies the objects (through JSON): Planned keeps its own.
	tg, err := NewTarget(r, files, TargetOptions{Inventory: s.Inventory, Namespace: s.Namespace,
		RGFile: s.RGFile, RGFileExplicit: s.RGFileExplicit, HasKptfile: s.HasKptfile})
	if err != nil {
		return nil, err
	}
	p.Target = *tg
	return p, nil
}

// kubernetes are o with what the target's cluster runs, for its charts:
// the target's own kubeVersion and apiVersions (the webhook's
// configuration), else what the tree's .kplan.yaml declares for the
// target's name or environment (as the plan rendered it), else
// kubeversion's default. A .kplan.yaml that does not parse fails the
// render: the plan failed on it too.
func (s Settings) kubernetes(src Source, o render.Options) (render.Options, error) {
	if !o.EnableHelm || o.KubeVersion != "" || len(o.APIVersions) > 0 {
		return o, nil
	}
	data, err := src.FS.ReadFile(snapshot.Abs(repoconfig.File))
	if err != nil {
		return o, nil // no .kplan.yaml: the default
	}
	cfg, err := repoconfig.Parse(data)
	if err != nil {
		return o, fmt.Errorf("target %s: what its cluster runs, for its charts: %w", s.Name, err)
	}
	return o.WithKubernetes(cfg.Capabilities(s.Name, s.Environment)), nil
}

func (s Settings) namespace() string {
	if s.Namespace == "" {
		return DefaultNamespace
	}
	return s.Namespace
}

// renderOptions are what the render may fetch: nothing Offline; Online,
// what RemoteHosts allow, git remote bases included. done closes the
// git-base cache.
func (s Settings) renderOptions(ctx context.Context, src Source, net Network) (render.Options, func(), error) {
	o, done := s.Render, func() {}
	if net == Offline {
		none, err := netpolicy.New(nil, "nothing: remote resources are off in live plans of pull requests and for commits not merged [%s]")
		if err != nil {
			return o, done, err
		}
		o.Remote, o.Git = none, nil
		return o, done, nil
	}
	if o.Remote != nil {
		return o, done, nil // the caller's own policy (kplan apply's flags)
	}
	if !s.AllowRemoteBases && len(s.RemoteHosts) == 0 && src.Snapshot != nil {
		// A deploy must not depend on what another server returns at that
		// moment unless the config allows it.
		c := closure.New(closure.SnapshotSource(ctx, src.Snapshot), closure.Options{}).Overlay(s.Overlay)
		if len(c.Remote) > 0 {
			r := c.Remote[0]
			return o, done, fmt.Errorf("%s uses the remote %s %s (in %s); remote resources are off for target %s (list the hosts it may fetch from in remoteHosts in the config; allowRemoteBases alone fetches nothing)", s.Overlay, r.Field, r.Ref, r.File, s.Name)
		}
	}
	policy, err := netpolicy.New(s.RemoteHosts, "the target's remoteHosts in the webhook's config: [%s]")
	if err != nil {
		return o, done, fmt.Errorf("target %s: remoteHosts: %w", s.Name, err)
	}
	o.Remote = policy
	switch {
	case o.ChartAuth != nil:
	case s.ChartCredentials != nil:
		// The target's own credentials, alone: no other target's, and
		// not the webhook's Docker config either (read anew for each
		// deploy, as below).
		o.ChartAuth = &charts.Auth{RegistryConfig: s.ChartCredentials.RegistryConfig, RepositoryConfig: s.ChartCredentials.RepositoryConfig}
	default:
		// Charts from private registries and repositories: the
		// credentials mounted where helm and docker read them
		// (docs/webhook.md), read anew for each deploy, so that a rotated
		// Secret needs no restart.
		o.ChartAuth = charts.Standard(os.Getenv)
	}
	if len(s.RemoteHosts) > 0 && s.GitBases != "" {
		// Git remote bases come through the same policy.
		c := gitbase.New(s.GitBases, policy)
		o.Git = c
		done = func() { _ = c.Close() }
	}
	return o, done, nil
}
