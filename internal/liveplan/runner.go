package liveplan

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Mirror reads the repositories (GitMirror).
type Mirror interface {
	// FetchPull fetches a pull request's head; it returns the mirror's
	// directory and the head's commit as the server has it now.
	FetchPull(ctx context.Context, cloneURL string, number int) (dir, head string, err error)
	// Fetch fetches a branch (so that the deployed commit is there).
	Fetch(ctx context.Context, cloneURL, branch string) (dir, tip string, err error)
	Snapshot(ctx context.Context, dir, sha string) (*snapshot.Snapshot, error)
}

// GitMirror is the Mirror of the webhook's git mirrors.
type GitMirror struct{ *gitmirror.Mirrors }

// Snapshot implements Mirror.
func (GitMirror) Snapshot(ctx context.Context, dir, sha string) (*snapshot.Snapshot, error) {
	return snapshot.FromCommit(ctx, dir, sha)
}

// Planner dry-runs renders against one target's cluster (*Engine).
type Planner interface {
	Plan(ctx context.Context, in Input) (*Result, error)
	// State reads what the last deploy recorded on the live inventory
	// object (deploy.State); the zero State when it does not exist.
	State(ctx context.Context, inv *unstructured.Unstructured) (deploy.State, error)
}

// Poster posts a pull request's live plan comment (CommentPoster).
type Poster interface {
	Post(ctx context.Context, repo string, pr int, body string) error
}

// Request asks for the live plan of a pull request.
type Request struct {
	Repo     string // owner/name
	CloneURL string
	Base     string // the branch the PR merges into: its targets are planned
	PR       int
	SHA      string // the head the delivery named; the head fetched wins
	Delivery string
	Targets  []config.Target
}

// TargetPlan is one target's live plan, or why there is none.
type TargetPlan struct {
	Target      string  `json:"target"`
	Overlay     string  `json:"overlay"`
	DeployedSHA string  `json:"deployedSha,omitempty"`
	Result      *Result `json:"result,omitempty"`
	Err         string  `json:"error,omitempty"`
	// DriftNote says why drift could not be looked for.
	DriftNote string `json:"driftNote,omitempty"`
}

// PullPlan is the live plan of a pull request's head.
type PullPlan struct {
	Repo    string        `json:"repo"`
	PR      int           `json:"pr"`
	Base    string        `json:"base"`
	Head    string        `json:"head"`
	Targets []TargetPlan  `json:"targets"`
	Took    time.Duration `json:"took"`
}

// Runner runs pull requests' live plans: one at a time per pull request,
// the newest head winning (a delivery that arrives while one runs
// replaces any waiting one, and each run plans the head GitHub has then).
type Runner struct {
	Mirrors Mirror
	// Planner makes the planner of a target's cluster; a fresh one per
	// plan, so that its discovery sees CRDs installed since.
	Planner func(config.Target) Planner
	Post    Poster
	Logger  *slog.Logger
	// GitBases is the directory of the git-base cache the deployed
	// commit's renders fetch git remote bases into, as deploys do; ""
	// fetches none.
	GitBases string
	// Parallel bounds the pull requests planned at once (default 1): the
	// API servers and this process share their CPUs with deploys.
	Parallel int

	mu      sync.Mutex
	ctx     context.Context // set by Run
	pending map[string]*Request
	busy    map[string]bool
	slots   chan struct{}
	wg      sync.WaitGroup
}

func (r *Runner) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Submit queues a live plan; it never blocks.
func (r *Runner) Submit(req Request) {
	key := fmt.Sprintf("%s#%d", req.Repo, req.PR)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending, r.busy = map[string]*Request{}, map[string]bool{}
	}
	if old := r.pending[key]; old != nil {
		r.log().Info("live plan superseded by a newer delivery", "repo", req.Repo, "pr", req.PR, "old", old.SHA, "new", req.SHA)
	}
	r.pending[key] = &req
	if r.ctx != nil && !r.busy[key] {
		r.start(key)
	}
}

// start runs key's queue; r.mu is held.
func (r *Runner) start(key string) {
	r.busy[key] = true
	r.wg.Add(1)
	go r.loop(key)
}

// Run plans what is submitted until ctx ends, then waits for the plans
// running.
func (r *Runner) Run(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.slots = make(chan struct{}, max(r.Parallel, 1))
	if r.pending == nil {
		r.pending, r.busy = map[string]*Request{}, map[string]bool{}
	}
	for key := range r.pending {
		r.start(key)
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.wg.Wait()
}

func (r *Runner) loop(key string) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		req := r.pending[key]
		delete(r.pending, key)
		if req == nil || r.ctx.Err() != nil {
			delete(r.busy, key)
			r.mu.Unlock()
			return
		}
		ctx := r.ctx
		r.mu.Unlock()
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		r.run(ctx, *req)
		<-r.slots
	}
}

// run plans and posts one pull request.
func (r *Runner) run(ctx context.Context, req Request) {
	log := r.log().With("repo", req.Repo, "pr", req.PR, "delivery", req.Delivery)
	var plan *PullPlan
	// A kplan bug in one live plan fails that plan, not the webhook.
	err := crash.Catch(func() (err error) {
		plan, err = r.Plan(ctx, req)
		return err
	})
	if c := crash.As(err); c != nil {
		log.Error("kplan bug: panic in a live plan", "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		log.Error("live plan", "err", err)
		plan = &PullPlan{Repo: req.Repo, PR: req.PR, Base: req.Base, Head: req.SHA,
			Targets: []TargetPlan{{Target: "(all)", Err: err.Error()}}}
	}
	if err := r.Post.Post(ctx, req.Repo, req.PR, Markdown(plan)); err != nil {
		log.Error("post the live plan", "err", err)
		return
	}
	log.Info("live plan posted", "head", plan.Head, "targets", len(plan.Targets), "took", plan.Took)
}

// Plan fetches the pull request's head and plans each of its base
// branch's targets whose overlay the head has.
func (r *Runner) Plan(ctx context.Context, req Request) (*PullPlan, error) {
	start := time.Now()
	dir, head, err := r.Mirrors.FetchPull(ctx, req.CloneURL, req.PR)
	if err != nil {
		return nil, err
	}
	if head != req.SHA {
		r.log().Info("the pull request's head moved since the delivery; planning the head", "repo", req.Repo, "pr", req.PR, "delivery", req.SHA, "head", head)
	}
	s, err := r.Mirrors.Snapshot(ctx, dir, head)
	if err != nil {
		return nil, err
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		return nil, fmt.Errorf("read the kustomizations of %s: %w", short(head), err)
	}
	plan := &PullPlan{Repo: req.Repo, PR: req.PR, Base: req.Base, Head: head}
	for _, t := range req.Targets {
		if t.FromFile != "" || !tree.Renderable(t.Overlay) {
			continue // a target the head does not render
		}
		tp := TargetPlan{Target: t.Name, Overlay: t.Overlay}
		r.planTarget(ctx, req, t, s, tree, &tp)
		plan.Targets = append(plan.Targets, tp)
	}
	plan.Took = time.Since(start)
	return plan, nil
}

func (r *Runner) planTarget(ctx context.Context, req Request, t config.Target, s *snapshot.Snapshot, tree *render.Tree, tp *TargetPlan) {
	// The head is whoever opened the PR's content: nothing is fetched
	// for it, whatever the target allows its deploys.
	tg, err := deploy.Prepare(ctx, deploy.Source{FS: s.FS, Snapshot: s, Tree: tree}, deploy.SettingsOf(t), deploy.Offline)
	if err != nil {
		tp.Err = err.Error()
		return
	}
	pl := r.Planner(t)
	in := Input{Inventory: tg.Inventory, Objects: tg.Objects, Options: deploy.OptionsOf(t)}
	st, err := pl.State(ctx, tg.Inventory)
	switch {
	case err != nil:
		tp.DriftNote = "cannot read the inventory: " + err.Error()
	case !st.Deployed():
		tp.DriftNote = "nothing deployed yet"
	default:
		tp.DeployedSHA = st.SHA
		deployed, err := r.deployed(ctx, req, t, tp.DeployedSHA)
		if err != nil {
			tp.DriftNote = fmt.Sprintf("cannot render the deployed commit %s: %v", short(tp.DeployedSHA), err)
		} else {
			in.Deployed = deployed
		}
	}
	res, err := pl.Plan(ctx, in)
	if err != nil {
		tp.Err = err.Error()
		return
	}
	tp.Result = res
}

// deployed renders the target at the commit its cluster records, as its
// deploy did.
func (r *Runner) deployed(ctx context.Context, req Request, t config.Target, sha string) ([]*unstructured.Unstructured, error) {
	dir, _, err := r.Mirrors.Fetch(ctx, req.CloneURL, req.Base)
	if err != nil {
		return nil, err
	}
	s, err := r.Mirrors.Snapshot(ctx, dir, sha)
	if err != nil {
		return nil, err
	}
	tg, err := deploy.Prepare(ctx, deploy.FromSnapshot(s), settings(t, r.GitBases), deploy.Online)
	if err != nil {
		return nil, err
	}
	return tg.Objects, nil
}

// settings are how t's deploys render, fetching git remote bases into a
// cache of the live plans' own under gitBases.
func settings(t config.Target, gitBases string) deploy.Settings {
	s := deploy.SettingsOf(t)
	if gitBases != "" {
		s.GitBases = filepath.Join(gitBases, "liveplan")
	}
	return s
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
