package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/internal/testkit"
)

const testShards = 6

// shardTerms records the terms of several replicas' Shards: which
// replica runs each shard's work now, and whether two ever ran one shard
// at once.
type shardTerms struct {
	mu      sync.Mutex
	running map[int][]string // shard -> identities whose work runs
	overlap []string
}

func newShardTerms() *shardTerms { return &shardTerms{running: map[int][]string{}} }

// lead is a term's work for identity: it runs until its context ends,
// then takes a little longer to wind down, as a deploy being cancelled
// does; all that time it counts as running the shard.
func (ts *shardTerms) lead(identity string) func(context.Context, ShardTerm) {
	return func(ctx context.Context, st ShardTerm) {
		ts.mu.Lock()
		if len(ts.running[st.Shard]) > 0 {
			ts.overlap = append(ts.overlap, fmt.Sprintf("shard %d: %s started while %v ran", st.Shard, identity, ts.running[st.Shard]))
		}
		ts.running[st.Shard] = append(ts.running[st.Shard], identity)
		ts.mu.Unlock()
		if st.Fence.Check() != nil {
			ts.mu.Lock()
			ts.overlap = append(ts.overlap, fmt.Sprintf("shard %d: %s started with its fence closed", st.Shard, identity))
			ts.mu.Unlock()
		}
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		ts.mu.Lock()
		ts.running[st.Shard] = slices.DeleteFunc(ts.running[st.Shard], func(id string) bool { return id == identity })
		ts.mu.Unlock()
	}
}

// holders maps each replica to the shards whose work it runs.
func (ts *shardTerms) holders() map[string][]int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := map[string][]int{}
	for s, ids := range ts.running {
		for _, id := range ids {
			out[id] = append(out[id], s)
		}
	}
	for _, ss := range out {
		slices.Sort(ss)
	}
	return out
}

func (ts *shardTerms) overlaps() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.overlap)
}

// shardReplica is one replica's Shards, with a Lease client that can be
// cut off from the API server as a partition (or a kill) would.
type shardReplica struct {
	id     string
	s      *Shards
	m      *Metrics
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
}

func startShards(t *testing.T, c *testcluster.Cluster, name string, ts *shardTerms) *shardReplica {
	t.Helper()
	r := &shardReplica{id: Identity(name, "127.0.0.1:"+strconv.Itoa(20000+int(name[0]))), done: make(chan struct{})}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if r.cut.Load() {
				return nil, errors.New("cut off from the API server")
			}
			return rt.RoundTrip(req)
		})
	}
	client, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.m, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if r.s, err = NewShards(ShardsConfig{Leases: client, Namespace: "default", Name: "kplan-webhook", Shards: testShards, Identity: r.id,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Metrics: r.m}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.s.Run(ctx, ts.lead(r.id))
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// leaseHolders reads every shard's Lease holder.
func leaseHolders(t *testing.T, l coordinationv1client.LeasesGetter) []string {
	t.Helper()
	out := make([]string, testShards)
	for i := range out {
		lease, err := l.Leases("default").Get(context.Background(), ShardLease("kplan-webhook", i), metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil {
			out[i] = *lease.Spec.HolderIdentity
		}
	}
	return out
}

// balanced: every shard's work runs on one of replicas, each running
// share of them.
func balanced(h map[string][]int, share int, replicas ...*shardReplica) bool {
	n := 0
	for _, r := range replicas {
		if len(h[r.id]) != share {
			return false
		}
		n += len(h[r.id])
	}
	return n == testShards
}

// One replica alone takes every shard; two more come up and it hands
// over until each holds two; the shards' Leases name their holders and
// every replica routes each shard to its holder; a replica shut down
// hands its shards over at once; never do two replicas run one shard.
// The announcement a replica killed long ago left is removed.
func TestShardsSpreadOverReplicas(t *testing.T) {
	c := testcluster.Start(t)
	l := leases(t, c)
	ghost, long, secs := "ghost@127.0.0.1:9", metav1.NewMicroTime(time.Now().Add(-time.Hour)), int32(2)
	if _, err := l.Leases("default").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ReplicaLease("kplan-webhook", ghost), Labels: map[string]string{ShardGroupLabel: "kplan-webhook"}, Annotations: map[string]string{ShardCountAnnotation: "6"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &ghost, RenewTime: &long, LeaseDurationSeconds: &secs}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts := newShardTerms()
	a := startShards(t, c, "a", ts)
	testkit.Eventually(t, "the only replica to hold every shard", 30*time.Second, func() bool { return balanced(ts.holders(), testShards, a) })
	testkit.Eventually(t, "the ghost's announcement to be removed", 30*time.Second, func() bool {
		_, err := l.Leases("default").Get(context.Background(), ReplicaLease("kplan-webhook", ghost), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if v := testutil.ToFloat64(a.m.shards); v != testShards {
		t.Errorf("kplan_webhook_shards_held = %v, want %d", v, testShards)
	}

	b := startShards(t, c, "b", ts)
	cc := startShards(t, c, "c", ts)
	testkit.Eventually(t, "two shards each", 30*time.Second, func() bool { return balanced(ts.holders(), 2, a, b, cc) })
	h := ts.holders()
	t.Logf("shards: a %v, b %v, c %v", h[a.id], h[b.id], h[cc.id])
	testkit.Eventually(t, "the Leases to name the holders, and every replica to route to them", 30*time.Second, func() bool {
		h := ts.holders()
		holders := leaseHolders(t, l)
		for _, r := range []*shardReplica{a, b, cc} {
			for _, s := range h[r.id] {
				if holders[s] != r.id {
					return false
				}
				for _, other := range []*shardReplica{a, b, cc} {
					local, addr := other.s.Route(s)
					if other == r && !local || other != r && (local || addr != AddressOf(r.id)) {
						return false
					}
				}
			}
		}
		return true
	})
	for _, r := range []*shardReplica{a, b, cc} {
		if v := testutil.ToFloat64(r.m.shards); v != 2 {
			t.Errorf("%s: kplan_webhook_shards_held = %v, want 2", r.id, v)
		}
		if v, zero := testutil.ToFloat64(r.m.leader), slices.Contains(h[r.id], 0); v != map[bool]float64{true: 1}[zero] {
			t.Errorf("%s holds %v: kplan_webhook_leader = %v", r.id, h[r.id], v)
		}
	}

	// A graceful stop releases the Leases: the others split its shards
	// (three each) well within a lease duration.
	stopped := time.Now()
	b.cancel()
	<-b.done
	testkit.Eventually(t, "a and c to take b's shards", 30*time.Second, func() bool { return balanced(ts.holders(), 3, a, cc) })
	took := time.Since(stopped)
	t.Logf("b's shards moved %s after it stopped", took.Round(time.Millisecond))
	if took >= testLease {
		t.Errorf("the shards took %s to move: b did not release them", took)
	}
	for _, o := range ts.overlaps() {
		t.Error(o)
	}
}

// A replica cut off from the API server (a partition; for the others,
// as good as killed) stops its shards' work within the renew deadline,
// by its fences, and the others take the shards once the Leases expire:
// never two at once on one shard.
func TestShardsMoveOffACutOffReplica(t *testing.T) {
	c := testcluster.Start(t)
	ts := newShardTerms()
	a := startShards(t, c, "a", ts)
	b := startShards(t, c, "b", ts)
	cc := startShards(t, c, "c", ts)
	testkit.Eventually(t, "two shards each", 30*time.Second, func() bool { return balanced(ts.holders(), 2, a, b, cc) })
	lost := ts.holders()[b.id]

	cut := time.Now()
	b.cut.Store(true)
	testkit.Eventually(t, "b's work to stop", 30*time.Second, func() bool { return len(ts.holders()[b.id]) == 0 })
	stopped := time.Since(cut)
	testkit.Eventually(t, "a and c to take b's shards", 30*time.Second, func() bool { return balanced(ts.holders(), 3, a, cc) })
	moved := time.Since(cut)
	t.Logf("b's shards %v: its work stopped %s after the cut, and moved after %s (renew deadline %s, lease %s)",
		lost, stopped.Round(time.Millisecond), moved.Round(time.Millisecond), testRenew, testLease)
	if stopped > testRenew+testRetry+time.Second {
		t.Errorf("b wrote on for %s after it was cut off", stopped)
	}
	// b's last renewal may have been seen up to a retry period before
	// the cut.
	if moved < testLease-2*testRetry {
		t.Errorf("b's shards moved after %s, before their Leases could expire", moved)
	}
	if moved > testLease+4*testRetry+5*time.Second {
		t.Errorf("b's shards took %s to move", moved)
	}
	for _, o := range ts.overlaps() {
		t.Error(o)
	}
}

// No shard is taken while a replica of another kind is alive: one
// electing a single leader on the group's Lease, or one with another
// number of shards; replicas long gone do not count.
func TestShardsBlockedByOtherReplicas(t *testing.T) {
	now := time.Now()
	lease := func(name, holder string, annotations map[string]string, changed time.Time) *seenLease {
		secs := int32(testLease / time.Second)
		return &seenLease{changed: changed, lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs}}}
	}
	self := Identity("self", "127.0.0.1:1")
	other := ReplicaLease("kplan-webhook", "other@127.0.0.1:2")
	tests := []struct {
		name       string
		legacyFree bool
		seen       []*seenLease
		alive      int
		want       string
	}{
		{"alone", true, nil, 1, ""},
		{"the single Lease held", false, nil, 1, "(--shards 1) is held"},
		{"a replica of the same count", true, []*seenLease{lease(other, "other@127.0.0.1:2", map[string]string{ShardCountAnnotation: "6"}, now)}, 2, ""},
		{"a replica of another count", true, []*seenLease{lease(other, "other@127.0.0.1:2", map[string]string{ShardCountAnnotation: "4"}, now)}, 2, "runs with 4 shards"},
		{"a replica of another count, expired", true, []*seenLease{lease(other, "other@127.0.0.1:2", map[string]string{ShardCountAnnotation: "4"}, now.Add(-2*testLease))}, 1, ""},
		{"a replica of another count, shut down", true, []*seenLease{lease(other, "", map[string]string{ShardCountAnnotation: "4"}, now)}, 1, ""},
		{"a shard's Lease is no replica", true, []*seenLease{lease(ShardLease("kplan-webhook", 0), "other@127.0.0.1:2", nil, now)}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewShards(ShardsConfig{Leases: coordinationv1client.New(nil), Namespace: "default", Name: "kplan-webhook", Shards: testShards, Identity: self,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry})
			if err != nil {
				t.Fatal(err)
			}
			s.legacyFree = tc.legacyFree
			for _, l := range tc.seen {
				s.seen[l.lease.Name] = l
			}
			if got := s.blocked(now); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("blocked = %q, want %q", got, tc.want)
			}
			if got := s.alive(now); got != tc.alive {
				t.Errorf("alive = %d, want %d", got, tc.alive)
			}
		})
	}
}

func TestNewShardsChecks(t *testing.T) {
	fake := coordinationv1client.New(nil)
	id := Identity("pod", "10.0.0.1:8080")
	tests := []struct {
		name, lease string
		shards      int
		renew       time.Duration
		err         string
	}{
		{"fine", "kplan-webhook", 6, 10 * time.Second, ""},
		{"no shards", "kplan-webhook", 0, 10 * time.Second, "--shards 0"},
		{"timings", "kplan-webhook", 6, 15 * time.Second, "--leader-elect-lease-duration (15s) > --leader-elect-renew-deadline (15s)"},
		{"not a label value", "kplan_webhook.", 6, 10 * time.Second, "labels them"},
		{"not a Lease name", "Kplan", 6, 10 * time.Second, "Lease name Kplan-shard-5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewShards(ShardsConfig{Leases: fake, Namespace: "ns", Name: tc.lease, Shards: tc.shards, Identity: id,
				LeaseDuration: 15 * time.Second, RenewDeadline: tc.renew, RetryPeriod: 2 * time.Second})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("NewShards: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}
