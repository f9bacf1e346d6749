package deploys

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// An op is one report to GitHub, sent until GitHub takes it or refuses it
// for good. Ops with the same key say the same thing at different times
// (a commit status of one context on one commit, one Deployment's state,
// one comment), so a newer one replaces an older one still held.
type op struct {
	key, what string
	send      func(ctx context.Context) error
	held      bool // GitHub has not taken it yet and the logs say so; guarded by Reporter.mu
}

// enqueue adds o behind the reports still held, replacing one with the
// same key.
func (r *Reporter) enqueue(o *op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.IndexFunc(r.held, func(h *op) bool { return h.key == o.key }); i >= 0 {
		o.held = r.held[i].held
		r.held = slices.Delete(r.held, i, i+1)
	}
	r.held = append(r.held, o)
	if len(r.held) > r.MaxHeld {
		lost := r.held[0]
		r.held = r.held[1:]
		r.Logger.Error("GitHub report dropped: too many reports are waiting for GitHub; the deploy's outcome stays on the inventory object",
			"what", lost.what, "held", len(r.held))
	}
}

// deliver sends the held reports in order until none is left or GitHub
// keeps refusing one for now (a rate limit longer than MaxWait, an
// outage): that one and those behind it wait for the next call or Flush.
// One caller sends at a time; another's reports are sent by it.
func (r *Reporter) deliver(ctx context.Context) {
	for {
		if !r.sending.TryLock() {
			return
		}
		blocked := r.drain(ctx)
		r.sending.Unlock()
		r.mu.Lock()
		left := len(r.held)
		r.mu.Unlock()
		// Reports enqueued while the lock was held and after drain looked
		// are sent now, unless GitHub is refusing them anyway.
		if blocked || left == 0 {
			return
		}
	}
}

// drain sends held reports; it returns true when it stopped at one GitHub
// would not take yet. r.sending is held.
func (r *Reporter) drain(ctx context.Context) (blocked bool) {
	for {
		r.mu.Lock()
		if len(r.held) == 0 {
			r.mu.Unlock()
			return false
		}
		o := r.held[0]
		r.mu.Unlock()
		err := r.attempt(ctx, o.send)
		var refused *refusedError
		r.mu.Lock()
		wasHeld := o.held
		if err != nil && !errors.As(err, &refused) {
			o.held = true
			r.mu.Unlock()
			if !wasHeld {
				r.Logger.Error("GitHub report not delivered yet; it is kept and sent again until GitHub takes it",
					"what", o.what, "err", err)
			}
			return true
		}
		// A newer report with the same key may have replaced o meanwhile:
		// that one is still to be sent.
		if i := slices.Index(r.held, o); i >= 0 {
			r.held = slices.Delete(r.held, i, i+1)
		}
		r.mu.Unlock()
		switch {
		case err != nil:
			r.Logger.Error("GitHub refused a report", "what", o.what, "err", err)
		case wasHeld:
			r.Logger.Info("GitHub report delivered after waiting", "what", o.what)
		}
	}
}

// refusedError is a request GitHub answered with a client error that
// repeating will not change (a 422, a 404, a 403 that is no rate limit).
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// attempt calls send until it succeeds, is refused, runs out of attempts
// or would have to wait longer than MaxWait. GitHub's rate limits say how
// long to wait (Retry-After, or the reset time); other failures back off.
func (r *Reporter) attempt(ctx context.Context, send func(context.Context) error) error {
	backoff := r.Backoff
	for i := 1; ; i++ {
		err := send(ctx)
		if err == nil {
			return nil
		}
		retry, wait := classify(err, time.Now())
		if !retry {
			return &refusedError{err}
		}
		if wait == 0 {
			wait, backoff = backoff, backoff*2
		}
		if i >= r.Attempts || wait > r.MaxWait || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// call makes one API request with attempt's retries, for reads whose
// answer the caller needs now.
func (r *Reporter) call(ctx context.Context, what string, send func(context.Context) error) error {
	if err := r.attempt(ctx, send); err != nil {
		return errorf(what, err)
	}
	return nil
}

// defaultLimitWait is how long GitHub asks a client that tripped a
// secondary rate limit without saying for how long to wait: at least a
// minute.
const defaultLimitWait = time.Minute

// classify says whether a failed request is worth repeating and, for a
// rate limit, how long to wait first (0: back off).
func classify(err error, now time.Time) (retry bool, wait time.Duration) {
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		if abuse.RetryAfter == nil {
			return true, defaultLimitWait
		}
		return true, max(*abuse.RetryAfter, time.Second)
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		if rl.Rate.Reset.IsZero() {
			return true, defaultLimitWait
		}
		// The reset is in whole seconds: a second more is past it.
		return true, max(rl.Rate.Reset.Sub(now)+time.Second, time.Second)
	}
	resp := responseOf(err)
	if resp == nil {
		return true, 0 // no answer: the network, a timeout
	}
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests || c == http.StatusForbidden && resp.Header.Get("Retry-After") != "":
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return true, max(time.Duration(s)*time.Second, time.Second)
		}
		return true, defaultLimitWait
	case c >= 500:
		return true, 0
	case c == http.StatusUnauthorized:
		// The token was revoked or expired before its time: ghauth's
		// transport dropped it on this answer, so the next attempt, or
		// the re-send of the held report, goes with a fresh one.
		return true, 0
	default:
		return false, 0
	}
}

// responseOf finds the HTTP response in a go-github error.
func responseOf(err error) *http.Response {
	var er *github.ErrorResponse
	if errors.As(err, &er) {
		return er.Response
	}
	return nil
}
