package githubapi

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// secondaryDocsURL is the documentation_url of GitHub's secondary rate
// limit errors; go-github recognises a 403 as an AbuseRateLimitError by it.
const secondaryDocsURL = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"

// rateLimit is the secondary rate limit the server is imposing, if any.
type rateLimit struct {
	left       int // requests still to refuse
	status     int
	retryAfter time.Duration
}

// SecondaryRateLimitNext makes the next n requests answer as GitHub does
// when a client trips a secondary rate limit: status 403 (or 429) with a
// Retry-After header of retryAfter (whole seconds, rounded up) and GitHub's
// message and documentation URL. They are refused before authentication
// and routing, and after FailNext's failures.
func (s *Server) SecondaryRateLimitNext(n, status int, retryAfter time.Duration) {
	if status == 0 {
		status = http.StatusForbidden
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = rateLimit{left: n, status: status, retryAfter: retryAfter}
}

// RateLimited counts the requests refused by SecondaryRateLimitNext.
func (s *Server) RateLimited() int {
	n := 0
	for _, r := range s.Requests() {
		if r.RateLimited {
			n++
		}
	}
	return n
}

// limited answers a request the rate limit refuses and reports whether it
// did.
func (s *Server) limited(w *statusRecorder) bool {
	s.mu.Lock()
	l := s.limit
	if l.left > 0 {
		s.limit.left--
	}
	s.mu.Unlock()
	if l.left <= 0 {
		return false
	}
	w.rateLimited = true
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(l.retryAfter.Seconds()))))
	w.Header().Set("X-RateLimit-Remaining", "4000") // a secondary limit: the primary is not exhausted
	writeJSON(w, l.status, apiError{
		Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		DocumentationURL: secondaryDocsURL,
		Status:           strconv.Itoa(l.status),
	})
	return true
}
