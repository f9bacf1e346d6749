package leader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Sharded holding: the targets are spread over a fixed number of shards
// (ShardOf), each held by one replica at a time on a Lease of its own,
// "<name>-shard-<i>"; the replica holding a shard deploys its targets,
// and the others hand it their deliveries' part (Dispatcher).
//
// Balance: each replica announces itself on a Lease of its own,
// "<name>-replica-<hash of its identity>", renewed like the shards'; a
// replica counts the replicas alive and holds at most
// ceil(shards/replicas) shards. It acquires free shards up to that cap,
// in the order its rendezvous score with each shard gives (so that
// replicas starting together reach for different shards), and hands
// over those above it (a new replica came up) once their work stopped.
//
// Safety is the single Lease's, per shard: a replica writes for a shard
// only while its Fence is open, until its last renewal's sending plus
// the renew deadline by its own clock; another acquires the shard only
// a whole lease duration after it last saw the Lease change, by its own
// clock; and every write of a Lease is conditional on the version read.
const (
	// ShardGroupLabel is on every Lease of a sharded group: its value is
	// the group's name (--leader-election-id), and the replicas list the
	// group's Leases by it.
	ShardGroupLabel = "kplan.dev/shards"
	// ShardCountAnnotation is on a replica's Lease: its number of shards.
	// Replicas of another count hash targets to other shards: no shard is
	// acquired while one of them is alive.
	ShardCountAnnotation = "kplan.dev/shard-count"
)

var (
	// ErrShardLost ends a term whose Lease another replica wrote.
	ErrShardLost = errors.New("another replica holds the shard's Lease now")
	// errHandOver ends a term above the replica's fair share.
	errHandOver = errors.New("handing the shard to another replica (more replicas are alive)")
)

// ShardsConfig configures Shards.
type ShardsConfig struct {
	Leases coordinationv1client.LeasesGetter
	// Namespace of the Leases; Name is the group's: shard i's Lease is
	// ShardLease(Name, i).
	Namespace, Name string
	// Shards is how many shards there are, at least 1.
	Shards int
	// Identity of this replica, made with Identity.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod mean what they mean
	// for the Elector, for each shard.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Logger                                    *slog.Logger
	Metrics                                   *Metrics
}

// ShardTerm is one hold of a shard by this replica: the work it starts
// writes to the clusters through Fence.
type ShardTerm struct {
	Shard int
	Fence *Fence
}

// Shards holds this replica's share of the shards and says who holds the
// others. Create it with NewShards.
type Shards struct {
	c      ShardsConfig
	log    *slog.Logger
	leases coordinationv1client.LeaseInterface
	member string // this replica's Lease

	mu     sync.Mutex
	seen   map[string]*seenLease // the group's Leases as last listed
	held   map[int]*hold
	listed bool
	// legacyFree is set once the single Lease of --shards 1 (Name) was
	// seen free: replicas electing one leader do not know shards.
	legacyFree bool
	legacy     *seenLease
	waiting    string // why nothing is acquired, as last logged
}

// seenLease is a Lease as last listed, and when this process saw it
// change (its monotonic clock).
type seenLease struct {
	lease   *coordinationv1.Lease
	changed time.Time
}

// hold is a shard this replica holds.
type hold struct {
	fence *Fence
	lease *coordinationv1.Lease // as this replica last wrote it
	end   context.CancelCauseFunc
	done  chan struct{} // closed when the term's work returned
	// ending: the term was told to stop; its deliveries wait for the
	// next holder. lost: another replica wrote the Lease, which is then
	// not this one's to release.
	ending, lost bool
}

// ShardLease names shard i's Lease.
func ShardLease(name string, i int) string { return name + "-shard-" + strconv.Itoa(i) }

// ReplicaLease names the Lease a replica announces itself on.
func ReplicaLease(name, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return name + "-replica-" + hex.EncodeToString(sum[:5])
}

// NewShards checks c and returns Shards.
func NewShards(c ShardsConfig) (*Shards, error) {
	if c.Shards < 1 {
		return nil, fmt.Errorf("--shards %d: want 1 or more", c.Shards)
	}
	if _, err := New(Config{Leases: c.Leases, Namespace: c.Namespace, Name: c.Name, Identity: c.Identity,
		LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod}); err != nil {
		return nil, err // the same checks as one Lease's
	}
	if errs := validation.IsValidLabelValue(c.Name); len(errs) > 0 {
		return nil, fmt.Errorf("--leader-election-id %q names the shards' Leases and labels them: %s", c.Name, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(ShardLease(c.Name, c.Shards-1)); len(errs) > 0 {
		return nil, fmt.Errorf("--leader-election-id %q: Lease name %s: %s", c.Name, ShardLease(c.Name, c.Shards-1), errs[0])
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.Metrics.setShards(0, false)
	return &Shards{c: c, log: log.With("leases", c.Namespace+"/"+c.Name+"-shard-*", "identity", c.Identity),
		leases: c.Leases.Leases(c.Namespace), member: ReplicaLease(c.Name, c.Identity),
		seen: map[string]*seenLease{}, held: map[int]*hold{}}, nil
}

// Run holds this replica's share of the shards until ctx ends, running
// lead for each shard from the moment it is acquired. lead's context ends
// when the shard is lost (its fence's deadline passed, another replica
// wrote its Lease), handed over, or ctx ends; lead must return promptly
// then. A shard's Lease is released only once lead returned, and Run
// returns once every lead did and the Leases are released.
func (s *Shards) Run(ctx context.Context, lead func(context.Context, ShardTerm)) {
	tick := time.NewTicker(s.c.RetryPeriod)
	defer tick.Stop()
	// The first round only looks and announces: replicas starting
	// together then see each other before any acquires.
	for round := 0; ; round++ {
		s.step(ctx, lead, round > 0)
		select {
		case <-ctx.Done():
			s.shutdown(ctx)
			return
		case <-tick.C:
		}
	}
}

// step is one round: release what ended, look, announce, renew, balance.
func (s *Shards) step(ctx context.Context, lead func(context.Context, ShardTerm), mayAcquire bool) {
	s.reap(ctx)
	listed := s.observe(ctx)
	s.forget(ctx)
	s.announce(ctx)
	s.renew(ctx)
	if listed && mayAcquire && ctx.Err() == nil {
		s.balance(ctx, lead)
	}
	s.mu.Lock()
	n, zero := 0, false
	for i, h := range s.held {
		if !h.ending {
			n++
			zero = zero || i == 0
		}
	}
	s.mu.Unlock()
	s.c.Metrics.setShards(n, zero)
}

// reap releases the Leases of the terms whose work returned.
func (s *Shards) reap(ctx context.Context) {
	s.mu.Lock()
	var ended []int
	for i, h := range s.held {
		select {
		case <-h.done:
			ended = append(ended, i)
		default:
		}
	}
	s.mu.Unlock()
	for _, i := range ended {
		s.finish(ctx, i)
	}
}

// finish closes an ended term's fence and releases its Lease.
func (s *Shards) finish(ctx context.Context, i int) {
	s.mu.Lock()
	h := s.held[i]
	delete(s.held, i)
	s.mu.Unlock()
	h.fence.close()
	if h.lost {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.RenewDeadline)
	defer cancel()
	l := h.lease.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	empty, one := "", int32(1)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &empty, &one, &now
	_, err := s.leases.Update(rctx, l, metav1.UpdateOptions{})
	switch {
	case err == nil:
		s.log.Info("released shard", "shard", i)
	case apierrors.IsConflict(err):
		// Written since: not this replica's to release any more.
	default:
		s.log.Warn("could not release a shard's Lease; the other replicas take it when it expires", "shard", i, "err", err)
	}
}

// observe lists the group's Leases and notes which changed; it reports
// whether the list succeeded.
func (s *Shards) observe(ctx context.Context) bool {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: ShardGroupLabel + "=" + s.c.Name})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("cannot list the shards' Leases", "err", err)
		}
		return false
	}
	legacyFree := s.legacyFree || s.legacyLeaseFree(ctx)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.legacyFree = legacyFree
	seen := make(map[string]*seenLease, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		prev := s.seen[l.Name]
		switch {
		case prev != nil && prev.lease.ResourceVersion == l.ResourceVersion:
			seen[l.Name] = &seenLease{lease: l, changed: prev.changed}
		case prev == nil && s.isReplicaLease(l.Name) && stale(l, now):
			// A replica gone long ago (its renewal is old even allowing
			// for clock skew): not counted as alive for a lease duration.
			// Only balance rests on this, never who may write.
			seen[l.Name] = &seenLease{lease: l}
		default:
			seen[l.Name] = &seenLease{lease: l, changed: now}
		}
	}
	s.seen = seen
	s.listed = true
	for i, h := range s.held {
		l := seen[ShardLease(s.c.Name, i)]
		if l != nil && holder(l.lease) != s.c.Identity && !h.lost {
			s.lose(i, h)
		}
	}
	return true
}

// forget removes the announcements of replicas gone long ago (killed, so
// they could not remove their own), unless renewed since: pods of a
// Deployment are named anew, and theirs would pile up.
func (s *Shards) forget(ctx context.Context) {
	now := time.Now()
	var gone []*coordinationv1.Lease
	s.mu.Lock()
	for name, l := range s.seen {
		if name != s.member && s.isReplicaLease(name) && stale(l.lease, now) {
			gone = append(gone, l.lease)
		}
	}
	s.mu.Unlock()
	for _, l := range gone {
		rv := l.ResourceVersion
		err := s.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err == nil {
			s.log.Info("removed the Lease of a replica gone", "lease", l.Name, "replica", holder(l))
		}
	}
}

// legacyLeaseFree reads the Lease of --shards 1: free when absent,
// released, or not renewed for its duration since this process first
// saw it.
func (s *Shards) legacyLeaseFree(ctx context.Context) bool {
	l, err := s.leases.Get(ctx, s.c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		return false
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.legacy == nil || s.legacy.lease.ResourceVersion != l.ResourceVersion {
		s.legacy = &seenLease{lease: l, changed: now}
	}
	return holder(l) == "" || s.expired(s.legacy, now)
}

func (s *Shards) isReplicaLease(name string) bool {
	return strings.HasPrefix(name, s.c.Name+"-replica-")
}

// lose ends a term whose Lease another replica wrote; s.mu is held.
func (s *Shards) lose(i int, h *hold) {
	h.lost, h.ending = true, true
	h.fence.close()
	h.end(ErrShardLost)
	s.log.Warn("lost a shard: another replica wrote its Lease", "shard", i)
}

// announce renews this replica's own Lease, which the others count.
func (s *Shards) announce(ctx context.Context) {
	s.mu.Lock()
	prev := s.seen[s.member]
	s.mu.Unlock()
	now := metav1.NewMicroTime(time.Now())
	var err error
	if prev == nil {
		l := s.newLease(s.member, now)
		l.Annotations = map[string]string{ShardCountAnnotation: strconv.Itoa(s.c.Shards)}
		_, err = s.leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		l := prev.lease.DeepCopy()
		s.own(l, now)
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[ShardCountAnnotation] = strconv.Itoa(s.c.Shards)
		_, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
		s.log.Warn("cannot renew this replica's Lease", "lease", s.member, "err", err)
	}
}

// newLease is a Lease of the group held by this replica.
func (s *Shards) newLease(name string, now metav1.MicroTime) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.c.Namespace, Labels: map[string]string{ShardGroupLabel: s.c.Name}}}
	s.own(l, now)
	l.Spec.AcquireTime = &now
	zero := int32(0)
	l.Spec.LeaseTransitions = &zero
	return l
}

// own sets l's holder to this replica, renewed now.
func (s *Shards) own(l *coordinationv1.Lease, now metav1.MicroTime) {
	id, secs := s.c.Identity, int32(s.c.LeaseDuration/time.Second)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &now
}

// renew renews every shard held; a renewal opens the shard's fence until
// its sending plus the renew deadline.
func (s *Shards) renew(ctx context.Context) {
	s.mu.Lock()
	held := map[int]*hold{}
	for i, h := range s.held {
		if !h.lost {
			held[i] = h
		}
	}
	s.mu.Unlock()
	for i, h := range held {
		l := h.lease.DeepCopy()
		sent := time.Now()
		s.own(l, metav1.NewMicroTime(sent))
		out, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			s.mu.Lock()
			h.lease = out
			s.mu.Unlock()
			h.fence.renewed(sent)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if apierrors.IsConflict(err) {
			s.recheck(ctx, i, h)
			continue
		}
		// The fence closes on its own if this goes on.
		s.log.Warn("cannot renew a shard's Lease", "shard", i, "err", err)
	}
}

// recheck reads a Lease whose renewal conflicted: another replica holds
// it now, or someone else wrote it (a label) and the next renewal starts
// from this version.
func (s *Shards) recheck(ctx context.Context, i int, h *hold) {
	l, err := s.leases.Get(ctx, ShardLease(s.c.Name, i), metav1.GetOptions{})
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if holder(l) == s.c.Identity {
		h.lease = l
		return
	}
	if !h.lost {
		s.lose(i, h)
	}
}

// balance hands over the shards above this replica's share and acquires
// free ones up to it.
func (s *Shards) balance(ctx context.Context, lead func(context.Context, ShardTerm)) {
	now := time.Now()
	s.mu.Lock()
	why := s.blocked(now)
	if why != s.waiting {
		if why != "" {
			s.log.Warn("acquiring no shard: "+why, "shards", s.c.Shards)
		}
		s.waiting = why
	}
	if why != "" {
		s.mu.Unlock()
		return
	}
	alive := s.alive(now)
	share := (s.c.Shards + alive - 1) / alive
	var active []int
	for i, h := range s.held {
		if !h.ending {
			active = append(active, i)
		}
	}
	// Least wanted first: what this replica hands over, others want more.
	s.byScore(active)
	for len(active) > share {
		i := active[len(active)-1]
		active = active[:len(active)-1]
		h := s.held[i]
		h.ending = true
		h.end(errHandOver)
		s.log.Info("handing a shard over", "shard", i, "share", share)
	}
	free := s.free(now)
	s.mu.Unlock()
	for _, i := range free {
		if len(active) >= share || ctx.Err() != nil {
			return
		}
		if s.acquire(ctx, i, lead) {
			active = append(active, i)
		}
	}
}

// blocked says why no shard may be acquired now, or "": replicas of
// another kind are alive (electing one leader, or of another count),
// which hash targets otherwise. s.mu is held.
func (s *Shards) blocked(now time.Time) string {
	if !s.legacyFree {
		return fmt.Sprintf("the Lease %s/%s of a replica electing one leader (--shards 1) is held; waiting until it is released or expires", s.c.Namespace, s.c.Name)
	}
	for name, l := range s.seen {
		if !s.isReplicaLease(name) || s.expired(l, now) || holder(l.lease) == "" {
			continue
		}
		if n := l.lease.Annotations[ShardCountAnnotation]; n != strconv.Itoa(s.c.Shards) {
			return fmt.Sprintf("replica %s runs with %s shards; waiting until it stops (every replica needs the same --shards)", holder(l.lease), n)
		}
	}
	return ""
}

// alive counts the replicas alive, this one included. s.mu is held.
func (s *Shards) alive(now time.Time) int {
	n := 1
	for name, l := range s.seen {
		if name != s.member && s.isReplicaLease(name) && holder(l.lease) != "" && !s.expired(l, now) {
			n++
		}
	}
	return n
}

// free lists the shards nobody holds, most wanted by this replica first.
// s.mu is held.
func (s *Shards) free(now time.Time) []int {
	var out []int
	for i := range s.c.Shards {
		if s.held[i] != nil {
			continue
		}
		l := s.seen[ShardLease(s.c.Name, i)]
		if l == nil || holder(l.lease) == "" || s.expired(l, now) {
			out = append(out, i)
		}
	}
	s.byScore(out)
	return out
}

// byScore sorts shards by this replica's rendezvous score, highest first.
func (s *Shards) byScore(shards []int) {
	slices.SortFunc(shards, func(a, b int) int {
		sa, sb := score(s.c.Identity, strconv.Itoa(a)), score(s.c.Identity, strconv.Itoa(b))
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
}

// expired: not seen changing for its lease duration.
func (s *Shards) expired(l *seenLease, now time.Time) bool {
	d := s.c.LeaseDuration
	if l.lease.Spec.LeaseDurationSeconds != nil && *l.lease.Spec.LeaseDurationSeconds > 0 {
		d = time.Duration(*l.lease.Spec.LeaseDurationSeconds) * time.Second
	}
	return now.Sub(l.changed) > d
}

// stale: renewed, by the wall clock, long before a lease duration ago.
func stale(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.Sub(l.Spec.RenewTime.Time) > 2*time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second+time.Minute
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// acquire takes shard i's Lease, conditional on the version listed, and
// starts its term.
func (s *Shards) acquire(ctx context.Context, i int, lead func(context.Context, ShardTerm)) bool {
	name := ShardLease(s.c.Name, i)
	s.mu.Lock()
	prev := s.seen[name]
	s.mu.Unlock()
	sent := time.Now()
	now := metav1.NewMicroTime(sent)
	var (
		out *coordinationv1.Lease
		err error
	)
	if prev == nil {
		out, err = s.leases.Create(ctx, s.newLease(name, now), metav1.CreateOptions{})
	} else {
		l := prev.lease.DeepCopy()
		if holder(l) != s.c.Identity {
			n := int32(0)
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions
			}
			n++
			l.Spec.LeaseTransitions = &n
		}
		s.own(l, now)
		l.Spec.AcquireTime = &now
		out, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return false // another replica was faster
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("cannot acquire a shard", "shard", i, "err", err)
		}
		return false
	}
	fence := NewFence(s.c.RenewDeadline)
	fence.renewed(sent)
	tctx, end := context.WithCancelCause(ctx)
	h := &hold{fence: fence, lease: out, end: end, done: make(chan struct{})}
	s.mu.Lock()
	s.held[i] = h
	s.mu.Unlock()
	go func() {
		defer close(h.done)
		defer end(context.Canceled)
		term, stop := fence.Context(tctx)
		defer stop()
		start := time.Now()
		s.log.Info("holding shard: this replica deploys its targets", "shard", i)
		lead(term, ShardTerm{Shard: i, Fence: fence})
		s.log.Info("stopped holding shard", "shard", i, "held", time.Since(start).Round(time.Millisecond), "why", context.Cause(term))
	}()
	return true
}

// shutdown ends every term, waits for their work, releases their Leases
// and removes this replica's own, so that the others rebalance at once.
func (s *Shards) shutdown(ctx context.Context) {
	s.mu.Lock()
	var all []int
	for i, h := range s.held {
		h.ending = true
		h.end(context.Canceled)
		all = append(all, i)
	}
	s.mu.Unlock()
	for _, i := range all {
		s.mu.Lock()
		h := s.held[i]
		s.mu.Unlock()
		<-h.done
		s.finish(ctx, i)
	}
	s.c.Metrics.setShards(0, false)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.RenewDeadline)
	defer cancel()
	if err := s.leases.Delete(dctx, s.member, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		s.log.Warn("cannot remove this replica's Lease; the others stop counting it when it expires", "lease", s.member, "err", err)
	}
}

// Route says where shard i's deliveries go now: here while this replica
// holds it, else the address of the replica holding it, or "" while
// nobody does (nobody, a holder gone quiet, or this replica handing it
// over): wait and ask again.
func (s *Shards) Route(i int) (local bool, holderAddr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[i]; h != nil {
		select {
		case <-h.done:
		default:
			if !h.ending {
				return true, ""
			}
		}
		return false, ""
	}
	l := s.seen[ShardLease(s.c.Name, i)]
	if l == nil || s.expired(l, time.Now()) {
		return false, ""
	}
	if id := holder(l.lease); id != s.c.Identity {
		return false, AddressOf(id)
	}
	return false, ""
}

// Ready reports whether this replica knows the shards' holders (it has
// listed their Leases once): it can take deliveries, handing on what
// others hold and queuing what nobody holds yet.
func (s *Shards) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listed {
		return errors.New("the shards' Leases were not listed yet")
	}
	return nil
}

// Count is the number of shards.
func (s *Shards) Count() int { return s.c.Shards }
