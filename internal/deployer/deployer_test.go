package deployer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

func TestSubmitKeepsOnlyTheNewestRequest(t *testing.T) {
	d := New([]Target{named("prod")}, nil, nil, nil, slog.New(slog.DiscardHandler))
	w := d.workers["prod"]
	steps := []struct {
		submit []Request
		want   *Request
	}{
		// Three merges while a deploy runs: only the last is deployed.
		{[]Request{{SHA: "a"}, {SHA: "b"}, {SHA: "c", PR: 3}}, &Request{SHA: "c", PR: 3}},
		// The push of a merged PR does not drop the PR's number.
		{[]Request{{SHA: "d", PR: 4}, {SHA: "d"}}, &Request{SHA: "d", PR: 4}},
		// A resync does not replace a concrete commit, nor the reverse.
		{[]Request{{SHA: "e"}, {}}, &Request{SHA: "e"}},
		{[]Request{{}, {SHA: "f"}}, &Request{SHA: "f"}},
		{[]Request{{}}, &Request{}},
		{nil, nil},
	}
	for i, s := range steps {
		for _, r := range s.submit {
			if err := d.Submit("prod", r); err != nil {
				t.Fatal(err)
			}
		}
		got := w.take()
		if (got == nil) != (s.want == nil) || (got != nil && *got != *s.want) {
			t.Errorf("step %d: took %+v, want %+v", i, got, s.want)
		}
	}
	if err := d.Submit("nope", Request{SHA: "a"}); err == nil {
		t.Error("an unknown target must be an error")
	}
}

// Remote bases are refused unless the target allows them.
func TestRemoteBasesAreOff(t *testing.T) {
	m := newFakeMirror("c1", fstest.MapFS{"app/kustomization.yaml": {Data: []byte("resources:\n- https://github.com/example/config//base?ref=v1\n")}})
	d := New(nil, m, nil, nil, slog.New(slog.DiscardHandler))
	_, err := d.render(context.Background(), Target{Target: config.Target{Name: "prod", Overlay: "app"}}, "mirror", "c1")
	if err == nil || !strings.Contains(err.Error(), "https://github.com/example/config//base?ref=v1") || !strings.Contains(err.Error(), "allowRemoteBases") {
		t.Errorf("render with a remote base: %v", err)
	}
}

var git = gittest.Git

// named is a configured target.
func named(name string) Target { return Target{Target: config.Target{Name: name}} }

// Two targets of one cluster rendering one inventory are both refused;
// once one renders another inventory, the other is woken and may deploy.
// Another cluster's target with the same inventory is no conflict.
func TestSharedInventoryRefusesBoth(t *testing.T) {
	elsewhere := named("elsewhere")
	elsewhere.Context = "other"
	d := New([]Target{named("staging"), named("prod"), elsewhere}, nil, nil, nil, slog.New(slog.DiscardHandler))
	inv := inventory.Identity{Kind: "ResourceGroup", Namespace: "default", Name: "inventory-1", ID: "inventory-1-default"}
	for _, name := range []string{"staging", "prod", "elsewhere"} {
		d.record(d.workers[name].target(), inv)
	}
	for _, w := range d.workers {
		w.take() // the wake-ups of the conflict found first
	}
	var ce *ConflictError
	err := d.claim(d.workers["staging"].target(), inv)
	if !errors.As(err, &ce) || !slices.Equal(ce.Targets, []string{"prod", "staging"}) || !strings.Contains(err.Error(), "would prune the other's objects") {
		t.Fatalf("staging: %v", err)
	}
	if r := d.workers["prod"].take(); r == nil {
		t.Error("prod was not woken to be refused too")
	}
	if err := d.claim(d.workers["prod"].target(), inv); !errors.As(err, &ce) {
		t.Errorf("prod: %v", err)
	}
	if err := d.claim(d.workers["elsewhere"].target(), inv); err != nil {
		t.Errorf("another cluster: %v", err)
	}
	// prod gets its own inventory: staging is woken and deploys.
	d.record(d.workers["prod"].target(), inventory.Identity{Kind: "ResourceGroup", Namespace: "default", Name: "inventory-2", ID: "inventory-2-default"})
	if r := d.workers["staging"].take(); r == nil {
		t.Error("staging was not woken")
	}
	if err := d.claim(d.workers["staging"].target(), inv); err != nil {
		t.Errorf("staging after the fix: %v", err)
	}
	// The inventory says prod deployed last and prod has not moved: refused.
	d2 := New([]Target{named("staging"), named("prod")}, nil, nil, nil, slog.New(slog.DiscardHandler))
	if err := d2.lastDeployedBy(d2.workers["staging"].target(), inv, "prod"); !errors.As(err, &ce) {
		t.Errorf("inventory last deployed by prod: %v", err)
	}
	if err := d2.lastDeployedBy(d2.workers["staging"].target(), inv, "retired"); err != nil {
		t.Errorf("inventory last deployed by a target no longer configured: %v", err)
	}
}

// The rules that pick the commit a request deploys, against a branch
// served over smart HTTP that was force-pushed: A, then B, then the
// branch reset to A and C committed on it. Only what the tip reaches is
// deployed, and never an ancestor of what the cluster runs.
func TestOnlyWhatTheTipReachesDeploys(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "octo", "cfg.git")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	commit := func(name string) string {
		os.WriteFile(filepath.Join(repo, name), []byte(name), 0o644)
		git(t, repo, "add", "-A")
		git(t, repo, "commit", "-qm", name)
		return git(t, repo, "rev-parse", "HEAD")
	}
	a := commit("a")
	b := commit("b")
	srv := githttp.Serve(t, root, "tok")
	mirrors := &gitmirror.Mirrors{Dir: t.TempDir(), Token: []byte("tok")}
	ctx := context.Background()
	tgt := Target{Target: config.Target{Name: "prod"}, CloneURL: srv.URL + "/octo/cfg.git", Branch: "main"}
	if _, tip, err := mirrors.Fetch(ctx, tgt.CloneURL, "main"); err != nil || tip != b {
		t.Fatalf("fetch B: %v", err) // the mirror holds B from now on
	}
	git(t, repo, "reset", "-q", "--hard", a)
	c := commit("c")
	d := New(nil, GitMirror{mirrors}, nil, nil, slog.New(slog.DiscardHandler))

	for _, tc := range []struct {
		name string
		req  Request
		want Request
	}{
		{"resync", Request{}, Request{SHA: c}},
		{"the tip", Request{SHA: c, PR: 5, Delivery: "d1"}, Request{SHA: c, PR: 5, Delivery: "d1"}},
		{"behind the tip", Request{SHA: a, PR: 3}, Request{SHA: c}},
		{"force-pushed away", Request{SHA: b, PR: 4, Delivery: "late"}, Request{SHA: c, Delivery: "late"}},
		{"never on the branch", Request{SHA: "0123456789abcdef0123456789abcdef01234567"}, Request{SHA: c}},
	} {
		r := tc.req
		dir, err := d.resolve(ctx, d.Logger, tgt, &r)
		if err != nil || r != tc.want {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, r, err, tc.want)
		}
		if tc.name != "resync" {
			continue
		}
		for _, rb := range []struct {
			sha, deployed string
			want          bool
		}{
			{c, "", false}, // nothing deployed yet
			{c, c, false},  // the same commit
			{c, a, false},  // forward
			{a, c, true},   // back to an ancestor
			{c, b, false},  // away from a commit pushed away: not back
		} {
			if got := d.rollsBack(ctx, dir, rb.sha, rb.deployed); got != rb.want {
				t.Errorf("rollsBack(%s, deployed %s) = %v", rb.sha[:7], rb.deployed, got)
			}
		}
	}
	// A branch that cannot be fetched is an error: nothing is deployed
	// from a mirror that may be stale.
	r := Request{SHA: c}
	if _, err := d.resolve(ctx, d.Logger, Target{CloneURL: srv.URL + "/octo/missing.git", Branch: "main"}, &r); err == nil {
		t.Error("resolve without the server's tip succeeded")
	}
}

// A kplan bug (a panic) in one deploy fails that deploy, saying so, and
// the deployer goes on: the next commit deploys. Unrecovered, the panic
// would end the webhook with Go's status 2.
func TestPanicFailsItsDeployOnly(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	m := newFakeMirror("b", overlay("b"))
	m.commit("c", "b", overlay("c"))
	m.panicOn = map[string]bool{"b": true}
	eng := &fakeEngine{}
	rep := &outcomes{}
	d := New([]Target{prod}, m, rep, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
	d.Submit("prod", Request{SHA: "b"})
	d.drain(context.Background(), d.workers["prod"])
	if len(rep.all) != 1 || !strings.Contains(fmt.Sprint(rep.all[0].Err), crash.Marker+"reading b") {
		t.Fatalf("outcomes after the panic: %+v", rep.all)
	}
	select {
	case <-d.firstRenders:
	case <-time.After(10 * time.Second):
		t.Error("the crashed target's first render still holds the others")
	}
	m.mu.Lock()
	m.tip = "c"
	m.mu.Unlock()
	d.Submit("prod", Request{SHA: "c"})
	d.drain(context.Background(), d.workers["prod"])
	if !slices.Equal(eng.applied, []string{"c"}) {
		t.Errorf("after the crash, applied %q, want c", eng.applied)
	}
}

// A target applies with the options deploy.OptionsOf takes from its
// settings, those the live plan and its pre-apply checks preview with
// (liveplan's TestLivePlanChecksSeeTheDeploysOptions).
func TestDeployAppliesWithTheTargetsOptions(t *testing.T) {
	prod := Target{Target: config.Target{Name: "prod", Overlay: "app", Namespace: "shop",
		Settings: config.Settings{Prune: true, InventoryPolicy: "adopt-all", ReconcileTimeout: 42 * time.Second, AllowReplaceInventory: true}},
		Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	m := newFakeMirror("b", overlay("b"))
	eng := &fakeEngine{}
	d := New([]Target{prod}, m, &outcomes{}, func(Target) Engine { return eng }, slog.New(slog.DiscardHandler))
	d.Submit("prod", Request{SHA: "b"})
	d.drain(context.Background(), d.workers["prod"])
	if want := deploy.OptionsOf(prod.Target); len(eng.opts) != 1 || !reflect.DeepEqual(eng.opts[0], want) {
		t.Errorf("applied with %+v, want %+v", eng.opts, want)
	}
}
