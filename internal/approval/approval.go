// Package approval decides whether a commit may be applied to a target:
// what the cluster runs plus changes each of which reviewers approved as
// a diff, proven step by step over the branch's history.
//
// The rule (docs/security.md, "The rule (kplan approval)"): walk the
// first-parent chain from the commit the target runs (deployed) to the
// tip; attribute each step to a merged pull request (merge commit,
// squash, or the run of commits a rebase merge puts on the branch) or to
// a push; a step that changes what the target reads must be its pull
// request's approved diff (the approved head against the merge base the
// reviewers saw) applied to the step's first parent, which must itself be
// approved; else it is refused, and stays refused until a later step
// returns the target to an approved state (a revert) or a writer
// overrides a commit. History that does not descend from deployed starts
// from the fork point, which must equal what runs.
package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Verdict is the rule's answer for the tip, or for one step.
type Verdict string

const (
	// VerdictApproved: every change the target sees was approved.
	VerdictApproved Verdict = "approved"
	// VerdictUnaffected: nothing the target reads changed.
	VerdictUnaffected Verdict = "unaffected"
	// VerdictRefused: a change no approval covers.
	VerdictRefused Verdict = "refused"
	// VerdictReverted (a step): the target returns to an approved state.
	VerdictReverted Verdict = "reverted"
	// VerdictOverridden (a step): a writer let the commit apply.
	VerdictOverridden Verdict = "overridden"
)

// Kind is what made a step.
type Kind string

const (
	// KindPull: a merged pull request (its merge commit, its squash, or
	// the commits its rebase put on the branch).
	KindPull Kind = "pull"
	// KindPush: a commit that came from no pull request.
	KindPush Kind = "push"
	// KindHistory: the history the walk starts from is not what runs (a
	// force-push, or deployed reached only through a merge's second
	// parent).
	KindHistory Kind = "history"
)

// Step is one change of the branch and its verdict.
type Step struct {
	Kind Kind `json:"kind"`
	// Commit is the step's commit (the last, for a rebase merge), Commits
	// all of them, oldest first; Parent the commit before the step.
	Commit  string   `json:"commit"`
	Commits []string `json:"commits,omitempty"`
	Parent  string   `json:"parent,omitempty"`
	PR      int      `json:"pr,omitempty"`
	Verdict Verdict  `json:"verdict"`
	// Approval is the approval that covers the step (VerdictApproved).
	Approval *Approval `json:"approval,omitempty"`
	// OverriddenBy is the writer who let the commit apply.
	OverriddenBy string `json:"overridden_by,omitempty"`
	Why          string `json:"why"`
	// Carries is the refused commit the step's tree still holds: no
	// approval of a later step carries it.
	Carries string `json:"carries,omitempty"`
	// Fix is what would let the step apply (VerdictRefused).
	Fix string `json:"fix,omitempty"`
}

// Result is the rule's verdict on applying the tip to a target that
// runs deployed.
type Result struct {
	Verdict  Verdict `json:"verdict"`
	Deployed string  `json:"deployed"`
	Tip      string  `json:"tip"`
	Scope    string  `json:"scope"`
	Steps    []Step  `json:"steps"`
	// Refused is the first step the tip holds that no approval covers.
	Refused *Step `json:"refused,omitempty"`
	// Unreadable are approvers whose permission could not be read: their
	// approvals counted as not a writer's.
	Unreadable []string `json:"unreadable,omitempty"`
	Why        string   `json:"why"`
}

// Ok says whether the tip may be applied.
func (r *Result) Ok() bool { return r.Verdict != VerdictRefused }

// Input is what the rule is asked.
type Input struct {
	// Deployed is the commit the target's inventory records as applied
	// ("" for none: a first deploy starts from the empty tree).
	Deployed string
	Tip      string
	Record   *Record
	// Scope is what the target reads; nil is WholeTree.
	Scope Scope
	// Ref writes a pull request's number as the forge's users do (nil:
	// GitHub's #12; GitLab's merge requests are !12).
	Ref func(n int) string
}

// ref writes pull request n as the forge does.
func (c *checker) ref(n int) string {
	if c.in.Ref != nil {
		return c.in.Ref(n)
	}
	return fmt.Sprintf("#%d", n)
}

// Check applies the rule: may in.Tip be applied to a target that runs
// in.Deployed?
func Check(ctx context.Context, g Git, in Input) (*Result, error) {
	c := &checker{g: g, in: in, scope: in.Scope, byMerge: map[string]*Pull{}, overrides: map[string][]string{}}
	if c.scope == nil {
		c.scope = WholeTree{}
	}
	rec := in.Record
	if rec == nil {
		rec = &Record{}
	}
	c.rec = rec
	for i := range rec.Pulls {
		p := &rec.Pulls[i]
		if p.MergedAt == "" {
			continue
		}
		if p.Merge != "" {
			c.byMerge[p.Merge] = p
		} else if p.Head.SHA != "" {
			c.byMerge[p.Head.SHA] = p // a fast-forward merge
		}
		c.maxRun = max(c.maxRun, p.Commits, 1)
	}
	for _, o := range rec.Overrides {
		c.overrides[o.Commit] = append(c.overrides[o.Commit], o.User.Login)
	}
	res := &Result{Deployed: in.Deployed, Tip: in.Tip, Scope: c.scope.String()}
	if err := c.walk(ctx, res); err != nil {
		return nil, err
	}
	res.Unreadable = c.unreadable
	return res, nil
}

type checker struct {
	g         Git
	in        Input
	rec       *Record
	scope     Scope
	byMerge   map[string]*Pull
	overrides map[string][]string
	maxRun    int
	// approved are the trees the target may run: what runs, and each
	// tree an approved, reverted or overridden step made.
	approved   []string
	unreadable []string
	// shadow is the tree the approved steps alone make: while a refused
	// step is in the tree, each later pull request's approved diff is
	// applied to it, so that a revert of the refused step (alone) returns
	// to an approved state.
	shadow string
	// carried says the step judge judged last is its pull request's
	// approved diff, refused for the refused change its parent holds.
	carried bool
	// refused is the first refused step since the target was last in an
	// approved state (nil: it is).
	refused *Step
}

func (c *checker) walk(ctx context.Context, res *Result) error {
	g, in := c.g, c.in
	deployedTree, err := g.Tree(ctx, in.Deployed)
	if err != nil {
		return fmt.Errorf("the deployed commit %s: %w", in.Deployed, err)
	}
	c.approved, c.shadow = []string{deployedTree}, deployedTree
	descends, from := true, in.Deployed
	if in.Deployed != "" {
		if descends, err = g.IsAncestor(ctx, in.Deployed, in.Tip); err != nil {
			return err
		}
		if !descends {
			if from, err = g.MergeBase(ctx, in.Deployed, in.Tip); err != nil {
				return err
			}
		}
	}
	chain, err := g.FirstParents(ctx, from, in.Tip)
	if err != nil {
		return fmt.Errorf("the history from %s to %s: %w", short(from), short(in.Tip), err)
	}
	start := in.Tip
	if len(chain) > 0 {
		if start, err = g.FirstParent(ctx, chain[0]); err != nil {
			return err
		}
	}
	if start != in.Deployed {
		if err := c.history(ctx, res, start, descends); err != nil {
			return err
		}
	}
	steps := make([]Step, 0, len(chain))
	for i := 0; i < len(chain); {
		s, n, err := c.next(ctx, chain, i)
		if err != nil {
			return err
		}
		steps = append(steps, s)
		i += n
	}
	res.Steps = append(res.Steps, steps...)
	c.conclude(res)
	return nil
}

// history checks the commit the walk starts from when it is not the one
// deployed: its tree must be one the target may run.
func (c *checker) history(ctx context.Context, res *Result, start string, descends bool) error {
	tree, err := c.g.Tree(ctx, start)
	if err != nil {
		return err
	}
	ok, err := c.isApproved(ctx, tree)
	if err != nil || ok {
		return err
	}
	if by := c.overriddenBy(start); by != "" && start == c.in.Tip {
		c.approve(tree)
		res.Steps = append(res.Steps, Step{Kind: KindHistory, Commit: start, Verdict: VerdictOverridden, OverriddenBy: by,
			Why: fmt.Sprintf("the branch was rewritten to %s, which @%s, who may write, let apply without approval", short(start), by)})
		return nil
	}
	s := Step{Kind: KindHistory, Commit: start, Verdict: VerdictRefused}
	switch {
	case start == "":
		s.Why = fmt.Sprintf("the branch was rewritten (a force-push): %s shares no history with %s, which runs", short(c.in.Tip), short(c.in.Deployed))
	case !descends && start == c.in.Tip:
		s.Why = fmt.Sprintf("the branch was rewritten (a force-push): %s is not a descendant of %s, which runs, and differs from it in %s", short(c.in.Tip), short(c.in.Deployed), c.scope)
	case !descends:
		s.Why = fmt.Sprintf("the branch was rewritten (a force-push): %s does not descend from %s, which runs; the history it continues from, %s, differs from what runs in %s and no approval covers that difference", short(c.in.Tip), short(c.in.Deployed), short(start), c.scope)
	default:
		s.Why = fmt.Sprintf("the branch's first-parent history reaches %s, which runs, only through a merge's other parent; %s, where it starts, differs from what runs in %s", short(c.in.Deployed), short(start), c.scope)
	}
	s.Fix = fmt.Sprintf("restore %s to what runs (%s) in a commit of the branch, or have a user with write access override the tip", c.scope, short(c.in.Deployed))
	res.Steps = append(res.Steps, s)
	c.refused = &res.Steps[len(res.Steps)-1]
	return nil
}

// conclude sets the tip's verdict.
func (c *checker) conclude(res *Result) {
	if c.refused != nil {
		r := *c.refused
		res.Verdict, res.Refused = VerdictRefused, &r
		res.Why = fmt.Sprintf("%s is refused: %s", c.stepName(r), r.Why)
		return
	}
	res.Verdict, res.Why = VerdictUnaffected, fmt.Sprintf("nothing %s reads changed since %s", c.scope, short(c.in.Deployed))
	for _, s := range res.Steps {
		if s.Verdict != VerdictUnaffected {
			res.Verdict, res.Why = VerdictApproved, fmt.Sprintf("every change to %s since %s was approved", c.scope, short(c.in.Deployed))
			break
		}
	}
}

// next judges the step that starts at chain[i] and says how many commits
// it spans: one, or a rebase merge's run of commits.
func (c *checker) next(ctx context.Context, chain []string, i int) (Step, int, error) {
	parent, err := c.g.FirstParent(ctx, chain[i])
	if err != nil {
		return Step{}, 0, err
	}
	p, n, err := c.pullAt(ctx, chain, i)
	if err != nil {
		return Step{}, 0, err
	}
	if p != nil {
		s := Step{Kind: KindPull, PR: p.Number, Commit: chain[i+n-1], Commits: slices.Clone(chain[i : i+n]), Parent: parent}
		state, err := c.judge(ctx, &s, p)
		if err != nil {
			return Step{}, 0, err
		}
		// A run that is not the pull request's approved diff may be a
		// push before a squash: judge its first commit alone. A run that
		// is, refused for the change it carries, stays one step.
		if n == 1 || s.Verdict != VerdictRefused || c.carried {
			c.settle(&s, state)
			return s, n, nil
		}
	}
	s := Step{Kind: KindPush, Commit: chain[i], Parent: parent}
	state, err := c.judge(ctx, &s, nil)
	if err != nil {
		return Step{}, 0, err
	}
	c.settle(&s, state)
	return s, 1, nil
}

// pullAt finds the merged pull request whose commits start at chain[i]:
// the first commit from i on that a pull request names as its merge, when
// the run up to it is the pull request's last commits rebased (each with
// the author, date and message of the pull request's commit in its
// place: a rebase keeps them, and a push in between has its own).
func (c *checker) pullAt(ctx context.Context, chain []string, i int) (*Pull, int, error) {
	for n := 1; n <= c.maxRun && i+n <= len(chain); n++ {
		p, ok := c.byMerge[chain[i+n-1]]
		if !ok {
			continue
		}
		if n == 1 {
			return p, 1, nil
		}
		if n > p.Commits {
			return nil, 0, nil
		}
		same, err := c.rebased(ctx, chain[i:i+n], p.Head.SHA)
		if err != nil || !same {
			return nil, 0, err
		}
		return p, n, nil
	}
	return nil, 0, nil
}

// rebased says whether run is, commit by commit, the last len(run)
// commits of the first-parent history of head, rebased: false when head
// is not in the repository.
func (c *checker) rebased(ctx context.Context, run []string, head string) (bool, error) {
	if head == "" {
		return false, nil
	}
	commit := head
	for k := len(run) - 1; k >= 0; k-- {
		if commit == "" {
			return false, nil
		}
		want, err := c.g.Authored(ctx, commit)
		if err != nil {
			return false, nil // the pull request's commits are not here
		}
		got, err := c.g.Authored(ctx, run[k])
		if err != nil {
			return false, err
		}
		if got != want {
			return false, nil
		}
		if commit, err = c.g.FirstParent(ctx, commit); err != nil {
			return false, err
		}
	}
	return true, nil
}

// state is a step's outcome for the walk.
type state struct {
	tree     string
	approved bool // the step's tree is one the target may run
}

// settle records the step's outcome.
func (c *checker) settle(s *Step, st state) {
	if st.approved {
		c.approve(st.tree)
		c.refused, c.shadow = nil, st.tree
		return
	}
	if c.refused == nil {
		r := *s
		c.refused = &r
	} else {
		s.Carries = c.refused.Commit
	}
}

func (c *checker) approve(tree string) {
	if !slices.Contains(c.approved, tree) {
		c.approved = append(c.approved, tree)
	}
}

// judge sets the verdict of step s (p its pull request, nil for a push).
func (c *checker) judge(ctx context.Context, s *Step, p *Pull) (state, error) {
	g := c.g
	c.carried = false
	pt, err := g.Tree(ctx, s.Parent)
	if err != nil {
		return state{}, err
	}
	ct, err := g.Tree(ctx, s.Commit)
	if err != nil {
		return state{}, err
	}
	parentOK, err := c.isApproved(ctx, pt)
	if err != nil {
		return state{}, err
	}
	st := state{tree: ct, approved: parentOK}
	differs, err := c.differs(ctx, pt, ct)
	if err != nil {
		return st, err
	}
	if !differs {
		if by := c.overriddenBy(s.Commit); by != "" && !parentOK {
			s.Verdict, s.OverriddenBy = VerdictOverridden, by
			s.Why = fmt.Sprintf("@%s, who may write, let %s apply without approval", by, short(s.Commit))
			return state{tree: ct, approved: true}, nil
		}
		s.Verdict, s.Why = VerdictUnaffected, "changes nothing "+c.scope.String()+" reads"
		if !parentOK && c.refused != nil {
			s.Why += fmt.Sprintf("; the tree still holds %s, refused", short(c.refused.Commit))
		}
		return st, nil
	}
	var notes []string
	if p != nil {
		a, m, why, err := c.approvedAs(ctx, p, s.Parent, pt, ct)
		if err != nil {
			return st, err
		}
		if a != nil && !parentOK {
			c.carried = true
			if err := c.applyToShadow(ctx, m); err != nil {
				return st, err
			}
		}
		switch {
		case a != nil && parentOK:
			s.Verdict, s.Approval = VerdictApproved, a
			s.Why = fmt.Sprintf("applied as approved in %s at %s by @%s", c.ref(p.Number), short(a.Commit), a.By)
			return state{tree: ct, approved: true}, nil
		case a != nil:
			notes = append(notes, fmt.Sprintf("%s is what @%s approved at %s, but the tree it was merged into still holds %s, refused: an approval never carries a refused change", c.ref(p.Number), a.By, short(a.Commit), short(c.refused.Commit)))
		default:
			notes = append(notes, why)
		}
	}
	back, err := c.isApproved(ctx, ct)
	if err != nil {
		return st, err
	}
	if back {
		s.Verdict, s.Why = VerdictReverted, fmt.Sprintf("returns %s to an approved state", c.scope)
		return state{tree: ct, approved: true}, nil
	}
	if by := c.overriddenBy(s.Commit); by != "" {
		s.Verdict, s.OverriddenBy = VerdictOverridden, by
		s.Why = fmt.Sprintf("@%s, who may write, let %s apply without approval", by, short(s.Commit))
		return state{tree: ct, approved: true}, nil
	}
	s.Verdict = VerdictRefused
	if p == nil {
		notes = append([]string{fmt.Sprintf("came from no merged pull request and changes what the target reads (%s)", c.scope)}, notes...)
	}
	s.Why = strings.Join(notes, "; ")
	s.Fix = c.fix(s, p, parentOK)
	return state{tree: ct}, nil
}

// fix says what would let refused step s apply; never a new commit on
// top, which an approval would not cover either.
func (c *checker) fix(s *Step, p *Pull, parentOK bool) string {
	if !parentOK && c.refused != nil {
		return fmt.Sprintf("first deal with %s (%s)", short(c.refused.Commit), c.refused.Fix)
	}
	undo := fmt.Sprintf("revert %s on the branch, or have a writer override it", short(s.Commit))
	if p == nil || p.Head.SHA == "" {
		return undo
	}
	return fmt.Sprintf("have a writer approve %s at %s (the merged head) if its diff is what the branch got; or %s", c.ref(p.Number), short(p.Head.SHA), undo)
}

// applyToShadow applies an approved diff to the shadow tree, which
// becomes a tree the target may run; a diff that conflicts with it in
// what the target reads leaves it.
func (c *checker) applyToShadow(ctx context.Context, m merge) error {
	merged, conflicts, err := c.g.Merge(ctx, m.base, c.shadow, m.head)
	if err != nil {
		return err
	}
	if len(conflicts) > 0 {
		hit, err := c.scope.Differs(ctx, c.shadow, merged, conflicts)
		if err != nil || hit {
			return err
		}
	}
	c.shadow = merged
	c.approve(merged)
	return nil
}

// merge is an approved diff: the approved head's tree against its base's.
type merge struct{ base, head string }

// approvedAs finds a standing approval of p whose diff, applied to the
// parent tree pt, gives ct as the target reads it; why says why none did.
func (c *checker) approvedAs(ctx context.Context, p *Pull, parent, pt, ct string) (*Approval, merge, string, error) {
	approvals, unreadable := c.rec.Standing(*p)
	for _, u := range unreadable {
		if !slices.Contains(c.unreadable, u) {
			c.unreadable = append(c.unreadable, u)
		}
	}
	var whys []string
	if len(unreadable) > 0 {
		whys = append(whys, fmt.Sprintf("the permission of @%s could not be read: counted as not a writer", strings.Join(unreadable, ", @")))
	}
	if len(approvals) == 0 {
		return nil, merge{}, strings.Join(append([]string{fmt.Sprintf("%s has no standing approval by a user with write access", c.ref(p.Number))}, whys...), "; "), nil
	}
	var tried []string
	for i := range approvals {
		a := &approvals[i]
		if slices.Contains(tried, a.Commit) {
			continue
		}
		tried = append(tried, a.Commit)
		m, why, err := c.covers(ctx, p, a.Commit, parent, pt, ct)
		if err != nil {
			return nil, merge{}, "", err
		}
		if why == "" {
			return a, m, "", nil
		}
		whys = append(whys, fmt.Sprintf("@%s approved %s: %s", a.By, short(a.Commit), why))
	}
	return nil, merge{}, fmt.Sprintf("%s differs from what was approved (%s)", c.ref(p.Number), strings.Join(whys, "; ")), nil
}

// covers says whether the diff of head against the merge base the
// reviewers saw, applied to pt, gives ct as the target reads it: why is
// "" when it does, else says why not.
func (c *checker) covers(ctx context.Context, p *Pull, head, parent, pt, ct string) (m merge, why string, err error) {
	g := c.g
	if m.head, err = g.Tree(ctx, head); err != nil {
		return m, fmt.Sprintf("the approved commit is not in the repository (fetch refs/pull/%d/head): %v", p.Number, err), nil
	}
	// The base the reviewers saw; a record without it (a forge that
	// does not say) falls back to the branch as the merge found it.
	baseOf := p.Base.SHA
	if baseOf == "" {
		baseOf = parent
	}
	base, err := g.MergeBase(ctx, baseOf, head)
	if err != nil {
		return m, fmt.Sprintf("no merge base with %s: %v", short(baseOf), err), nil
	}
	if m.base, err = g.Tree(ctx, base); err != nil {
		return m, "", err
	}
	merged, conflicts, err := g.Merge(ctx, m.base, pt, m.head)
	if err != nil {
		return m, "", err
	}
	if len(conflicts) > 0 {
		hit, err := c.scope.Differs(ctx, merged, ct, conflicts)
		if err != nil {
			return m, "", err
		}
		if hit {
			return m, fmt.Sprintf("its diff conflicts with the branch in %s", strings.Join(conflicts, ", ")), nil
		}
	}
	differs, err := c.differs(ctx, merged, ct)
	if err != nil {
		return m, "", err
	}
	if differs {
		return m, "the merged tree is not its diff applied to the branch (a push after the approval, or a change made in the merge)", nil
	}
	return m, "", nil
}

// differs says whether trees a and b differ in what the target reads.
func (c *checker) differs(ctx context.Context, a, b string) (bool, error) {
	if a == b {
		return false, nil
	}
	paths, err := c.g.Changed(ctx, a, b)
	if err != nil || len(paths) == 0 {
		return false, err
	}
	return c.scope.Differs(ctx, a, b, paths)
}

// isApproved says whether tree is, as the target reads it, one the target
// may run; the newest approved trees are compared first.
func (c *checker) isApproved(ctx context.Context, tree string) (bool, error) {
	if slices.Contains(c.approved, tree) {
		return true, nil
	}
	for i := len(c.approved) - 1; i >= 0; i-- {
		d, err := c.differs(ctx, c.approved[i], tree)
		if err != nil {
			return false, err
		}
		if !d {
			return true, nil
		}
	}
	return false, nil
}

// overriddenBy is a writer who overrode commit, "" for none.
func (c *checker) overriddenBy(commit string) string {
	for _, login := range c.overrides[commit] {
		if writer(c.rec.Permissions[login]) {
			return login
		}
	}
	return ""
}

func (c *checker) stepName(s Step) string {
	switch s.Kind {
	case KindPull:
		return fmt.Sprintf("%s (%s)", c.ref(s.PR), short(s.Commit))
	case KindHistory:
		return "the history at " + short(s.Commit)
	}
	return "the push " + short(s.Commit)
}

func short(sha string) string {
	if sha == "" {
		return "(none)"
	}
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
