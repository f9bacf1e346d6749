package deployer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// Slots go to deploys in the order they asked: a target that gives its
// slot back and asks again at once (another commit waits for it) is
// served after the deploys already waiting, not before. One that stops
// waiting (its run ended, its target was retired) leaves the line.
func TestSlotsGoInOrder(t *testing.T) {
	s := NewSlots(1, nil)
	ctx := t.Context()
	got := make(chan string, 8)
	ask := func(ctx context.Context, quit <-chan struct{}, name string) chan bool {
		done := make(chan bool, 1)
		go func() {
			ok := s.acquire(ctx, quit)
			if ok {
				got <- name
			}
			done <- ok
		}()
		return done
	}
	queued := func(n int) {
		t.Helper()
		testkit.Eventually(t, fmt.Sprintf("%d deploys waiting", n), 10*time.Second, func() bool {
			_, q := s.counts()
			return q == n
		})
	}
	next := func(want string) {
		t.Helper()
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("the slot went to %s, want %s", name, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the slot went to nobody, want %s", want)
		}
	}

	if !s.acquire(ctx, nil) {
		t.Fatal("the first deploy waits for a free slot")
	}
	ask(ctx, nil, "b")
	queued(1)
	// a's target has another commit: it frees its slot, which goes
	// straight to b, and asks again.
	s.release()
	if r, q := s.counts(); r != 1 || q != 0 {
		t.Fatalf("after a freed its slot: %d running and %d queued, want b running", r, q)
	}
	ask(ctx, nil, "a")
	next("b")
	queued(1)
	// c waits behind a; d waits too, but its run ends, and e's target is
	// retired.
	ask(ctx, nil, "c")
	queued(2)
	dctx, cancel := context.WithCancel(ctx)
	dDone := ask(dctx, nil, "d")
	quit := make(chan struct{})
	eDone := ask(ctx, quit, "e")
	queued(4)
	cancel()
	close(quit)
	if <-dDone || <-eDone {
		t.Fatal("a deploy that stopped waiting got a slot")
	}
	queued(2)
	s.release()
	next("a")
	s.release()
	next("c")
	s.release()
	if r, q := s.counts(); r != 0 || q != 0 {
		t.Errorf("%d running and %d queued after every slot was given back", r, q)
	}
	// No limit: nobody waits.
	s = NewSlots(0, nil)
	for range 5 {
		if !s.acquire(ctx, nil) {
			t.Fatal("no limit, and a deploy did not run")
		}
	}
	if r, q := s.counts(); r != 5 || q != 0 {
		t.Errorf("without a limit: %d running and %d queued, want 5 and 0", r, q)
	}
}

// gate holds every apply of its engines until opened, and counts how
// many apply at once.
type gate struct {
	open chan struct{}

	mu             sync.Mutex
	applying, most int
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) applyingNow() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.applying
}

// gatedEngine is a fakeEngine whose applies wait for the gate.
type gatedEngine struct {
	*fakeEngine
	g *gate
}

func (e gatedEngine) Apply(ctx context.Context, inv *unstructured.Unstructured, objs []*unstructured.Unstructured, opts deploy.Options) (*deploy.Result, error) {
	e.g.mu.Lock()
	e.g.applying++
	e.g.most = max(e.g.most, e.g.applying)
	e.g.mu.Unlock()
	defer func() {
		e.g.mu.Lock()
		e.g.applying--
		e.g.mu.Unlock()
	}()
	select {
	case <-e.g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.fakeEngine.Apply(ctx, inv, objs, opts)
}

// slotMetrics records what the deployer says of its slots.
type slotMetrics struct {
	mu                    sync.Mutex
	running, queued, most int
}

func (m *slotMetrics) Deployed(Outcome, bool) {}

func (m *slotMetrics) Slots(running, queued int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running, m.queued, m.most = running, queued, max(m.most, running)
}

func (m *slotMetrics) counts() (running, queued, most int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running, m.queued, m.most
}

// clusterTarget is a target of its own cluster deploying app.
func clusterTarget(name string) Target {
	t := Target{Target: config.Target{Name: name, Overlay: "app"}, Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git"}
	t.Context = name
	return t
}

// With a limit of 2, six targets of six clusters triggered at once (the
// start's resync) deploy two at a time, the others waiting, as the
// metrics say; and every one of them deploys. The first renders, which
// every apply awaits, do not hold slots the other targets need to
// render.
func TestAtMostMaxParallelDeploysRun(t *testing.T) {
	var targets []Target
	engines := map[string]*fakeEngine{}
	for i := range 6 {
		tgt := clusterTarget(fmt.Sprint("c", i))
		targets = append(targets, tgt)
		engines[tgt.Name] = &fakeEngine{}
	}
	g := newGate()
	m := &slotMetrics{}
	rep := &outcomes{}
	d := New(targets, newFakeMirror("b", overlay("b")), rep, func(t Target) Engine { return gatedEngine{engines[t.Name], g} }, slog.New(slog.DiscardHandler))
	d.Slots = NewSlots(2, m.Slots)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		d.Run(ctx)
		close(ran)
	}()
	defer func() {
		cancel()
		<-ran
	}()

	testkit.Eventually(t, "two deploys applying and four waiting", time.Minute, func() bool {
		_, queued, _ := m.counts()
		return g.applyingNow() == 2 && queued == 4
	})
	close(g.open)
	testkit.Eventually(t, "every target deployed", time.Minute, func() bool {
		rep.mu.Lock()
		defer rep.mu.Unlock()
		return len(rep.all) == len(targets)
	})
	for name, e := range engines {
		e.mu.Lock()
		if !slices.Equal(e.applied, []string{"b"}) {
			t.Errorf("%s applied %q, want b", name, e.applied)
		}
		e.mu.Unlock()
	}
	for _, o := range rep.all {
		if o.Err != nil {
			t.Errorf("%s: %v", o.Target.Name, o.Err)
		}
	}
	g.mu.Lock()
	most := g.most
	g.mu.Unlock()
	if _, _, mostRunning := m.counts(); most != 2 || mostRunning != 2 {
		t.Errorf("at most %d applied at once and %d deploys ran at once, want 2 and 2", most, mostRunning)
	}
	testkit.Eventually(t, "no deploy running or queued", time.Minute, func() bool {
		running, queued, _ := m.counts()
		return running == 0 && queued == 0
	})
}

// Two deployers sharing slots (a replica holding two shards) run at most
// the limit between them: one's deploy waits for the other's to end.
func TestSharedSlotsBoundDeployersTogether(t *testing.T) {
	g := newGate()
	m := &slotMetrics{}
	shared := NewSlots(1, m.Slots)
	engines := map[string]*fakeEngine{"a": {}, "b": {}}
	rep := &outcomes{}
	var ds []*Deployer
	for _, name := range []string{"a", "b"} {
		d := New([]Target{clusterTarget(name)}, newFakeMirror("b", overlay("b")), rep, func(t Target) Engine { return gatedEngine{engines[t.Name], g} }, slog.New(slog.DiscardHandler))
		d.Slots = shared
		d.Resync = time.Hour
		ds = append(ds, d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var ran sync.WaitGroup
	for _, d := range ds {
		ran.Go(func() { d.Run(ctx) })
	}
	defer func() {
		cancel()
		ran.Wait()
	}()
	testkit.Eventually(t, "one deploy applying and the other waiting", time.Minute, func() bool {
		_, queued, _ := m.counts()
		return g.applyingNow() == 1 && queued == 1
	})
	close(g.open)
	testkit.Eventually(t, "both deployed", time.Minute, func() bool {
		rep.mu.Lock()
		defer rep.mu.Unlock()
		return len(rep.all) == 2
	})
	g.mu.Lock()
	applied := g.most
	g.mu.Unlock()
	if _, _, most := m.counts(); most != 1 || applied != 1 {
		t.Errorf("%d deploys ran and %d applied at once, want 1", most, applied)
	}
}

// A target waiting for a slot takes its request only once it has one: a
// merge arriving meanwhile replaces the one waiting, which is never
// deployed (nor reported).
func TestAQueuedDeployTakesTheNewestCommit(t *testing.T) {
	x, y := clusterTarget("x"), clusterTarget("y")
	m := newFakeMirror("b", overlay("b"))
	m.commit("c", "b", overlay("c"))
	g := newGate()
	ex, ey := &fakeEngine{}, &fakeEngine{}
	rep := &outcomes{}
	d := New([]Target{x, y}, m, rep, func(t Target) Engine {
		if t.Name == "x" {
			return gatedEngine{ex, g}
		}
		return ey
	}, slog.New(slog.DiscardHandler))
	slotsSeen := &slotMetrics{}
	d.Slots = NewSlots(1, slotsSeen.Slots)
	for _, w := range d.workers {
		w.first() // no first render to wait for: each target deploys alone
	}
	ctx := t.Context()
	drained := func(name string) chan struct{} {
		done := make(chan struct{})
		go func() {
			d.drain(ctx, d.workers[name])
			close(done)
		}()
		return done
	}

	d.Submit("x", Request{SHA: "b"})
	xDone := drained("x")
	testkit.Eventually(t, "x applying", time.Minute, func() bool { return g.applyingNow() == 1 })
	d.Submit("y", Request{SHA: "b", PR: 1})
	yDone := drained("y")
	testkit.Eventually(t, "y waiting for the slot", time.Minute, func() bool {
		_, queued, _ := slotsSeen.counts()
		return queued == 1
	})
	m.mu.Lock()
	m.tip = "c"
	m.mu.Unlock()
	d.Submit("y", Request{SHA: "c", PR: 2})
	close(g.open)
	<-xDone
	<-yDone

	var ys []string
	for _, o := range rep.all {
		if o.Target.Name == "y" {
			ys = append(ys, fmt.Sprintf("%s#%d %v", o.SHA, o.PR, o.Err))
		}
	}
	if !slices.Equal(ys, []string{"c#2 <nil>"}) {
		t.Errorf("y reported %q, want only c#2 deployed", ys)
	}
	if !slices.Equal(ey.applied, []string{"c"}) || !slices.Equal(ex.applied, []string{"b"}) {
		t.Errorf("applied x %q and y %q, want b and c", ex.applied, ey.applied)
	}
}
