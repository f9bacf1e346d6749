package webhook

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Bodies are read before their signature can be checked, so anyone can
// make the webhook hold them. Their memory is bounded by a budget charged
// as bytes arrive, never for what a client merely declares: a client that
// trickles a byte a second holds one chunk, not the Content-Length it
// announced, and cannot fill the budget by being slow. Half the budget is
// kept for the first headBytes of each body (GitHub's push and
// pull_request payloads are tens of kilobytes): a flood of large bodies
// exhausts only the other half, and a large body that finds no room is
// refused at once (503) instead of waiting while holding memory.
const (
	// DefaultBodyBudget is the default Options.BodyBudget: 128 MiB of the
	// pod's 1 GiB, leaving the rest to rendering and applying. It holds
	// two maximum-size payloads (in the half not kept for heads) and
	// thousands of usual ones at once.
	DefaultBodyBudget = 128 << 20
	// DefaultBodyTimeout is the default Options.BodyTimeout. GitHub gives
	// up on a delivery after 10 seconds, so a body still arriving later is
	// not one GitHub is waiting on.
	DefaultBodyTimeout = 10 * time.Second

	chunkSize = 16 << 10  // the unit bodies are buffered and charged in
	headBytes = 256 << 10 // the first bytes of each body, charged to the whole budget
	// headWait bounds how long a body's first bytes wait for room when the
	// budget is full, before the delivery is answered 503.
	headWait = 250 * time.Millisecond
)

// errBusy says the budget had no room for a body's next bytes.
var errBusy = errors.New("the webhook is reading too many bodies at once")

// bodyBudget bounds the body bytes held in memory by all requests at once.
type bodyBudget struct {
	total *semaphore.Weighted // every buffered body byte
	tails *semaphore.Weighted // bytes past each body's first headBytes: at most half of total
	wait  time.Duration       // how long head chunks may wait for room
	pool  sync.Pool           // *[chunkSize]byte, reused so that bodies make no garbage
}

func newBodyBudget(total, tails int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{
		total: semaphore.NewWeighted(total),
		tails: semaphore.NewWeighted(tails),
		wait:  wait,
		pool:  sync.Pool{New: func() any { return new([chunkSize]byte) }},
	}
}

// body is a request body held in chunks charged to a budget; release
// returns them.
type body struct {
	b      *bodyBudget
	chunks []*[chunkSize]byte
	tail   int64   // bytes charged to tails as well as total
	n      int     // bytes read
	first  [1]byte // a chunk's first byte, read before it is charged
}

// take charges the chunk that holds body bytes from offset n on. A head
// chunk may wait for room, up to the budget's wait and until ctx is done;
// tail chunks never wait, and yield to waiting heads (TryAcquire fails
// while anyone waits), so that a flood of large bodies cannot keep the
// first bytes of small ones out.
func (b *bodyBudget) take(ctx context.Context, n int) error {
	if n < headBytes {
		if b.total.TryAcquire(chunkSize) {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, b.wait)
		defer cancel()
		if err := b.total.Acquire(ctx, chunkSize); err != nil {
			return errBusy
		}
		return nil
	}
	if !b.tails.TryAcquire(chunkSize) {
		return errBusy
	}
	if !b.total.TryAcquire(chunkSize) {
		b.tails.Release(chunkSize)
		return errBusy
	}
	return nil
}

// read reads r whole into chunks charged to the budget. A chunk is
// charged once its first byte has arrived, so a body ending on a chunk's
// end costs no extra chunk and a client that sends nothing holds nothing.
// declared is the Content-Length, -1 when unknown: a body whose declared
// tail finds no room in the tails now is refused before a byte is read
// (only checked, not reserved: a slow client must not hold what it merely
// announces). On error the chunks are already released.
func (b *bodyBudget) read(ctx context.Context, r io.Reader, declared int64) (*body, error) {
	if tail := (declared - headBytes + chunkSize - 1) / chunkSize * chunkSize; tail > 0 {
		if !b.tails.TryAcquire(tail) {
			return nil, errBusy
		}
		b.tails.Release(tail)
	}
	bd := &body{b: b}
	for {
		var (
			m   int
			err error
		)
		if bd.n == len(bd.chunks)*chunkSize {
			if m, err = r.Read(bd.first[:]); m == 1 {
				if err := b.take(ctx, bd.n); err != nil {
					bd.release()
					return nil, err
				}
				if bd.n >= headBytes {
					bd.tail += chunkSize
				}
				c := b.pool.Get().(*[chunkSize]byte)
				c[0] = bd.first[0]
				bd.chunks = append(bd.chunks, c)
			}
		} else {
			m, err = r.Read(bd.chunks[len(bd.chunks)-1][bd.n%chunkSize:])
		}
		bd.n += m
		if errors.Is(err, io.EOF) {
			return bd, nil
		}
		if err != nil {
			bd.release()
			return nil, err
		}
	}
}

// release gives the chunks back to the budget; the body is then empty.
func (bd *body) release() {
	if bd == nil || bd.b == nil {
		return
	}
	for _, c := range bd.chunks {
		bd.b.pool.Put(c)
	}
	bd.b.total.Release(int64(len(bd.chunks)) * chunkSize)
	bd.b.tails.Release(bd.tail)
	bd.chunks, bd.tail, bd.n = nil, 0, 0
}

// each calls f on the body's bytes, in order.
func (bd *body) each(f func([]byte)) {
	left := bd.n
	for _, c := range bd.chunks {
		k := min(left, chunkSize)
		f(c[:k])
		left -= k
	}
}

// bytes copies the body into one slice, for parsing once it is signed.
func (bd *body) bytes() []byte {
	out := make([]byte, 0, bd.n)
	bd.each(func(p []byte) { out = append(out, p...) })
	return out
}

// sampler allows one event per second and counts the others.
type sampler struct {
	mu      sync.Mutex
	last    time.Time
	skipped int64
}

// allow reports whether the event at now is let through, and if so how
// many were not since the last one that was.
func (s *sampler) allow(now time.Time) (bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < time.Second {
		s.skipped++
		return false, 0
	}
	n := s.skipped
	s.last, s.skipped = now, 0
	return true, n
}
