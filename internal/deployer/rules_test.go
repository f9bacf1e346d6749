package deployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// fakeMirror is a branch whose commits are in-memory trees: parents
// give the history, tip the branch.
type fakeMirror struct {
	mu         sync.Mutex
	tip        string
	parents    map[string]string
	trees      map[string]fstest.MapFS
	failFetch  int // fetches that fail before the server answers again
	fetches    int
	snapshotOf []string // the commits read
	// unserved are commits FetchCommit cannot bring in; fetched the
	// commits it was asked for.
	unserved map[string]bool
	fetched  []string
	// merges are the commits Merge makes of (base, head); a pair not
	// there conflicts. treeOf aliases a commit's tree to another's.
	merges map[[2]string]string
	treeOf map[string]string
	// panicOn are commits whose snapshot panics, as a kplan bug would.
	panicOn map[string]bool
}

func newFakeMirror(tip string, tree fstest.MapFS) *fakeMirror {
	return &fakeMirror{tip: tip, parents: map[string]string{}, trees: map[string]fstest.MapFS{tip: tree}}
}

func (m *fakeMirror) commit(sha, parent string, tree fstest.MapFS) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parents[sha], m.trees[sha] = parent, tree
}

func (m *fakeMirror) Fetch(ctx context.Context, cloneURL, branch string) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fetches++
	if m.failFetch > 0 {
		m.failFetch--
		return "", "", errors.New("fetch main from https://git.example/octo/cfg.git: the server hung up")
	}
	return "mirror", m.tip, nil
}

func (m *fakeMirror) IsAncestor(ctx context.Context, dir, a, b string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := b; c != ""; c = m.parents[c] {
		if c == a {
			return true
		}
	}
	return false
}

func (m *fakeMirror) Snapshot(ctx context.Context, dir, sha string) (*snapshot.Snapshot, error) {
	m.mu.Lock()
	tree, ok := m.trees[sha]
	m.snapshotOf = append(m.snapshotOf, sha)
	bug := m.panicOn[sha]
	m.mu.Unlock()
	if bug {
		panic("reading " + sha)
	}
	if !ok {
		return nil, fmt.Errorf("commit %s is not in the mirror", sha)
	}
	return snapshot.FromFS(tree, sha)
}

func (m *fakeMirror) FetchCommit(ctx context.Context, cloneURL, sha string, pr int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fetched = append(m.fetched, sha)
	if _, ok := m.trees[sha]; !ok || m.unserved[sha] {
		return "", fmt.Errorf("fetch commit %s from %s: by SHA: not our ref; refs/pull/%d/merge does not reach it", sha, cloneURL, pr)
	}
	return "mirror", nil
}

func (m *fakeMirror) FirstParent(ctx context.Context, dir, sha string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parents[sha]; p != "" {
		return p, nil
	}
	return "", fmt.Errorf("commit %s has no parent", sha)
}

func (m *fakeMirror) Merge(ctx context.Context, dir, base, head string) (string, string, error) {
	m.mu.Lock()
	c, ok := m.merges[[2]string{base, head}]
	m.mu.Unlock()
	if !ok {
		return "", "", fmt.Errorf("merging %s into %s: conflicts", head, base)
	}
	tree, err := m.Tree(ctx, dir, c)
	return c, tree, err
}

// Git implements Mirror: the fake world has no history to check
// approvals on (review_test.go uses real git).
func (m *fakeMirror) Git(string) approval.CLI {
	return approval.CLI{Repo: gitcli.Repo{Dir: os.DevNull}}
}

func (m *fakeMirror) Tree(ctx context.Context, dir, sha string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.treeOf[sha]; ok {
		return t, nil
	}
	return "tree-" + sha, nil
}

// fakeEngine is a cluster of one inventory: its annotations, and the
// commits applied (read from the ConfigMap each commit renders).
type fakeEngine struct {
	mu        sync.Mutex
	ann       map[string]string
	applied   []string
	opts      []deploy.Options // each apply's
	failApply int              // applies that fail before one succeeds
}

func (e *fakeEngine) State(ctx context.Context, inv *unstructured.Unstructured) (deploy.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return deploy.StateOf(e.ann), nil
}

func (e *fakeEngine) Apply(ctx context.Context, inv *unstructured.Unstructured, objs []*unstructured.Unstructured, opts deploy.Options) (*deploy.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	res := &deploy.Result{Inventory: deploy.InventoryOf(inv)}
	e.opts = append(e.opts, opts)
	for _, o := range objs {
		commit, _, _ := unstructured.NestedString(o.Object, "data", "commit")
		e.applied = append(e.applied, commit)
		res.Objects = append(res.Objects, deploy.ObjectResult{Key: o.GetName(), Action: deploy.Configured})
	}
	if e.failApply > 0 {
		e.failApply--
		return res, errors.New("apply with the inventory: admission webhook denied the request")
	}
	return res, nil
}

func (e *fakeEngine) SetState(ctx context.Context, inv *unstructured.Unstructured, s deploy.State) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ann == nil {
		e.ann = map[string]string{}
	}
	for k, v := range s.Annotations() {
		e.ann[k] = v
	}
	return nil
}

// fakeReporter records the reports as "started sha", "finished sha#pr
// reason".
type fakeReporter struct {
	mu          sync.Mutex
	reports     []string
	interrupted bool
}

func (r *fakeReporter) add(s string) {
	r.mu.Lock()
	r.reports = append(r.reports, s)
	r.mu.Unlock()
}

func (r *fakeReporter) Started(ctx context.Context, t Target, sha string, pr int) {
	r.add("started " + sha)
}

func (r *fakeReporter) Finished(ctx context.Context, o Outcome) {
	if (o.Err == nil) != (o.Reason == ReasonDeployed) {
		r.add(fmt.Sprintf("finished %s with reason %s and error %v", o.SHA, o.Reason, o.Err))
	}
	r.add(fmt.Sprintf("finished %s#%d %s", o.SHA, o.PR, o.Reason))
}

func (r *fakeReporter) Interrupted(ctx context.Context, t Target) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := r.interrupted
	r.interrupted = false
	return found, nil
}

func (r *fakeReporter) Flush(ctx context.Context) {}

// overlay is a commit's tree: app renders a ConfigMap naming the commit,
// recorded in the ResourceGroup of app/resourcegroup.yaml.
func overlay(sha string) fstest.MapFS {
	return fstest.MapFS{
		"app/kustomization.yaml": {Data: []byte("resources: [cm.yaml]\n")},
		"app/cm.yaml":            {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app}\ndata: {commit: " + sha + "}\n")},
		"app/resourcegroup.yaml": {Data: []byte("apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-prod, namespace: app}\n")},
	}
}

// broken is a commit whose overlay does not render.
func broken() fstest.MapFS {
	return fstest.MapFS{"app/kustomization.yaml": {Data: []byte("resources: [missing.yaml]\n")}}
}

// The deployer's rules, on a branch a ← b ← c (and a commit x on a that
// the branch does not reach), without git or a cluster: what each
// sequence of requests applies and reports.
func TestDeployerRules(t *testing.T) {
	deployedC := map[string]string{deploy.AnnotationSHA: "c", deploy.AnnotationOutcome: "success", deploy.AnnotationTarget: "prod"}
	type step struct {
		tip    string // the branch moves here first, if set
		submit []Request
	}
	for _, tc := range []struct {
		name        string
		tip         string
		deployed    map[string]string // the inventory's annotations before
		failFetch   int
		failApply   int
		interrupted bool
		steps       []step
		applied     []string // the commits applied, in order
		reports     []string
		fetches     int    // 0: not checked
		logged      string // a line the logs must hold, if set
	}{
		{
			name:    "a burst of requests deploys only the newest",
			tip:     "c",
			steps:   []step{{submit: []Request{{SHA: "a", PR: 1}, {SHA: "b", PR: 2}, {SHA: "c", PR: 3}}}},
			applied: []string{"c"},
			reports: []string{"started c", "finished c#3 Deployed"},
			fetches: 1,
		},
		{
			name:     "already deployed: nothing",
			tip:      "c",
			deployed: deployedC,
			steps:    []step{{submit: []Request{{SHA: "c", PR: 3}}}, {submit: []Request{{}}}},
		},
		{
			name:     "never roll back: a request for an ancestor of the deployed commit, the branch reset to it",
			tip:      "a",
			deployed: deployedC,
			steps:    []step{{submit: []Request{{SHA: "a", PR: 1}}}, {submit: []Request{{}}}},
			logged:   "not deploying: the branch's tip is older than the commit the cluster runs",
		},
		{
			name:     "a request for an ancestor of the tip deploys the tip",
			tip:      "c",
			deployed: map[string]string{deploy.AnnotationSHA: "a", deploy.AnnotationOutcome: "success", deploy.AnnotationTarget: "prod"},
			steps:    []step{{submit: []Request{{SHA: "b", PR: 2}}}},
			applied:  []string{"c"},
			reports:  []string{"started c", "finished c#0 Deployed"},
		},
		{
			name:    "a commit the tip does not reach (force-pushed away) deploys the tip",
			tip:     "c",
			steps:   []step{{submit: []Request{{SHA: "x", PR: 9, Delivery: "late"}}}},
			applied: []string{"c"},
			reports: []string{"started c", "finished c#0 Deployed"},
			logged:  "the requested commit is not on the branch",
		},
		{
			name:    "an early failure is reported once; resyncs failing the same way only log",
			tip:     "bad",
			steps:   []step{{submit: []Request{{SHA: "bad", PR: 4}}}, {submit: []Request{{}}}, {submit: []Request{{}}}},
			reports: []string{"finished bad#4 RenderFailed"},
			logged:  "deploy still failing",
		},
		{
			name:    "after an early failure, the fixed branch deploys",
			tip:     "bad",
			steps:   []step{{submit: []Request{{SHA: "bad", PR: 4}}}, {tip: "good", submit: []Request{{SHA: "good", PR: 5}}}},
			applied: []string{"good"},
			reports: []string{"finished bad#4 RenderFailed", "started good", "finished good#5 Deployed"},
		},
		{
			name:      "a failed fetch is retried on resync",
			tip:       "c",
			failFetch: 1,
			steps:     []step{{submit: []Request{{SHA: "c", PR: 3}}}, {submit: []Request{{}}}},
			applied:   []string{"c"},
			reports:   []string{"finished c#3 FetchFailed", "started c", "finished c#0 Deployed"},
		},
		{
			name:      "a reported early failure is replaced even at the deployed commit",
			tip:       "c",
			deployed:  deployedC,
			failFetch: 1,
			steps:     []step{{submit: []Request{{SHA: "c", PR: 3}}}, {submit: []Request{{}}}},
			applied:   []string{"c"},
			reports:   []string{"finished c#3 FetchFailed", "started c", "finished c#0 Deployed"},
		},
		{
			name:      "a failed apply is retried on resync, then nothing",
			tip:       "c",
			failApply: 1,
			steps:     []step{{submit: []Request{{SHA: "c", PR: 3}}}, {submit: []Request{{}}}, {submit: []Request{{}}}},
			applied:   []string{"c", "c"},
			reports:   []string{"started c", "finished c#3 ApplyFailed", "started c", "finished c#0 Deployed"},
		},
		{
			name:        "an interrupted deploy runs again at the deployed commit",
			tip:         "c",
			deployed:    deployedC,
			interrupted: true,
			steps:       []step{{submit: []Request{{}}}, {submit: []Request{{}}}},
			applied:     []string{"c"},
			reports:     []string{"started c", "finished c#0 Deployed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMirror("a", overlay("a"))
			m.commit("b", "a", overlay("b"))
			m.commit("c", "b", overlay("c"))
			m.commit("x", "a", overlay("x"))
			m.commit("bad", "c", broken())
			m.commit("good", "bad", overlay("good"))
			m.tip, m.failFetch = tc.tip, tc.failFetch
			eng := &fakeEngine{failApply: tc.failApply}
			if tc.deployed != nil {
				eng.ann = maps.Clone(tc.deployed)
			}
			rep := &fakeReporter{interrupted: tc.interrupted}
			var logs bytes.Buffer
			prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
			d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.NewTextHandler(&logs, nil)))
			ctx := context.Background()
			for _, s := range tc.steps {
				if s.tip != "" {
					m.mu.Lock()
					m.tip = s.tip
					m.mu.Unlock()
				}
				for _, r := range s.submit {
					if err := d.Submit("prod", r); err != nil {
						t.Fatal(err)
					}
				}
				d.drain(ctx, d.workers["prod"])
			}
			if !slices.Equal(eng.applied, tc.applied) {
				t.Errorf("applied %q, want %q", eng.applied, tc.applied)
			}
			if !slices.Equal(rep.reports, tc.reports) {
				t.Errorf("reports %q, want %q", rep.reports, tc.reports)
			}
			if tc.fetches != 0 && m.fetches != tc.fetches {
				t.Errorf("%d fetches, want %d", m.fetches, tc.fetches)
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("the logs lack %q:\n%s", tc.logged, logs.String())
			}
			// What the cluster records is the last deploy's outcome.
			if n := len(tc.applied); n > 0 && (eng.ann[deploy.AnnotationSHA] != tc.applied[n-1] || eng.ann[deploy.AnnotationOutcome] != "success" || eng.ann[deploy.AnnotationReason] != "Deployed" || eng.ann[deploy.AnnotationTarget] != "prod") {
				t.Errorf("recorded %v", eng.ann)
			}
		})
	}
}
