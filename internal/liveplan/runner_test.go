package liveplan

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// heldMirror holds every FetchPull until released, counting how many run
// at once; its fetches fail, so each plan posts an error comment naming
// the head it was asked for.
type heldMirror struct {
	mu            sync.Mutex
	running, peak int
	started       chan int // PR numbers as their fetch starts
	release       chan struct{}
}

func (m *heldMirror) FetchPull(ctx context.Context, _ string, number int) (string, string, error) {
	m.mu.Lock()
	m.running++
	m.peak = max(m.peak, m.running)
	m.mu.Unlock()
	m.started <- number
	select {
	case <-m.release:
	case <-ctx.Done():
	}
	m.mu.Lock()
	m.running--
	m.mu.Unlock()
	return "", "", errors.New("held fetch")
}

func (m *heldMirror) Fetch(context.Context, string, string) (string, string, error) {
	return "", "", errors.New("not used")
}

func (m *heldMirror) Snapshot(context.Context, string, string) (*snapshot.Snapshot, error) {
	return nil, errors.New("not used")
}

type posts struct {
	mu     sync.Mutex
	bodies map[int][]string
	done   chan struct{}
}

func (p *posts) Post(_ context.Context, _ string, pr int, body string) error {
	p.mu.Lock()
	p.bodies[pr] = append(p.bodies[pr], body)
	p.mu.Unlock()
	p.done <- struct{}{}
	return nil
}

// Deliveries for one PR while its plan runs coalesce: the plan running
// finishes, then only the newest waiting one runs. Two PRs are planned
// one after another with Parallel 1.
func TestRunnerNewestWins(t *testing.T) {
	m := &heldMirror{started: make(chan int, 10), release: make(chan struct{})}
	p := &posts{bodies: map[int][]string{}, done: make(chan struct{}, 10)}
	r := &Runner{Mirrors: m, Post: p}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	const a, b, c = "aaaaaaa1111", "bbbbbbb2222", "ccccccc3333"
	r.Submit(Request{Repo: "o/r", PR: 1, SHA: a})
	if got := <-m.started; got != 1 {
		t.Fatalf("started PR %d", got)
	}
	// While a's plan runs: b then c for the same PR, and another PR.
	r.Submit(Request{Repo: "o/r", PR: 1, SHA: b})
	r.Submit(Request{Repo: "o/r", PR: 1, SHA: c})
	r.Submit(Request{Repo: "o/r", PR: 2, SHA: b})
	for range 3 {
		m.release <- struct{}{}
		<-p.done
		if len(m.started) > 0 {
			<-m.started
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var heads []string
	for _, body := range p.bodies[1] {
		for _, h := range []string{a, b, c} {
			if strings.Contains(body, "`"+h[:7]+"`") {
				heads = append(heads, h[:7])
			}
		}
	}
	if strings.Join(heads, ",") != "aaaaaaa,ccccccc" {
		t.Errorf("PR 1 planned %v, want aaaaaaa then ccccccc (b superseded)", heads)
	}
	if len(p.bodies[2]) != 1 {
		t.Errorf("PR 2 planned %d times", len(p.bodies[2]))
	}
	if m.peak != 1 {
		t.Errorf("%d plans ran at once with Parallel 1", m.peak)
	}
	if !strings.Contains(p.bodies[1][0], "held fetch") {
		t.Errorf("the error comment does not say why:\n%s", p.bodies[1][0])
	}
}

// panicMirror's fetch of PR 1 panics, as a kplan bug would.
type panicMirror struct{ heldMirror }

func (m *panicMirror) FetchPull(ctx context.Context, _ string, number int) (string, string, error) {
	if number == 1 {
		panic("fetching PR 1")
	}
	return "", "", errors.New("plain failure")
}

// A kplan bug in one live plan fails that plan, its comment saying so,
// and the runner goes on planning the others.
func TestPanicFailsItsLivePlanOnly(t *testing.T) {
	p := &posts{bodies: map[int][]string{}, done: make(chan struct{}, 10)}
	r := &Runner{Mirrors: &panicMirror{}, Post: p}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r.Submit(Request{Repo: "o/r", PR: 1, SHA: "aaaaaaa1111"})
	<-p.done
	r.Submit(Request{Repo: "o/r", PR: 2, SHA: "bbbbbbb2222"})
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bodies[1]) != 1 || !strings.Contains(p.bodies[1][0], crash.Marker+"fetching PR 1") {
		t.Errorf("PR 1's comment does not name the bug: %q", p.bodies[1])
	}
	if len(p.bodies[2]) != 1 || !strings.Contains(p.bodies[2][0], "plain failure") {
		t.Errorf("PR 2 after the crash: %q", p.bodies[2])
	}
}
