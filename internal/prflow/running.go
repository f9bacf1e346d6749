package prflow

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/report"
)

// Deploys is what the flow asks a forge of the webhook's deploys: the
// commit of a target's newest successful deploy, "" when the forge
// records none. The forge packages implement it (github.Deployed,
// gitlab.Deployed); a front end whose forge cannot say leaves
// Job.Deploys nil, and the comment says nothing of what runs.
type Deploys interface {
	LastDeployed(ctx context.Context, t forge.DeployTarget) (string, error)
}

// runningTimeout bounds asking the forge and git what the targets' clusters
// run: the plan is done, and this only adds a note to it.
const runningTimeout = time.Minute

// running says which targets of the base branch, of the overlays the
// plan covers, run another commit than the plan's base, and how that
// commit stands to the base branch: the webhook deploys the merge only
// if every change since what runs was approved, more than the plan
// shows. Nothing here fails the plan: a forge that will not answer (a
// token without the permission, a network failure) or a checkout that
// cannot tell is a warning, and the comment says nothing.
func (j *Job) running(ctx context.Context, p *inventorydiff.Plan) []report.Running {
	if j.Deploys == nil || j.Change == nil || j.Change.BaseRef == "" || p.Base == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, runningTimeout)
	defer cancel()
	targets, err := j.baseTargets(ctx, p.Base)
	if err != nil {
		j.Log.Warn("cannot tell which targets deploy from "+j.Change.BaseRef+": the comment does not say what their clusters run", "err", err)
		return nil
	}
	targets = covered(targets, p)
	deployed := make([]string, len(targets))
	for i, t := range targets {
		if deployed[i], err = j.Deploys.LastDeployed(ctx, t); err != nil {
			j.Log.Warn("cannot read from the forge what the targets' clusters run: the comment does not say", "target", t.Name, "environment", t.Environment, "err", err)
			return nil
		}
	}
	var out []report.Running
	seen := map[string]*report.Running{} // a commit's history, found once
	for i, t := range targets {
		sha := deployed[i]
		if sha == "" || sha == p.Base {
			continue
		}
		r, ok := seen[sha]
		if !ok {
			r, err = j.history(ctx, sha, p.Base)
			if err != nil {
				j.Log.Warn("cannot tell how the commit a target's cluster runs stands to "+j.Change.BaseRef+": the comment does not say", "target", t.Name, "deployed", sha, "err", err)
			}
			seen[sha] = r
		}
		if r == nil {
			continue
		}
		j.Log.Info("the target's cluster runs another commit than the plan's base", "target", t.Name, "deployed", sha, "history", r.History, "commits", r.Commits)
		out = append(out, report.Running{Target: t.Name, SHA: sha, Branch: j.Change.BaseRef, History: r.History, Commits: r.Commits})
	}
	return out
}

// baseTargets are the targets that deploy from the change's base branch,
// as base declares them. With the webhook's configuration
// (webhook-config), its targets of that branch, and those of base's
// .kplan.yaml a targetsFrom branch deploys (an environment it maps);
// without, base's .kplan.yaml's targets when the change merges into the
// repository's default branch, the branch a webhook deploys them from:
// a change into another branch deploys nothing kplan can tell.
func (j *Job) baseTargets(ctx context.Context, base string) ([]forge.DeployTarget, error) {
	repo, branch := j.Change.Repo, j.Change.BaseRef
	if !j.Repo.HasCommit(ctx, base) && j.Remote != "" {
		if err := j.Repo.EnsureCommit(ctx, j.Remote, base); err != nil {
			return nil, err
		}
	}
	file := func(name, key string, keep func(repoconfig.Target) bool) ([]forge.DeployTarget, error) {
		ts, err := j.fileTargets(ctx, base, name)
		var out []forge.DeployTarget
		for _, t := range ts {
			if keep(t) {
				out = append(out, forge.DeployTarget{Repo: repo, Branch: branch, Name: t.Name, Key: key + "/" + t.Name, Environment: t.Environment, Overlay: t.Overlay})
			}
		}
		return out, err
	}
	configPath := strings.TrimSpace(j.Settings.WebhookConfig)
	if configPath == "" {
		if branch != j.Change.DefaultBranch {
			return nil, nil
		}
		return file(repoconfig.File, config.SourceName(repo, branch), func(repoconfig.Target) bool { return true })
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(j.Settings.Repository, repo)
	var out []forge.DeployTarget
	for _, t := range cfg.Targets(name, branch) {
		if t.FromFile == "" {
			out = append(out, forge.DeployTarget{Repo: repo, Branch: branch, Name: t.Name, Key: t.Name, Environment: t.Environment, Overlay: t.Overlay})
			continue
		}
		for _, src := range cfg.Sources() {
			if strings.EqualFold(src.Repo, name) && src.Branch == branch {
				ts, err := file(src.File, src.Name, func(t repoconfig.Target) bool { _, ok := src.Environment(t.Environment); return ok })
				if err != nil {
					return nil, err
				}
				out = append(out, ts...)
			}
		}
	}
	return out, nil
}

// fileTargets are the targets the repository file name (.kplan.yaml)
// declares at commit base; none without the file.
func (j *Job) fileTargets(ctx context.Context, base, name string) ([]repoconfig.Target, error) {
	obj := base + ":" + strings.TrimPrefix(path.Clean(name), "/")
	if _, err := j.Repo.Run(ctx, "cat-file", "-e", obj); err != nil {
		return nil, nil
	}
	data, err := j.Repo.Run(ctx, "cat-file", "blob", obj)
	if err != nil {
		return nil, err
	}
	cfg, err := repoconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", name, Short(base), err)
	}
	return cfg.Targets, nil
}

// covered keeps the targets whose overlay the plan covers: the others
// were filtered out of it (overlays, exclude), and the comment is the
// plan's.
func covered(targets []forge.DeployTarget, p *inventorydiff.Plan) []forge.DeployTarget {
	planned := map[string]bool{}
	for _, o := range p.Overlays {
		planned[path.Clean(o.Path)] = true
	}
	var out []forge.DeployTarget
	for _, t := range targets {
		if planned[path.Clean(t.Overlay)] {
			out = append(out, t)
		}
	}
	return out
}

// history says how commit deployed stands to base's first-parent
// history, fetching what a shallow checkout lacks from j.Remote; nil
// when base descends from neither (deployed is newer than the plan's
// base: the branch moved on). An error says the checkout cannot tell.
func (j *Job) history(ctx context.Context, deployed, base string) (*report.Running, error) {
	g := j.Repo
	if !g.HasCommit(ctx, deployed) && j.Remote != "" {
		// Not fetchable is not proof: the remote may be out of reach.
		_ = g.EnsureCommit(ctx, j.Remote, deployed)
	}
	if !g.HasCommit(ctx, deployed) {
		if g.IsShallow(ctx) {
			return nil, fmt.Errorf("%s is not in the shallow checkout, and fetching it failed", Short(deployed))
		}
		// A full clone holds every commit of its branches.
		return &report.Running{History: report.Apart}, nil
	}
	mb, err := g.MergeBase(ctx, j.Remote, deployed, base)
	switch {
	case err != nil:
		return nil, err
	case mb == base:
		return nil, nil // deployed descends from base: newer than the plan's base
	case mb != deployed:
		return &report.Running{History: report.Apart}, nil
	}
	out, err := g.Run(ctx, "rev-list", "--first-parent", deployed+".."+base)
	if err != nil {
		return nil, err
	}
	steps := strings.Fields(string(out))
	if len(steps) == 0 {
		return nil, nil
	}
	parents, err := g.Parents(ctx, steps[len(steps)-1])
	if err != nil {
		return nil, err
	}
	switch {
	case len(parents) > 0 && parents[0] == deployed:
		return &report.Running{History: report.Behind, Commits: len(steps)}, nil
	case len(parents) > 0 && !g.HasCommit(ctx, parents[0]):
		return nil, fmt.Errorf("the shallow checkout's history of %s ends before it reaches %s", Short(base), Short(deployed))
	}
	return &report.Running{History: report.Merged}, nil
}
