// Package webhook receives a forge's webhook deliveries and turns those
// that should deploy into Intents: "these targets should now match this
// branch at this commit". It never deploys: it authenticates, decides and
// hands the intent to an Enqueue function, answering the forge in
// milliseconds. What a delivery of the forge looks like (its headers, its
// signature, its payloads) is the forge.Receiver's (GitHub's:
// internal/forge/github); bounding, deduplicating and deciding are here.
//
// Routes: POST /webhook (push, pull_request and ping events), GET /healthz
// (the process is alive) and GET /readyz (the caller's Ready hook).
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge"
)

// MaxBodyBytes is GitHub's cap on webhook payloads (25 MB): a larger body
// is not from GitHub and is refused before it is read whole.
const MaxBodyBytes = 25 << 20

// DedupSize is how many delivery IDs are remembered to drop replays.
const DedupSize = 10000

// Intent says that Targets, configured for Branch of Repo, should now
// match commit SHA.
type Intent struct {
	Repo       string // owner/name as written in the config
	Branch     string
	SHA        string // the commit the targets should converge to
	CloneURL   string // from the config, never from the payload
	PR         int    // the merged pull request, 0 for a push
	DeliveryID string // X-GitHub-Delivery, for logs
	Targets    []config.Target
	// LivePlan says the intent is a pull request's live plan, not a
	// deploy: SHA is the PR's head, Branch its base, PR its number.
	LivePlan bool
	// AcknowledgedBy is the login that added config.ApplyUnreviewedLabel
	// to the merged PR: its merge deploys once without requireReviewedPlan's
	// check, if it is still the branch's tip.
	AcknowledgedBy string
	// DeployNowBy is the login that added the deploy-now label
	// (config.Config.DeployNowLabel) to the merged PR: its merge deploys
	// outside the targets' windows and freeze, if that user may write.
	DeployNowBy string
}

// Outcome classifies a delivery, for logs and metrics.
type Outcome string

const (
	Enqueued     Outcome = "enqueued"     // 202: an Intent was enqueued
	Ignored      Outcome = "ignored"      // 200: valid, but nothing to deploy
	Duplicate    Outcome = "duplicate"    // 200: this delivery ID was seen before
	Pong         Outcome = "pong"         // 200: a ping
	Unauthorized Outcome = "unauthorized" // 401: missing or wrong signature
	TooLarge     Outcome = "too_large"    // 413: over MaxBodyBytes
	Malformed    Outcome = "malformed"    // 400 or 415: signed, but not a payload we can read
	Busy         Outcome = "busy"         // 503: no room in the body budget (Options.BodyBudget)
	Timeout      Outcome = "timeout"      // 408: the body did not arrive within Options.BodyTimeout
)

// Options configure a Handler.
type Options struct {
	// Secret is the webhook secret set in GitHub's webhook settings. Required:
	// an empty secret would make any HMAC computable by anyone.
	Secret []byte
	// Config says which repositories and branches deploy which targets.
	Config *config.Config
	// Receiver reads the forge's deliveries (github.Receiver). Required.
	Receiver forge.Receiver
	// Enqueue receives each intent. It is called in the request, so it must
	// not block (hand off to a queue or a per-target "latest wanted" slot).
	Enqueue func(Intent)
	// LivePlan, if set, receives the intents of pull requests opened,
	// pushed to (synchronize) or reopened on a configured branch: plan
	// them against the live clusters. It must not block either. nil
	// ignores those deliveries.
	LivePlan func(Intent)
	// Ready reports whether the server can take work (/readyz); nil is
	// always ready.
	Ready func() error
	// Logger gets one line per delivery; nil logs nothing.
	Logger *slog.Logger
	// Observe, if set, is called once per POST /webhook request, for
	// metrics. event is "" for requests whose signature was not verified:
	// their headers must not become label values.
	Observe func(event string, outcome Outcome)
	// BodyBudget bounds the request body bytes held in memory at once, by
	// all requests together; 0 means DefaultBodyBudget (128 MiB). Half of
	// it is kept for the first 256 KiB of each body, so it must be at
	// least twice MaxBodyBytes. A body that finds no room is answered 503.
	BodyBudget int64
	// BodyTimeout bounds the reading of each request body, from the
	// handler's start; 0 means DefaultBodyTimeout (10 s). A body not
	// complete by then is answered 408 and its connection closed.
	BodyTimeout time.Duration
}

// Handler serves the webhook's HTTP routes. Create it with New.
type Handler struct {
	secret  []byte
	cfg     *config.Config
	forge   forge.Receiver
	enqueue func(Intent)
	live    func(Intent)
	ready   func() error
	log     *slog.Logger
	observe func(string, Outcome)
	seen    *deliveries
	mux     *http.ServeMux
	bodies  *bodyBudget
	timeout time.Duration // Options.BodyTimeout
	// busyLogs lets one busy refusal a second be logged, with the count
	// of those that were not.
	busyLogs sampler
}

// New returns a Handler, or an error when a required option is missing.
func New(o Options) (*Handler, error) {
	switch {
	case len(o.Secret) == 0:
		return nil, errors.New("webhook: no secret")
	case o.Config == nil:
		return nil, errors.New("webhook: no config")
	case o.Enqueue == nil:
		return nil, errors.New("webhook: no Enqueue function")
	case o.Receiver == nil:
		return nil, errors.New("webhook: no forge Receiver")
	case o.BodyBudget < 0 || o.BodyTimeout < 0:
		return nil, errors.New("webhook: negative BodyBudget or BodyTimeout")
	}
	if o.BodyBudget == 0 {
		o.BodyBudget = DefaultBodyBudget
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.BodyBudget < 2*MaxBodyBytes {
		return nil, fmt.Errorf("webhook: BodyBudget of %d bytes is under %d (twice the 25 MB payload limit, as half is kept for small bodies): a large delivery could never be read", o.BodyBudget, 2*MaxBodyBytes)
	}
	h := &Handler{
		secret:  bytes.Clone(o.Secret),
		cfg:     o.Config,
		forge:   o.Receiver,
		enqueue: o.Enqueue,
		live:    o.LivePlan,
		ready:   o.Ready,
		log:     o.Logger,
		observe: o.Observe,
		seen:    newDeliveries(DedupSize),
		mux:     http.NewServeMux(),
		bodies:  newBodyBudget(o.BodyBudget, o.BodyBudget/2, headWait),
		timeout: o.BodyTimeout,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.observe == nil {
		h.observe = func(string, Outcome) {}
	}
	h.mux.HandleFunc("POST /webhook", h.webhook)
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { Reply(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.readyz)
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if h.ready != nil {
		if err := h.ready(); err != nil {
			Reply(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
	}
	Reply(w, http.StatusOK, "ok")
}

// delivery is what is known of one request, for its log line.
type delivery struct {
	forge.Delivery                // its ID and Event; the credential is never logged
	signed                   bool // the signature checked out
	repo, branch, sha, cause string
	pr                       int
}

func (h *Handler) webhook(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var d delivery
	status, outcome, msg := h.receive(r, w, &d)
	Reply(w, status, msg)

	event := d.Event
	if !d.signed {
		event = "" // a header anyone can send must not become a metric label
	}
	h.observe(event, outcome)

	level := slog.LevelInfo
	if status >= 400 {
		level = slog.LevelWarn
	}
	var suppressed int64
	if outcome == Busy {
		// Busy means overload: a line per refusal would add to it.
		var log bool
		if log, suppressed = h.busyLogs.allow(start); !log {
			return
		}
	}
	attrs := []slog.Attr{
		slog.String("delivery", Clip(d.ID)), slog.String("event", Clip(d.Event)),
		slog.String("outcome", string(outcome)), slog.Int("status", status),
	}
	for _, a := range []struct{ k, v string }{{"repo", d.repo}, {"branch", d.branch}, {"sha", d.sha}, {"reason", d.cause}} {
		if a.v != "" {
			attrs = append(attrs, slog.String(a.k, a.v))
		}
	}
	if d.pr != 0 {
		attrs = append(attrs, slog.Int("pr", d.pr))
	}
	if !d.signed {
		attrs = append(attrs, slog.String("remote", r.RemoteAddr))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("busy_unlogged", suppressed))
	}
	attrs = append(attrs, slog.Duration("took", time.Since(start)))
	h.log.LogAttrs(r.Context(), level, "webhook delivery", attrs...)
}

// receive authenticates and decides one delivery, enqueuing its intent;
// it returns the answer to GitHub.
func (h *Handler) receive(r *http.Request, w http.ResponseWriter, d *delivery) (int, Outcome, string) {
	var err error
	d.Delivery, err = h.forge.Delivery(r.Header)
	if err != nil {
		d.cause = "not signed"
		return http.StatusUnauthorized, Unauthorized, err.Error()
	}
	if r.ContentLength > MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, TooLarge, "payload over 25 MB"
	}
	// Bodies are read before they can be verified: each within a deadline
	// (a slow client cannot hold its connection and memory for longer)
	// and within the memory budget (see body.go).
	deadline := time.Now().Add(h.timeout)
	if err := http.NewResponseController(w).SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		d.cause = err.Error()
		return http.StatusInternalServerError, Malformed, "could not set a deadline to read the body"
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	held, err := h.bodies.read(ctx, http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
	if err != nil {
		d.cause = err.Error()
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return http.StatusRequestEntityTooLarge, TooLarge, "payload over 25 MB"
		}
		switch {
		case errors.Is(err, errBusy):
			w.Header().Set("Retry-After", "1")
			return http.StatusServiceUnavailable, Busy, "busy reading other deliveries: redeliver it"
		case errors.Is(err, os.ErrDeadlineExceeded):
			return http.StatusRequestTimeout, Timeout, fmt.Sprintf("the body did not arrive within %v", h.timeout)
		}
		return http.StatusBadRequest, Malformed, "could not read the body"
	}
	defer held.release()
	// Verified on the raw body first, so that nothing about an unsigned
	// request is looked at.
	if !h.forge.Verify(d.Delivery, held.each, h.secret) {
		d.cause = "wrong signature"
		return http.StatusUnauthorized, Unauthorized, "invalid signature"
	}
	d.signed = true
	body := held.bytes()
	held.release() // the copy is the signed payload: give the budget back now

	ev, err := h.forge.Decode(d.Delivery, r.Header.Get("Content-Type"), body)
	if err != nil {
		d.cause = err.Error()
		status := http.StatusBadRequest
		if de, ok := errors.AsType[*forge.DecodeError](err); ok {
			status = de.Status
		}
		return status, Malformed, err.Error()
	}
	intent, ignore, err := h.decide(d, ev)
	if err != nil {
		d.cause = err.Error()
		return http.StatusBadRequest, Malformed, err.Error()
	}
	if d.ID != "" && !h.seen.add(d.ID) {
		return http.StatusOK, Duplicate, "duplicate delivery"
	}
	switch {
	case ev.Kind == forge.Ping:
		return http.StatusOK, Pong, "pong"
	case ignore != "":
		d.cause = ignore
		return http.StatusOK, Ignored, "ignored: " + ignore
	}
	if intent.LivePlan {
		h.live(*intent)
		return http.StatusAccepted, Enqueued, fmt.Sprintf("accepted: live plan of %s#%d at %s for %d target(s) of %s", intent.Repo, intent.PR, intent.SHA, len(intent.Targets), intent.Branch)
	}
	h.enqueue(*intent)
	return http.StatusAccepted, Enqueued, fmt.Sprintf("accepted: %d target(s) of %s@%s to %s", len(intent.Targets), intent.Repo, intent.Branch, intent.SHA)
}

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) // SHA-1 or SHA-256 object names

// decide reads an authenticated delivery: an intent to enqueue, a reason
// to ignore it, or an error when it is not what its event says it is.
func (h *Handler) decide(d *delivery, e forge.Event) (*Intent, string, error) {
	var (
		repo, ref, sha string
		prNumber       int
		live           bool
		ack, now       string
	)
	switch e.Kind {
	case forge.Ping:
		d.repo = e.Repo
		return nil, "", nil
	case forge.Push:
		repo, ref, sha = e.Repo, e.Ref, e.SHA
		d.repo, d.sha = repo, sha
		branch, isBranch := strings.CutPrefix(ref, "refs/heads/")
		d.branch = branch
		switch {
		case repo == "":
			return nil, "", fmt.Errorf("%s payload without the repository's name", d.Event)
		case h.cfg.Repository(repo) == nil:
			return nil, "repository " + repo + " is not configured", nil
		case !h.fromItsForge(d, repo):
			return nil, h.otherForge(d, repo), nil
		case !isBranch:
			return nil, "push to " + ref + ", not a branch", nil
		case e.Deleted || strings.Trim(sha, "0") == "":
			return nil, "branch " + branch + " deleted", nil
		}
		ref = branch
	case forge.Review:
		pr := e.Change
		repo, ref, sha = e.Repo, pr.BaseRef, pr.MergeSHA
		prNumber = pr.Number
		d.repo, d.branch, d.pr = repo, ref, prNumber
		switch {
		case repo == "":
			return nil, "", fmt.Errorf("%s payload without the repository's name", d.Event)
		case h.cfg.Repository(repo) == nil:
			return nil, "repository " + repo + " is not configured", nil
		case !h.fromItsForge(d, repo):
			return nil, h.otherForge(d, repo), nil
		case livePlanActions[e.Action] && h.live != nil:
			// Planned against the live clusters, never deployed.
			sha, live = pr.HeadSHA, true
		case e.Action == forge.Labeled && e.Label == config.ApplyUnreviewedLabel:
			if !pr.Merged {
				return nil, "label " + config.ApplyUnreviewedLabel + " on a pull request not merged", nil
			}
			// Who owns deploying what was not reviewed: logged and reported.
			ack = cmp.Or(e.Sender, "someone unnamed")
		case e.Action == forge.Labeled && strings.EqualFold(e.Label, cmp.Or(h.cfg.DeployNowLabel, config.DefaultDeployNowLabel)):
			if !pr.Merged {
				return nil, "label " + e.Label + " on a pull request not merged (add it once merged)", nil
			}
			// Checked by the deployer: only a writer's label counts.
			now = cmp.Or(e.Sender, "someone unnamed")
		case e.Action != forge.Closed:
			return nil, "pull request " + string(e.Action), nil
		case !pr.Merged:
			return nil, "pull request closed without merging", nil
		}
		d.sha = sha
	default:
		return nil, fmt.Sprintf("%s events do not deploy", d.Event), nil
	}
	targets := h.cfg.Targets(repo, ref)
	if len(targets) == 0 {
		return nil, "branch " + ref + " of " + repo + " is not configured", nil
	}
	if !commitSHA.MatchString(sha) {
		return nil, "", fmt.Errorf("%s payload: %q is not a commit SHA", d.Event, Clip(sha))
	}
	name := h.cfg.Repository(repo).Name
	return &Intent{
		Repo:           name,
		Branch:         ref,
		SHA:            sha,
		CloneURL:       h.cfg.CloneURL(name),
		PR:             prNumber,
		DeliveryID:     d.ID,
		Targets:        slices.Clone(targets),
		LivePlan:       live,
		AcknowledgedBy: ack,
		DeployNowBy:    now,
	}, "", nil
}

// fromItsForge says whether a delivery came from the forge repo is
// configured on: a GitLab project deploys from GitLab's deliveries only,
// however its path reads, and a GitHub repository from GitHub's. A
// receiver that names no forge is GitHub's, the default.
func (h *Handler) fromItsForge(d *delivery, repo string) bool {
	return strings.EqualFold(cmp.Or(d.Forge, config.GitHub), h.cfg.ForgeOf(repo))
}

func (h *Handler) otherForge(d *delivery, repo string) string {
	return fmt.Sprintf("repository %s is configured on %s, and this delivery came from %s", repo, h.cfg.ForgeOf(repo), cmp.Or(d.Forge, config.GitHub))
}

// livePlanActions are the pull_request actions that change what a PR
// would merge: each gets a live plan of the PR's head.
var livePlanActions = map[forge.ChangeAction]bool{forge.Opened: true, forge.Updated: true, forge.Reopened: true}

// Reply answers a request with a one-line plain-text msg: the webhook's
// answers, and the leader's forwarding proxy's.
func Reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// Clip bounds a client-supplied string in logs and answers.
func Clip(s string) string {
	const max = 100
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
