package deployreport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// An Op is one report to a forge, sent until the forge takes it or
// refuses it for good. Ops with the same Key say the same thing at
// different times (a commit status of one context on one commit, one
// deployment's state, one comment), so a newer one replaces an older one
// still held.
type Op struct {
	Key, What string
	Send      func(ctx context.Context) error
	held      bool // the forge has not taken it yet and the logs say so; guarded by Outbox.mu
}

// Outbox sends a forge's reports: each with retries, bounded; one the
// forge does not take yet is kept, logged once, and sent again on the
// next Deliver until it is taken, a newer report of the same thing
// replacing it. Make it with its fields set; safe for concurrent use.
type Outbox struct {
	Forge  string // "GitHub", "GitLab": for the logs
	Logger *slog.Logger
	// Attempts and Backoff bound the retries of one request.
	Attempts int
	Backoff  time.Duration
	// MaxWait bounds one wait for a rate limit; a report the forge asks
	// to wait longer for is kept for later.
	MaxWait time.Duration
	// MaxHeld bounds the reports kept; past it the oldest is dropped,
	// loudly.
	MaxHeld int
	// Classify says whether a failed request is worth repeating and, for
	// a rate limit, how long to wait first (0: back off).
	Classify func(err error, now time.Time) (retry bool, wait time.Duration)

	mu      sync.Mutex
	held    []*Op      // reports the forge has not taken yet, oldest first
	sending sync.Mutex // held by the one caller sending reports
}

// Held is how many reports wait for the forge.
func (b *Outbox) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// Enqueue adds o behind the reports still held, replacing one with the
// same key.
func (b *Outbox) Enqueue(o *Op) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.IndexFunc(b.held, func(h *Op) bool { return h.Key == o.Key }); i >= 0 {
		o.held = b.held[i].held
		b.held = slices.Delete(b.held, i, i+1)
	}
	b.held = append(b.held, o)
	if len(b.held) > b.MaxHeld {
		lost := b.held[0]
		b.held = b.held[1:]
		b.Logger.Error(b.Forge+" report dropped: too many reports are waiting for "+b.Forge+"; the deploy's outcome stays on the inventory object",
			"what", lost.What, "held", len(b.held))
	}
}

// Deliver sends the held reports in order until none is left or the
// forge keeps refusing one for now (a rate limit longer than MaxWait, an
// outage): that one and those behind it wait for the next call. One
// caller sends at a time; another's reports are sent by it.
func (b *Outbox) Deliver(ctx context.Context) {
	for {
		if !b.sending.TryLock() {
			return
		}
		blocked := b.drain(ctx)
		b.sending.Unlock()
		// A report enqueued while the sender was finishing would wait
		// for the next call: look again.
		if blocked || b.Held() == 0 {
			return
		}
	}
}

// drain sends held reports; it returns true when it stopped at one the
// forge would not take yet. b.sending is held.
func (b *Outbox) drain(ctx context.Context) (blocked bool) {
	for {
		b.mu.Lock()
		if len(b.held) == 0 {
			b.mu.Unlock()
			return false
		}
		o := b.held[0]
		b.mu.Unlock()
		err := b.attempt(ctx, o.Send)
		var refused *refusedError
		b.mu.Lock()
		wasHeld := o.held
		if err != nil && !errors.As(err, &refused) {
			o.held = true
			b.mu.Unlock()
			if !wasHeld {
				b.Logger.Error(b.Forge+" report not delivered yet; it is kept and sent again until "+b.Forge+" takes it",
					"what", o.What, "err", err)
			}
			return true
		}
		if i := slices.Index(b.held, o); i >= 0 {
			b.held = slices.Delete(b.held, i, i+1)
		}
		b.mu.Unlock()
		switch {
		case err != nil:
			b.Logger.Error(b.Forge+" refused a report", "what", o.What, "err", err)
		case wasHeld:
			b.Logger.Info(b.Forge+" report delivered after waiting", "what", o.What)
		}
	}
}

// refusedError is a request the forge answered with a client error that
// repeating will not change.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// attempt calls send until it succeeds, is refused, runs out of attempts
// or would have to wait longer than MaxWait.
func (b *Outbox) attempt(ctx context.Context, send func(context.Context) error) error {
	backoff := b.Backoff
	for i := 1; ; i++ {
		err := send(ctx)
		if err == nil {
			return nil
		}
		retry, wait := b.Classify(err, time.Now())
		if !retry {
			return &refusedError{err}
		}
		if wait == 0 {
			wait, backoff = backoff, backoff*2
		}
		if i >= b.Attempts || wait > b.MaxWait || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Call makes one request with the outbox's retries, for reads whose
// answer the caller needs now.
func (b *Outbox) Call(ctx context.Context, what string, send func(context.Context) error) error {
	if err := b.attempt(ctx, send); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
