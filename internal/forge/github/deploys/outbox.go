package deploys

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/deployreport"
)

// op is one report to GitHub (deployreport.Outbox sends them).
type op = deployreport.Op

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
