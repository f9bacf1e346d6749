package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrFenced is why a write was refused, or a term's context ended: the
// replica's own clock says its last renewal of the Lease is older than the
// renew deadline, so another replica may lead by now.
var ErrFenced = errors.New("not writing: this replica no longer holds the Lease by its own clock (its last renewal is older than the renew deadline)")

// Fence says whether this replica may still write to the clusters. It
// holds until a deadline: the moment the last successful renewal of the
// Lease was sent, plus the renew deadline, read on the process's monotonic
// clock. Another replica takes over only a whole lease duration (longer
// than the renew deadline) after it last saw the Lease change, by its
// own clock, so a replica that honours its fence has stopped writing
// before another can start: whatever kept it from renewing (a SIGSTOP, a
// partition, a starved CPU).
//
// client-go's LeaderElector alone does not give this: it cancels the
// term's context only after its renew loop runs again and gives up, and
// a process resumed after a pause runs its deploy goroutines as soon as
// that loop, so a paused leader went on applying for seconds after
// another had taken over. The fence is checked instead where the writes
// happen (Transport: before every mutating request) and ends the term's
// context (Context) the moment its deadline passes.
type Fence struct {
	renewDeadline time.Duration

	mu    sync.Mutex
	until time.Time // zero: not leading
	ends  map[*fenceWaiter]struct{}
}

type fenceWaiter struct{ cancel context.CancelCauseFunc }

// NewFence returns a fence closed until renewed: renewDeadline is the
// elector's.
func NewFence(renewDeadline time.Duration) *Fence {
	return &Fence{renewDeadline: renewDeadline, ends: map[*fenceWaiter]struct{}{}}
}

// renewed opens the fence until sent+renewDeadline: sent is when the
// renewal that succeeded was sent (the API server may have written it any
// time after).
func (f *Fence) renewed(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := sent.Add(f.renewDeadline); u.After(f.until) {
		f.until = u
	}
}

// close shuts the fence now (the term ended, the Lease was released).
func (f *Fence) close() {
	f.mu.Lock()
	f.until = time.Time{}
	f.mu.Unlock()
	f.expire()
}

// Check returns nil while this replica may write, else ErrFenced; a
// failed check ends every context made by Context before it returns, so
// whoever sees the refusal sees its context ended too.
func (f *Fence) Check() error {
	if f.remaining() > 0 {
		return nil
	}
	f.expire()
	return ErrFenced
}

// remaining is how long the fence holds still; 0 or less: closed.
func (f *Fence) remaining() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until.IsZero() {
		return 0
	}
	return time.Until(f.until) // monotonic: a wall clock step does not move it
}

func (f *Fence) expire() {
	f.mu.Lock()
	ws := f.ends
	f.ends = map[*fenceWaiter]struct{}{}
	f.mu.Unlock()
	for w := range ws {
		w.cancel(ErrFenced)
	}
}

// Context returns a context that ends with parent, or with cause ErrFenced
// the moment the fence's deadline passes (renewals in between move it).
func (f *Fence) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &fenceWaiter{cancel: cancel}
	f.mu.Lock()
	f.ends[w] = struct{}{}
	f.mu.Unlock()
	go func() {
		for {
			d := f.remaining()
			if d <= 0 {
				f.expire()
				return
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return ctx, func() {
		f.mu.Lock()
		delete(f.ends, w)
		f.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Transport wraps rt so that every request that may change the cluster
// (any method but GET, HEAD and OPTIONS) is refused with ErrFenced once
// the fence's deadline passed: every write of whatever holds the client
// is checked, by construction, right before it leaves. Dry runs are
// writes by method and are refused too; nothing a replica that does not
// lead needs to send.
func (f *Fence) Transport(rt http.RoundTripper) http.RoundTripper {
	return fencedTransport{f: f, rt: rt}
}

type fencedTransport struct {
	f  *Fence
	rt http.RoundTripper
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := t.f.Check(); err != nil {
			if req.Body != nil {
				req.Body.Close() // RoundTrip must close it, even on error
			}
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return t.rt.RoundTrip(req)
}

// fencedLock is the Lease lock that opens the fence at each successful
// acquisition or renewal by this replica: client-go writes the Lease
// through Create or Update only with this replica as holder.
type fencedLock struct {
	resourcelock.Interface
	f *Fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.wrote(sent, ler, err)
	return err
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.wrote(sent, ler, err)
	return err
}

func (l fencedLock) wrote(sent time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.f.renewed(sent)
	}
}
