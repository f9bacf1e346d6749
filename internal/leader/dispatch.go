package leader

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

const (
	// ShardDeliveryPath is where a replica takes the parts of deliveries
	// another replica hands it (POST, on the public listener).
	ShardDeliveryPath = "/kplan/shard-delivery"
	// ShardSignatureHeader signs a part handed on: HMAC-SHA256 of the
	// body with the webhook secret, which every replica has.
	ShardSignatureHeader = "X-Kplan-Signature-256"
	// maxShardDelivery bounds a part's body: a few names and numbers.
	maxShardDelivery = 64 << 10
	// maxPending bounds the deliveries waiting for their shards' holders.
	maxPending = 1024
)

// ShardRouter says where a shard's deliveries go (Shards implements it).
type ShardRouter interface {
	Route(shard int) (local bool, holder string)
}

// ShardDelivery is a delivery's part for some shards: "the targets of
// these shards that Branch of Repo configures should converge on SHA"
// (or, LivePlan, "plan pull request PR's head SHA against them"). It
// names no target: the holder takes them from its own configuration.
type ShardDelivery struct {
	Delivery     string `json:"delivery"`
	Repo         string `json:"repo"`
	Branch       string `json:"branch"`
	SHA          string `json:"sha"`
	PR           int    `json:"pr,omitempty"`
	Acknowledged string `json:"acknowledged,omitempty"`
	DeployNow    string `json:"deployNow,omitempty"`
	LivePlan     bool   `json:"livePlan,omitempty"`
	Shards       []int  `json:"shards"`
}

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Router ShardRouter
	// Take hands d's part of shard, which this replica holds, to the
	// shard's term, without blocking; false when the term ended
	// meanwhile: the part is routed again.
	Take func(shard int, d ShardDelivery) bool
	// Secret signs the parts handed on, and checks those received.
	Secret []byte
	// Identity goes in ForwardedByHeader.
	Identity string
	// Wait bounds how long a part waits for a replica to hold its shard;
	// Retry is how often it is routed again meanwhile.
	Wait, Retry time.Duration
	// Client sends the parts; nil is one that does not follow redirects
	// or proxies and gives up after ForwardTimeout.
	Client  *http.Client
	Logger  *slog.Logger
	Metrics *Metrics
}

// Dispatcher routes each delivery's shards: the part of the shards this
// replica holds goes to their terms at once, the rest to the replicas
// holding them, signed, in the background — each holder deploys only its
// own shards' targets. A part whose shard nobody holds (its holder was
// killed, the shard is being handed over) waits and is routed again
// until a replica takes it or Wait passes; then it is dropped with an
// error logged, which loses nothing a resync does not restore: whoever
// takes a shard starts by deploying each of its targets' branch tips.
type Dispatcher struct {
	o       DispatcherOptions
	log     *slog.Logger
	client  *http.Client
	pending *semaphore.Weighted
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewDispatcher returns a Dispatcher; Close stops its background work.
func NewDispatcher(o DispatcherOptions) (*Dispatcher, error) {
	switch {
	case o.Router == nil:
		return nil, errors.New("dispatcher: no Router")
	case o.Take == nil:
		return nil, errors.New("dispatcher: no Take")
	case len(o.Secret) == 0:
		return nil, errors.New("dispatcher: no secret")
	case o.Wait <= 0 || o.Retry <= 0:
		return nil, errors.New("dispatcher: Wait and Retry must be positive")
	}
	d := &Dispatcher{o: o, log: o.Logger, client: o.Client, pending: semaphore.NewWeighted(maxPending)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.client == nil {
		d.client = &http.Client{
			Timeout: ForwardTimeout,
			// Replicas reach each other directly, never through a proxy.
			Transport: &http.Transport{
				DialContext:           (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
				ResponseHeaderTimeout: ForwardTimeout,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       time.Minute,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Close stops routing the parts still waiting and waits for their
// goroutines.
func (d *Dispatcher) Close() {
	d.cancel()
	d.wg.Wait()
}

// Dispatch routes del's shards without blocking on the network: the
// parts this replica holds are taken now, the others handed on in the
// background.
func (d *Dispatcher) Dispatch(del ShardDelivery) {
	rest := d.takeLocal(del, del.Shards)
	if len(rest) == 0 {
		return
	}
	if !d.pending.TryAcquire(1) {
		d.o.Metrics.forwarded(Busy)
		d.log.Error("too many deliveries wait for their shards' holders: this one is dropped; those shards deploy the branch when a replica takes them, or at the next resync",
			"delivery", del.Delivery, "shards", rest)
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.pending.Release(1)
		d.handOn(del, rest)
	}()
}

// takeLocal takes the parts of the shards held here and returns the
// others.
func (d *Dispatcher) takeLocal(del ShardDelivery, shards []int) []int {
	var rest []int
	for _, s := range shards {
		if local, _ := d.o.Router.Route(s); !local || !d.o.Take(s, del) {
			rest = append(rest, s)
		}
	}
	return rest
}

// handOn routes rest until every part is taken, Wait passes or the
// dispatcher closes.
func (d *Dispatcher) handOn(del ShardDelivery, rest []int) {
	deadline := time.Now().Add(d.o.Wait)
	warned := map[string]bool{} // holders whose failure was logged: the retries go to debug
	for {
		rest = d.attempt(del, rest, warned)
		if len(rest) == 0 {
			return
		}
		if time.Now().After(deadline) {
			d.o.Metrics.forwarded(NoLeader)
			d.log.Error("no replica took these shards in time: this delivery is dropped for them; they deploy the branch when a replica takes them, or at the next resync",
				"delivery", del.Delivery, "sha", del.SHA, "shards", rest, "waited", d.o.Wait)
			return
		}
		t := time.NewTimer(d.o.Retry)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// attempt routes each shard of rest once and returns those not taken.
func (d *Dispatcher) attempt(del ShardDelivery, rest []int, warned map[string]bool) []int {
	var left []int
	byHolder := map[string][]int{}
	for _, s := range rest {
		local, addr := d.o.Router.Route(s)
		switch {
		case local:
			if !d.o.Take(s, del) {
				left = append(left, s)
			}
		case addr == "":
			left = append(left, s)
		default:
			byHolder[addr] = append(byHolder[addr], s)
		}
	}
	for addr, shards := range byHolder {
		part := del
		part.Shards = shards
		taken, err := d.send(addr, part)
		if err != nil {
			d.o.Metrics.forwarded(Unreachable)
			level := slog.LevelWarn
			if warned[addr] {
				level = slog.LevelDebug
			}
			warned[addr] = true
			d.log.Log(d.ctx, level, "could not hand a delivery to the replica holding its shards; trying again until one takes them", "delivery", del.Delivery, "shards", shards, "holder", addr, "err", err)
		}
		if len(taken) > 0 {
			d.o.Metrics.forwarded(Forwarded)
			d.log.Info("delivery handed to the replica holding its shards", "delivery", del.Delivery, "sha", del.SHA, "shards", taken, "holder", addr)
		}
		for _, s := range shards {
			if !slices.Contains(taken, s) {
				left = append(left, s)
			}
		}
	}
	return left
}

// shardAnswer is a holder's answer: the shards it took.
type shardAnswer struct {
	Taken []int  `json:"taken"`
	Error string `json:"error,omitempty"`
}

// send hands part to the replica at addr and returns the shards it took.
func (d *Dispatcher) send(addr string, part ShardDelivery) ([]int, error) {
	body, err := json.Marshal(part)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(d.ctx, ForwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+ShardDeliveryPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ShardSignatureHeader, signShard(d.o.Secret, body))
	req.Header.Set(ForwardedByHeader, d.o.Identity)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a shardAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&a); err != nil {
		return nil, fmt.Errorf("HTTP %d, unreadable answer: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return a.Taken, fmt.Errorf("HTTP %d: %s", resp.StatusCode, a.Error)
	}
	return a.Taken, nil
}

// ServeHTTP takes the parts other replicas hand this one: each shard it
// holds is taken; the answer lists them, and is 503 when some are not
// (the sender routes those again). It never hands a part on itself, so
// two replicas that disagree about a holder cannot bounce one.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		replyShard(w, http.StatusMethodNotAllowed, shardAnswer{Error: "POST only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxShardDelivery))
	if err != nil {
		replyShard(w, http.StatusBadRequest, shardAnswer{Error: "could not read the body"})
		return
	}
	if !hmac.Equal([]byte(r.Header.Get(ShardSignatureHeader)), []byte(signShard(d.o.Secret, body))) {
		replyShard(w, http.StatusUnauthorized, shardAnswer{Error: "invalid signature"})
		return
	}
	var del ShardDelivery
	if err := json.Unmarshal(body, &del); err != nil {
		replyShard(w, http.StatusBadRequest, shardAnswer{Error: "malformed"})
		return
	}
	left := d.takeLocal(del, del.Shards)
	taken := slices.DeleteFunc(slices.Clone(del.Shards), func(s int) bool { return slices.Contains(left, s) })
	if len(left) > 0 {
		d.log.Info("handed shards this replica does not hold (any more): the sender routes them again", "delivery", del.Delivery, "shards", left, "from", r.Header.Get(ForwardedByHeader))
		replyShard(w, http.StatusServiceUnavailable, shardAnswer{Taken: taken, Error: "not holding shards " + ints(left)})
		return
	}
	replyShard(w, http.StatusOK, shardAnswer{Taken: taken})
}

func replyShard(w http.ResponseWriter, status int, a shardAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(a)
}

func signShard(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
