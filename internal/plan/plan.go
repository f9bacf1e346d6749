// Package plan is kplan's façade over the planning pipeline:
// snapshot → discover → render → inventory → diff, for two revisions of a
// repository.
package plan

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Options say what to compare and how to render.
type Options struct {
	RepoDir string // the repository's work tree
	Base    string // a revision; required
	Head    string // a revision; "" means the work tree as it is on disk
	Filter  render.Filter
	Render  render.Options
	Logger  *slog.Logger
}

// Run computes the plan of Head against Base.
func Run(ctx context.Context, opts Options) (*inventorydiff.Plan, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Base == "" {
		return nil, fmt.Errorf("no base revision: say which commit to compare against (e.g. --base main)")
	}
	top, err := gitcli.Repo{Dir: opts.RepoDir}.TopLevel(ctx)
	if err != nil {
		return nil, err
	}
	opts.RepoDir = top
	base, err := snapshot.FromCommit(ctx, opts.RepoDir, opts.Base)
	if err != nil {
		return nil, fmt.Errorf("load base: %w", err)
	}
	var head *snapshot.Snapshot
	if opts.Head == "" {
		head, err = snapshot.FromWorkingTree(ctx, opts.RepoDir)
	} else {
		head, err = snapshot.FromCommit(ctx, opts.RepoDir, opts.Head)
	}
	if err != nil {
		return nil, fmt.Errorf("load head: %w", err)
	}
	baseSides, err := Side(ctx, base, opts, log)
	if err != nil {
		return nil, err
	}
	headSides, err := Side(ctx, head, opts, log)
	if err != nil {
		return nil, err
	}
	return inventorydiff.Compare(base.Rev, head.Rev, baseSides, headSides), nil
}

// Side discovers, renders and inventories every overlay of one snapshot.
func Side(ctx context.Context, s *snapshot.Snapshot, opts Options, log *slog.Logger) (map[string]inventorydiff.Side, error) {
	start := time.Now()
	tree, err := render.Discover(s.FS, opts.Filter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Rev, err)
	}
	results, err := render.Render(ctx, s.FS, tree, tree.Overlays, opts.Render)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Rev, err)
	}
	sides := make(map[string]inventorydiff.Side, len(results))
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			sides[r.Path] = inventorydiff.Side{Err: r.Err}
			continue
		}
		inv, err := inventory.New(r.Objects)
		if err != nil {
			err = fmt.Errorf("inventory of %s: %w", r.Path, err)
		}
		sides[r.Path] = inventorydiff.Side{Inventory: inv, Err: err}
	}
	log.Info("rendered", "rev", s.Rev, "files", s.Files, "overlays", len(results), "failed", failed, "took", time.Since(start).Round(time.Millisecond))
	return sides, nil
}

// RenderWorkingTree renders overlays (paths relative to dir) as they are
// on disk. The whole repository holding dir is loaded, so overlays can
// use bases elsewhere in it; outside git, dir is the root.
func RenderWorkingTree(ctx context.Context, dir string, overlays []string, opts render.Options) ([]render.Result, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root := dir
	if top, err := (gitcli.Repo{Dir: dir}).TopLevel(ctx); err == nil {
		root = top
	}
	rel := make([]string, len(overlays))
	for i, o := range overlays {
		r, err := filepath.Rel(root, filepath.Join(dir, o))
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return nil, fmt.Errorf("overlay %s is outside the repository %s", o, root)
		}
		rel[i] = filepath.ToSlash(r)
	}
	s, err := snapshot.FromWorkingTree(ctx, root)
	if err != nil {
		return nil, err
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		return nil, err
	}
	return render.Render(ctx, s.FS, tree, rel, opts)
}
