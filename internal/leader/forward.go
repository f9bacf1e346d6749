package leader

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/webhook"
)

// Router says where a delivery should go: here, or to the leader's
// address ("" when none is known). Elector implements it.
type Router interface {
	Route() (local bool, leader string)
}

const (
	// ForwardedByHeader marks a forwarded delivery with the forwarding
	// replica's identity. A replica that does not lead answers 503 to a
	// forwarded delivery instead of forwarding it again, so two replicas
	// that disagree about the leader cannot bounce one between them.
	ForwardedByHeader = "X-Kplan-Forwarded-By"
	// ForwardTimeout bounds a forward: GitHub gives up on a delivery
	// after 10 seconds, and the answer should be the leader's, not that.
	ForwardTimeout = 8 * time.Second
	// BodyTimeout bounds reading a body: a client trickling one cannot
	// hold its share of BodyBudget for longer.
	BodyTimeout = 10 * time.Second
	// BodyBudget bounds the bytes of the bodies held at once to verify and
	// forward them (GitHub sends kilobytes; a flood gets 503s).
	BodyBudget = 64 << 20
	// budgetWait is how long a delivery waits for room in the budget.
	budgetWait = time.Second
	// maxAnswer bounds the leader's answer passed on to GitHub.
	maxAnswer = 64 << 10
)

// ForwarderOptions configure a Forwarder.
type ForwarderOptions struct {
	Router Router
	// Local serves every request this replica handles itself: all of them
	// while it leads, and every route but POST /webhook otherwise.
	Local http.Handler
	// Secret is the webhook secret: a non-leader verifies a delivery's
	// signature before it forwards it, and the leader verifies it again.
	Secret []byte
	// Receiver reads the forge's deliveries (github.Receiver): their
	// signature, and which headers are theirs to forward.
	Receiver forge.Receiver
	// Identity goes in ForwardedByHeader.
	Identity string
	// Client sends forwards; nil uses one that does not follow redirects
	// or proxies and gives up after ForwardTimeout.
	Client  *http.Client
	Logger  *slog.Logger
	Metrics *Metrics
}

// Forwarder is the HTTP front of a replica: it serves locally while the
// replica leads, and otherwise forwards each signed delivery, unchanged
// (the raw body and GitHub's headers), to the leader, passing the
// leader's answer back. When no leader is known or it cannot be reached
// the answer is 503, which GitHub shows as a failed delivery to redeliver:
// a delivery is never acknowledged and then lost.
type Forwarder struct {
	o      ForwarderOptions
	log    *slog.Logger
	client *http.Client
	budget *semaphore.Weighted
}

// NewForwarder returns a Forwarder, or an error when a required option is
// missing.
func NewForwarder(o ForwarderOptions) (*Forwarder, error) {
	switch {
	case o.Router == nil:
		return nil, errors.New("forwarder: no Router")
	case o.Local == nil:
		return nil, errors.New("forwarder: no Local handler")
	case len(o.Secret) == 0:
		return nil, errors.New("forwarder: no secret")
	case o.Receiver == nil:
		return nil, errors.New("forwarder: no forge Receiver")
	}
	f := &Forwarder{o: o, log: o.Logger, client: o.Client, budget: semaphore.NewWeighted(BodyBudget)}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.client == nil {
		f.client = &http.Client{
			Timeout: ForwardTimeout,
			// Replicas reach each other directly: an HTTP_PROXY set for
			// GitHub must not carry pod-to-pod traffic.
			Transport: &http.Transport{
				DialContext:           (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
				ResponseHeaderTimeout: ForwardTimeout,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       time.Minute,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return f, nil
}

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	local, leader := f.o.Router.Route()
	if local || r.Method != http.MethodPost || r.URL.Path != "/webhook" {
		f.o.Local.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	status, outcome, msg := f.forward(w, r, leader)
	if msg != "" {
		webhook.Reply(w, status, msg)
	}
	f.o.Metrics.forwarded(outcome)
	level := slog.LevelInfo
	if status >= 400 {
		level = slog.LevelWarn
	}
	d, _ := f.o.Receiver.Delivery(r.Header)
	attrs := []slog.Attr{
		slog.String("delivery", webhook.Clip(d.ID)), slog.String("event", webhook.Clip(d.Event)),
		slog.String("outcome", outcome), slog.Int("status", status), slog.Duration("took", time.Since(start)),
	}
	if leader != "" {
		attrs = append(attrs, slog.String("leader", leader))
	}
	f.log.LogAttrs(r.Context(), level, "webhook delivery forwarded", attrs...)
}

// forward handles a delivery this replica does not deploy. It returns the
// answer's status and outcome, and a message when the answer is still to
// be written (the leader's answer is written as it comes).
func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request, leader string) (int, string, string) {
	// Answers here never name an address: GitHub shows them to anyone who
	// can see the webhook's recent deliveries.
	const redeliver = ": redeliver it in a moment (Recent Deliveries → Redeliver)"
	switch {
	case r.Header.Get(ForwardedByHeader) != "":
		return http.StatusServiceUnavailable, NoLeader, "this replica received a forwarded delivery but does not lead" + redeliver
	case leader == "":
		return http.StatusServiceUnavailable, NoLeader, "no replica leads right now (a new leader is being elected)" + redeliver
	}
	d, err := f.o.Receiver.Delivery(r.Header)
	if err != nil {
		return http.StatusUnauthorized, Unauthorized, err.Error()
	}
	if r.ContentLength > webhook.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, TooLarge, "payload over 25 MB"
	}
	size := r.ContentLength
	if size < 0 {
		size = webhook.MaxBodyBytes
	}
	wait, cancel := context.WithTimeout(r.Context(), budgetWait)
	err = f.budget.Acquire(wait, size)
	cancel()
	if err != nil {
		return http.StatusServiceUnavailable, Busy, "too many deliveries in flight" + redeliver
	}
	defer f.budget.Release(size)
	// A body is read at the client's pace: bound how long it may take.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, size))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return http.StatusRequestEntityTooLarge, TooLarge, "payload over 25 MB"
		}
		return http.StatusBadRequest, Unreadable, "could not read the body"
	}
	// Only signed deliveries go on: whoever can reach a replica cannot
	// make it send traffic to the leader.
	if !f.o.Receiver.Verify(d, func(yield func([]byte)) { yield(body) }, f.o.Secret) {
		return http.StatusUnauthorized, Unauthorized, "invalid signature"
	}

	ctx, cancel := context.WithTimeout(r.Context(), ForwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader+"/webhook", bytes.NewReader(body))
	if err != nil {
		f.log.Error("forward: bad leader address", "leader", leader, "err", err)
		return http.StatusServiceUnavailable, Unreachable, "the leading replica could not be reached" + redeliver
	}
	for k, vs := range r.Header {
		if forwardHeader(k) || f.o.Receiver.ForwardHeader(k) {
			req.Header[k] = vs
		}
	}
	req.Header.Set(ForwardedByHeader, f.o.Identity)
	resp, err := f.client.Do(req)
	if err != nil {
		f.log.Warn("forward: the leader did not answer", "leader", leader, "err", err)
		return http.StatusServiceUnavailable, Unreachable, "the leading replica could not be reached" + redeliver
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		f.log.Warn("forward: the leader's answer broke off", "leader", leader, "status", resp.StatusCode, "err", err)
		return http.StatusServiceUnavailable, Unreachable, "the leading replica's answer broke off" + redeliver
	}
	for _, k := range []string{"Content-Type", "X-Content-Type-Options"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
	return resp.StatusCode, Forwarded, ""
}

// forwardHeader says whether a request header goes to the leader: what
// GitHub sends to describe and sign the delivery, nothing else.
func forwardHeader(canonical string) bool {
	return canonical == "Content-Type" || canonical == "User-Agent"
}
