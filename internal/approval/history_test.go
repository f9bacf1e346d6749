package approval_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/internal/approval"
)

// The property test: histories generated from a seed, built as real git
// repositories (pull requests branched at any commit, approvals on any of
// their commits, pushes after approval, direct pushes, reverts,
// force-pushes, merge, squash and rebase merges, queues of approved
// merges, dismissed reviews, permission changes, unreadable users), each
// checked by Check and by model, a reference rule written apart from it:
// over file contents (no git merge), with the generator's own knowledge
// of which event made each commit (no attribution from merge_commit_sha).
//
// Invariant: Check never lets apply what model does not cover.
// Liveness: a queue of approved merges after what runs is applied.

// genFiles are the paths histories change; app/ is what Dir("app") reads.
var genFiles = []string{"app/a", "app/b", "app/c", "other/d", "other/e", "app/f"}

// mstate is a tree as model sees it: each path's value, "" when absent.
type mstate map[string]string

// content is the file a value is written as: unique per path, so that no
// two paths hold the same bytes.
func content(path, v string) string {
	if v == "" {
		return ""
	}
	return path + " " + v + "\n"
}

type genPR struct {
	n       int
	fork    string // the commit it branched at
	baseSHA string // main's tip when it was opened (GitHub's base.sha)
	commits []string
	reviews []approval.Review
	open    bool
	merged  string // the commit it put last on main
}

type event struct {
	kind          string // pull, push, revert, force
	pr            *genPR
	before, after string
	what          string
}

type history struct {
	t         testing.TB
	rng       *rand.Rand
	r         *repo
	states    map[string]mstate
	main      string
	onMain    []string // main's commits, oldest first, as far as its tip reaches
	pulls     []*genPR
	perms     map[string]string
	overrides []approval.Override
	deployed  string
	deployedN int // len(events) when deployed
	events    []event
	log       []string
	seq       int
	queue     bool // the history ends in a queue of approved merges
	queueN    int
}

// reviewers: alice writes, bob is an admin, carol maintains (until a
// permission change), eve reads, dave triages, renovate[bot]'s permission
// cannot be read.
var genReviewers = []string{"alice", "bob", "carol", "eve", "dave", "renovate[bot]"}

func newHistory(t testing.TB, seed uint64) *history {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	h := &history{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), r: r, states: map[string]mstate{},
		perms: map[string]string{"alice": "write", "bob": "admin", "carol": "maintain", "eve": "read", "dave": "triage"}}
	init := mstate{}
	for _, f := range genFiles {
		init[f] = "0"
	}
	h.main = h.commitAt("", init, "initial")
	h.onMain = []string{h.main}
	return h
}

func (h *history) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

// read is the state of the work tree.
func (h *history) read() mstate {
	s := mstate{}
	for _, f := range genFiles {
		data, err := os.ReadFile(filepath.Join(h.r.dir, f))
		if err != nil {
			s[f] = ""
			continue
		}
		_, v, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
		s[f] = v
	}
	return s
}

// commitAt commits changes on top of commit at ("" for the first) and
// returns it, detached.
func (h *history) commitAt(at string, changes mstate, msg string) string {
	if at != "" {
		h.r.git("checkout", "-q", "--detach", at)
	}
	files := map[string]string{}
	for f, v := range changes {
		files[f] = content(f, v)
	}
	h.seq++
	sha := h.r.commit(files, fmt.Sprintf("%s (%d)", msg, h.seq))
	h.states[sha] = h.read()
	return sha
}

// change is a random change of one or two paths.
func (h *history) change() mstate {
	c := mstate{}
	for range 1 + h.rng.IntN(2) {
		f := genFiles[h.rng.IntN(len(genFiles))]
		v := strconv.Itoa(1 + h.rng.IntN(3))
		if h.rng.IntN(12) == 0 {
			v = ""
		}
		c[f] = v
	}
	return c
}

func (h *history) setMain(sha, kind string, pr *genPR, what string) {
	if h.deployed != "" {
		h.events = append(h.events, event{kind: kind, pr: pr, before: h.main, after: sha, what: what})
	}
	h.logf("main %s → %s: %s", short(h.main), short(sha), what)
	h.main = sha
	if i := slices.Index(h.onMain, sha); i >= 0 {
		h.onMain = h.onMain[:i+1]
	} else {
		h.onMain = append(h.onMain, sha)
	}
}

func (h *history) openPR(fork string) *genPR {
	p := &genPR{n: len(h.pulls) + 1, fork: fork, baseSHA: h.main, open: true}
	h.pulls = append(h.pulls, p)
	head := fork
	for range 1 + h.rng.IntN(2) {
		head = h.commitAt(head, h.change(), fmt.Sprintf("pr %d", p.n))
		p.commits = append(p.commits, head)
	}
	h.logf("#%d opened at %s: %s", p.n, short(fork), shorts(p.commits))
	return p
}

func (h *history) head(p *genPR) string { return p.commits[len(p.commits)-1] }

func (h *history) review(p *genPR, login, state, commit string) {
	p.reviews = append(p.reviews, approval.Review{User: approval.User{Login: login}, State: state, CommitID: commit})
	h.logf("#%d: @%s %s at %s", p.n, login, state, short(commit))
}

// merge merges p with method; false when git finds conflicts (the pull
// request is closed unmerged).
func (h *history) merge(p *genPR, method string) bool {
	r := h.r
	r.git("checkout", "-q", "--detach", h.main)
	head := h.head(p)
	var err error
	switch method {
	case "merge":
		_, err = h.try("-c", "merge.renames=false", "merge", "-q", "--no-ff", "-m", fmt.Sprintf("merge #%d", p.n), head)
	case "squash":
		if _, err = h.try("-c", "merge.renames=false", "merge", "-q", "--squash", head); err == nil {
			_, err = h.try("commit", "-q", "--allow-empty", "-m", fmt.Sprintf("#%d squashed", p.n))
		}
	case "rebase":
		_, err = h.try("-c", "merge.renames=false", "cherry-pick", "--allow-empty", "--keep-redundant-commits", p.fork+".."+head)
	}
	p.open = false
	if err != nil {
		h.try("merge", "--abort")
		h.try("cherry-pick", "--abort")
		r.git("reset", "-q", "--hard")
		r.git("checkout", "-q", "--detach", h.main)
		h.logf("#%d: %s conflicts, closed", p.n, method)
		return false
	}
	sha := r.git("rev-parse", "HEAD")
	if sha == h.main {
		h.logf("#%d: %s made no commit, closed", p.n, method)
		return false
	}
	h.states[sha] = h.read()
	p.merged = sha
	h.setMain(sha, "pull", p, fmt.Sprintf("#%d %s-merged", p.n, method))
	return true
}

func (h *history) try(args ...string) (string, error) {
	base := []string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}
	out, err := gitOut(h.r.dir, append(base, args...)...)
	return out, err
}

func (h *history) pick(xs []string) string { return xs[h.rng.IntN(len(xs))] }

func (h *history) openPulls() []*genPR {
	var open []*genPR
	for _, p := range h.pulls {
		if p.open {
			open = append(open, p)
		}
	}
	return open
}

// step makes one random event.
func (h *history) step() {
	open := h.openPulls()
	k := h.rng.IntN(100)
	if len(open) == 0 && k >= 20 && k < 75 {
		k = 0 // what needs an open pull request opens one
	}
	switch {
	case k < 20 && len(open) < 6:
		fork := h.main
		if h.rng.IntN(3) == 0 {
			fork = h.pick(h.onMain)
		}
		h.openPR(fork)
	case k < 28:
		p := open[h.rng.IntN(len(open))]
		c := h.commitAt(h.head(p), h.change(), fmt.Sprintf("pr %d pushed", p.n))
		p.commits = append(p.commits, c)
		h.logf("#%d: pushed %s", p.n, short(c))
	case k < 55:
		h.randomReview(open)
	case k < 75:
		// Mostly a pull request someone approved (a writer or not, at
		// its head or not): merging what no one approved ends most
		// histories' interest.
		p := open[h.rng.IntN(len(open))]
		if h.rng.IntN(4) != 0 {
			if approved := slices.DeleteFunc(slices.Clone(open), func(p *genPR) bool {
				return !slices.ContainsFunc(p.reviews, func(r approval.Review) bool { return r.State == approval.Approved })
			}); len(approved) > 0 {
				p = approved[h.rng.IntN(len(approved))]
			}
		}
		h.merge(p, h.pick([]string{"merge", "squash", "rebase"}))
	case k < 80:
		h.setMain(h.commitAt(h.main, h.change(), "direct push"), "push", nil, "direct push")
	case k < 85:
		// A revert: of the last commit, or of main to an earlier state.
		target := h.pick(h.onMain)
		if h.rng.IntN(2) == 0 && len(h.onMain) > 1 {
			target = h.onMain[len(h.onMain)-2]
		}
		h.setMain(h.commitAt(h.main, h.states[target], "revert to "+short(target)), "revert", nil, "revert to "+short(target))
	case k < 88:
		to := h.pick(h.onMain)
		h.setMain(to, "force", nil, "force-push to "+short(to))
		if h.rng.IntN(2) == 0 {
			h.setMain(h.commitAt(to, h.change(), "force-pushed"), "force", nil, "force-pushed a new commit")
		}
	case k < 92:
		who := h.pick([]string{"alice", "carol"})
		h.perms[who] = h.pick([]string{"read", "write", "none"})
		h.logf("@%s's permission is now %s", who, h.perms[who])
	case k < 95 && h.deployed != "" && len(h.onMain) > 1:
		c := h.onMain[1+h.rng.IntN(len(h.onMain)-1)]
		who := h.pick([]string{"bob", "eve"})
		h.overrides = append(h.overrides, approval.Override{Commit: c, User: approval.User{Login: who}})
		h.logf("@%s overrides %s", who, short(c))
	default:
		// An approved pull request merged: the case most histories
		// would otherwise reach rarely.
		p := h.openPR(h.main)
		if h.rng.IntN(3) == 0 {
			c := h.commitAt(h.head(p), h.change(), fmt.Sprintf("pr %d pushed", p.n))
			p.commits = append(p.commits, c)
		}
		h.review(p, h.pick(genReviewers), approval.Approved, h.pick(p.commits))
		h.merge(p, h.pick([]string{"merge", "squash", "rebase"}))
	}
}

// randomReview reviews one of the open pull requests: an approval,
// changes requested, a comment, or an admin's dismissal of an approval.
func (h *history) randomReview(open []*genPR) {
	p := open[h.rng.IntN(len(open))]
	commit := h.head(p)
	if h.rng.IntN(4) == 0 {
		commit = h.pick(p.commits)
	}
	login := h.pick(append(genReviewers, "alice", "bob"))
	switch s := h.rng.IntN(10); {
	case s < 6:
		h.review(p, login, approval.Approved, commit)
	case s < 7:
		h.review(p, login, approval.ChangesRequested, commit)
	case s < 8:
		h.review(p, login, approval.Commented, commit)
	default: // an admin dismisses the reviewer's latest approval
		for i := len(p.reviews) - 1; i >= 0; i-- {
			if p.reviews[i].State == approval.Approved {
				p.reviews[i].State = approval.Dismissed
				h.logf("#%d: @%s's approval at %s dismissed", p.n, p.reviews[i].User.Login, short(p.reviews[i].CommitID))
				break
			}
		}
	}
}

func (h *history) deploy() {
	h.deployed, h.deployedN = h.main, len(h.events)
	h.logf("deployed %s", short(h.main))
}

// runQueue opens n pull requests at main's tip, each changing paths no
// other changes, approves each at its head by a writer, and merges them
// back to back.
func (h *history) runQueue(n int) {
	files := slices.Clone(genFiles)
	h.rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	var queue []*genPR
	for i := range n {
		p := &genPR{n: len(h.pulls) + 1, fork: h.main, baseSHA: h.main, open: true}
		h.pulls = append(h.pulls, p)
		head := h.main
		for range 1 + h.rng.IntN(2) {
			head = h.commitAt(head, mstate{files[i]: strconv.Itoa(1 + h.rng.IntN(3))}, fmt.Sprintf("queued pr %d", p.n))
			p.commits = append(p.commits, head)
		}
		h.logf("#%d queued at %s: %s", p.n, short(h.main), shorts(p.commits))
		if h.rng.IntN(3) == 0 {
			h.review(p, "renovate[bot]", approval.Approved, head)
		}
		h.review(p, "bob", approval.Approved, head)
		queue = append(queue, p)
	}
	for _, p := range queue {
		if !h.merge(p, h.pick([]string{"merge", "squash", "rebase"})) {
			h.t.Fatalf("a queued pull request does not merge:\n%s", strings.Join(h.log, "\n"))
		}
	}
}

// generate makes a history from the generator's seed.
func generate(t testing.TB, seed uint64) *history {
	h := newHistory(t, seed)
	events := 6 + h.rng.IntN(18)
	h.queue = h.rng.IntN(4) == 0
	deployAt := h.rng.IntN(events/2 + 1)
	for i := range events {
		if i == deployAt {
			h.deploy()
		}
		h.step()
	}
	if h.queue || h.deployed == "" {
		h.deploy()
	}
	if h.queue {
		h.queueN = 1 + h.rng.IntN(5)
		h.runQueue(h.queueN)
	}
	return h
}

func (h *history) record() *approval.Record {
	rec := &approval.Record{Permissions: h.perms, Overrides: h.overrides}
	for _, p := range h.pulls {
		ap := approval.Pull{Number: p.n, Base: approval.Ref{Ref: "main", SHA: p.baseSHA}, Head: approval.Ref{SHA: h.head(p)},
			Commits: len(p.commits), Reviews: p.reviews}
		if p.merged != "" {
			ap.Merge, ap.MergedAt = p.merged, "2026-01-01T00:00:00Z"
		}
		rec.Pulls = append(rec.Pulls, ap)
	}
	return rec
}

// model is the reference rule. It walks the events after the deploy as
// the generator made them (it knows which pull request made which
// commits, and the commit each pull request branched at), over file
// values: a pull request's event is covered when its parent is a state
// the target may run and a standing approval's diff (branch point →
// approved commit), applied path by path, gives the event's state; a
// state returns to coverage when it equals one covered before (or the
// state approved diffs alone give), or a writer overrides its commit.
func model(h *history, reads func(string) bool) (covered bool, why string) {
	eq := func(a, b mstate) bool {
		for _, f := range genFiles {
			if reads(f) && a[f] != b[f] {
				return false
			}
		}
		return true
	}
	in := func(set []mstate, s mstate) bool {
		return slices.ContainsFunc(set, func(x mstate) bool { return eq(x, s) })
	}
	apply := func(base, s, head mstate) (mstate, bool) { return modelApply(reads, base, s, head) }
	writer := func(login string) bool {
		switch h.perms[login] {
		case "admin", "maintain", "write":
			return true
		}
		return false
	}
	standing := func(p *genPR) []string { return modelStanding(p, writer) }
	S := func(c string) mstate { return h.states[c] }
	justified := []mstate{S(h.deployed)}
	shadow, ok := S(h.deployed), true
	why = "covered"
	for _, ev := range h.events[h.deployedN:] {
		P, C := S(ev.before), S(ev.after)
		overridden := slices.ContainsFunc(h.overrides, func(o approval.Override) bool { return o.Commit == ev.after && writer(o.User.Login) })
		if eq(P, C) {
			if !ok && overridden {
				ok, shadow = true, C
				justified = append(justified, C)
			}
			continue
		}
		if ev.kind == "pull" {
			verified := false
			for _, a := range standing(ev.pr) {
				base, head := S(ev.pr.fork), S(a)
				res, clean := apply(base, P, head)
				if !clean || !eq(res, C) {
					continue
				}
				verified = true
				if !ok {
					if sh, clean := apply(base, shadow, head); clean {
						shadow = sh
						justified = append(justified, sh)
					}
				}
				break
			}
			if verified && ok {
				justified, shadow = append(justified, C), C
				continue
			}
		}
		if in(justified, C) {
			ok, shadow = true, C
			continue
		}
		if overridden {
			ok, shadow = true, C
			justified = append(justified, C)
			continue
		}
		if ok {
			why = fmt.Sprintf("not covered from %s: %s", short(ev.after), ev.what)
		}
		ok = false
	}
	return ok, why
}

// modelApply applies the diff base → head to s, path by path; ok is
// false on a conflict in what the target reads.
func modelApply(reads func(string) bool, base, s, head mstate) (mstate, bool) {
	out := mstate{}
	for _, f := range genFiles {
		b, p, hd := base[f], s[f], head[f]
		switch {
		case b == hd, p == hd:
			out[f] = p
		case p == b:
			out[f] = hd
		case reads(f):
			return nil, false
		default:
			out[f] = p
		}
	}
	return out, true
}

// modelStanding are the commits p's standing approvals were given on:
// per reviewer the last review that is not a comment, when it approves
// and its reviewer may write.
func modelStanding(p *genPR, writer func(string) bool) []string {
	last := map[string]approval.Review{}
	var order []string
	for _, rv := range p.reviews {
		if rv.State == approval.Commented {
			continue
		}
		if _, ok := last[rv.User.Login]; !ok {
			order = append(order, rv.User.Login)
		}
		last[rv.User.Login] = rv
	}
	var commits []string
	for _, login := range order {
		if rv := last[login]; rv.State == approval.Approved && writer(login) {
			commits = append(commits, rv.CommitID)
		}
	}
	return commits
}

// histories counts the histories generated in this process, and what
// the checks found.
var histories, disagreements, stricter atomic.Int64

// outcomes counts Check's verdicts and model's, per history and scope
// ("approved/covered"), to show the histories exercise both answers.
var outcomes sync.Map

// checkHistory generates the history of seed and checks Check against
// model on it, for the whole tree and for app/.
func checkHistory(t *testing.T, seed uint64) {
	h := generate(t, seed)
	histories.Add(1)
	rec := h.record()
	if err := rec.Validate(); err != nil {
		t.Fatalf("seed %d: the generated record: %v", seed, err)
	}
	for _, sc := range []struct {
		scope approval.Scope
		reads func(string) bool
	}{
		{approval.WholeTree{}, func(string) bool { return true }},
		{approval.Dir("app"), func(p string) bool { return strings.HasPrefix(p, "app/") }},
	} {
		res := h.r.check(h.deployed, h.main, rec, sc.scope)
		covered, why := model(h, sc.reads)
		describe := func() string {
			var b strings.Builder
			fmt.Fprintf(&b, "seed %d, scope %s: Check says %s (%s), model says %s\nhistory:\n  %s\nsteps:\n", seed, sc.scope, res.Verdict, res.Why, why, strings.Join(h.log, "\n  "))
			for _, s := range res.Steps {
				fmt.Fprintf(&b, "  %s %s #%d %s: %s %s\n", short(s.Commit), s.Kind, s.PR, s.Verdict, s.Why, shorts(s.Commits))
			}
			return b.String()
		}
		v, _ := outcomes.LoadOrStore(fmt.Sprintf("%s/%v", res.Verdict, covered), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		if res.Ok() && !covered {
			disagreements.Add(1)
			t.Errorf("applied what no approval covers:\n%s", describe())
		}
		if !res.Ok() && covered {
			stricter.Add(1)
			if testing.Verbose() {
				t.Logf("Check refuses what model covers:\n%s", describe())
			}
		}
		if h.queue && (!res.Ok() || !covered) {
			t.Errorf("a queue of %d approved merges is refused:\n%s", h.queueN, describe())
		}
	}
}

// TestApprovalHistories checks generated histories (KPLAN_HISTORIES
// sets how many; 32 by default, 20 to 35 s with -race).
func TestApprovalHistories(t *testing.T) {
	n := 32
	if s := os.Getenv("KPLAN_HISTORIES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	start := histories.Load()
	for seed := range uint64(n) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { checkHistory(t, seed) })
	}
	t.Logf("%d histories; Check applied what model does not cover: %d; Check refused what model covers: %d",
		histories.Load()-start, disagreements.Load(), stricter.Load())
	outcomes.Range(func(k, v any) bool {
		t.Logf("Check %s / model covered %s: %d", strings.Split(k.(string), "/")[0], strings.Split(k.(string), "/")[1], v.(*atomic.Int64).Load())
		return true
	})
}

// FuzzApprovalHistories checks the history the generator makes from a
// seed (testdata/fuzz/FuzzApprovalHistories holds seeds go test runs).
func FuzzApprovalHistories(f *testing.F) {
	for _, seed := range []uint64{1 << 40, 7777, 31337} {
		f.Add(seed)
	}
	f.Fuzz(checkHistory)
}

func shorts(shas []string) string {
	var s []string
	for _, c := range shas {
		s = append(s, short(c))
	}
	return strings.Join(s, ",")
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
