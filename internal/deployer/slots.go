package deployer

import (
	"context"
	"slices"
	"sync"
)

// DefaultMaxParallel is the limit of the slots New gives a deployer
// (kplan-webhook's --max-parallel-deploys). It is not a multiple of the
// cores: a deploy holds its slot while it waits on its cluster (every
// request, the objects' reconcile), and what the limit bounds is the
// memory of the renders held until their applies end and the load on the
// clusters. BenchmarkFleet (docs/performance.md): 200 targets of 49
// objects peaked at 356–387 MiB with 8, 317–328 MiB with 1 and
// 941–1,174 MiB with no limit, over the 1 GiB the manifests give the pod.
const DefaultMaxParallel = 8

// Slots bound how many deploys (fetch, render, apply and the wait for the
// objects to reconcile) run at once, whatever their targets and clusters,
// across the deployers that share them: a webhook replica holding several
// shards runs a deployer for each, and the limit is the process's. At
// fleet size, one resync or one merge touching every target would
// otherwise render every overlay at the same time (each render's objects
// held until its apply ends) and send every apply to the clusters at
// once.
//
// Slots are handed out in the order deploys asked for them, a freed slot
// going straight to the deploy waiting longest: a target whose deploy
// just ended and which has another commit waiting asks again behind
// those already waiting, so a busy target cannot starve the others.
type Slots struct {
	limit int // <= 0: no limit
	// observe, if set, is told the counts after every change (metrics);
	// it is called with mu held, so that the last call tells the last
	// counts.
	observe func(running, queued int)

	mu      sync.Mutex
	running int
	waiting []chan struct{} // oldest first; closed when handed a slot
}

// NewSlots makes limit slots (0 or less: no limit); observe, if set, is
// told how many deploys run and wait whenever that changes
// (Metrics.Slots).
func NewSlots(limit int, observe func(running, queued int)) *Slots {
	return &Slots{limit: limit, observe: observe}
}

// Limit is how many deploys may run at once; 0 or less is no limit.
func (s *Slots) Limit() int { return s.limit }

// acquire waits for a slot until ctx ends or quit closes, and reports
// whether it got one; release gives it back.
func (s *Slots) acquire(ctx context.Context, quit <-chan struct{}) bool {
	s.mu.Lock()
	if s.limit <= 0 || (s.running < s.limit && len(s.waiting) == 0) {
		s.running++
		s.tell()
		s.mu.Unlock()
		return true
	}
	ready := make(chan struct{})
	s.waiting = append(s.waiting, ready)
	s.tell()
	s.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
	case <-quit:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.waiting, ready); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.tell()
		return false
	}
	// Handed a slot while giving up: the next in line takes it.
	s.handOn()
	return false
}

// release gives a slot back: to the deploy waiting longest, if any.
func (s *Slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOn()
}

// handOn frees a slot held; s.mu is held.
func (s *Slots) handOn() {
	if len(s.waiting) > 0 {
		close(s.waiting[0]) // still running: the slot changes hands
		s.waiting = s.waiting[1:]
	} else {
		s.running--
	}
	s.tell()
}

func (s *Slots) tell() {
	if s.observe != nil {
		s.observe(s.running, len(s.waiting))
	}
}

// Counts are the deploys running and waiting for a slot (the status
// page's queue).
func (s *Slots) Counts() (running, queued int) { return s.counts() }

// counts are the deploys running and waiting for a slot.
func (s *Slots) counts() (running, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, len(s.waiting)
}
