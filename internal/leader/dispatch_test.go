package leader

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// table is the shards' holders as every replica of a test sees them.
type table struct {
	mu      sync.Mutex
	holders map[int]string // shard -> replica address
}

func (tb *table) set(shard int, addr string) {
	tb.mu.Lock()
	tb.holders[shard] = addr
	tb.mu.Unlock()
}

// router is one replica's view of the table.
type router struct {
	tb   *table
	self string
}

func (r router) Route(shard int) (bool, string) {
	r.tb.mu.Lock()
	defer r.tb.mu.Unlock()
	h := r.tb.holders[shard]
	return h != "" && h == r.self, map[bool]string{true: "", false: h}[h == r.self]
}

// node is a replica: its dispatcher, served over HTTP, and what it took.
type node struct {
	d     *Dispatcher
	srv   *httptest.Server
	addr  string
	m     *Metrics
	mu    sync.Mutex
	taken map[int][]string // shard -> deliveries taken
}

func (n *node) took(shard int) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.taken[shard])
}

func startNode(t *testing.T, tb *table) *node {
	t.Helper()
	n := &node{taken: map[int][]string{}}
	mux := http.NewServeMux()
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	n.addr = strings.TrimPrefix(n.srv.URL, "http://")
	var err error
	if n.m, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	rt := router{tb: tb, self: n.addr}
	n.d, err = NewDispatcher(DispatcherOptions{Router: rt, Secret: []byte(testSecret), Identity: Identity("n", n.addr), Wait: 10 * time.Second, Retry: 20 * time.Millisecond, Metrics: n.m,
		Take: func(shard int, d ShardDelivery) bool {
			// The table may have moved the shard since Route: a term
			// that ended refuses, as the webhook's does.
			if local, _ := rt.Route(shard); !local {
				return false
			}
			n.mu.Lock()
			n.taken[shard] = append(n.taken[shard], d.Delivery)
			n.mu.Unlock()
			return true
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.d.Close)
	mux.Handle("POST "+ShardDeliveryPath, n.d)
	return n
}

// A delivery's parts reach the holders of its shards, each once: the
// shards held here at once, the others over HTTP, and one whose shard
// has no holder yet when a replica takes it.
func TestDispatchRoutesEachShardOnce(t *testing.T) {
	tb := &table{holders: map[int]string{}}
	a, b, c := startNode(t, tb), startNode(t, tb), startNode(t, tb)
	tb.set(0, a.addr)
	tb.set(1, b.addr)
	tb.set(2, b.addr)
	tb.set(3, c.addr)
	// Shard 4 has no holder yet.

	a.d.Dispatch(ShardDelivery{Delivery: "d1", Repo: "o/r", Branch: "main", SHA: strings.Repeat("a", 40), Shards: []int{0, 1, 2, 3, 4}})
	if got := a.took(0); !slices.Equal(got, []string{"d1"}) {
		t.Errorf("shard 0, held by the receiver, took %q at once", got)
	}
	testkit.Eventually(t, "shards 1-3 to reach their holders", 10*time.Second, func() bool {
		return len(b.took(1)) == 1 && len(b.took(2)) == 1 && len(c.took(3)) == 1
	})
	tb.set(4, c.addr)
	testkit.Eventually(t, "shard 4 to reach the replica that took it", 10*time.Second, func() bool { return len(c.took(4)) == 1 })
	a.d.Close() // nothing is left to hand on: the counts below are final
	for _, n := range []*node{a, b, c} {
		for s := range 5 {
			if got := n.took(s); len(got) > 1 {
				t.Errorf("shard %d taken %d times by one replica: %q", s, len(got), got)
			}
		}
	}
	if len(b.took(0))+len(c.took(0))+len(a.took(1))+len(a.took(4))+len(b.took(4)) != 0 {
		t.Error("a shard was taken by a replica that does not hold it")
	}
	if v := testutil.ToFloat64(a.m.forwards.WithLabelValues(Forwarded)); v != 3 {
		t.Errorf("forwarded = %v, want 3 (b once for shards 1 and 2, c twice)", v)
	}
}

// A holder that no longer holds a shard it is handed answers 503 for it,
// and the sender routes it again, to the new holder; a holder never
// hands a part on itself.
func TestDispatchRoutesAgainWhenTheShardMoved(t *testing.T) {
	tb := &table{holders: map[int]string{}}
	a, b, c := startNode(t, tb), startNode(t, tb), startNode(t, tb)
	// a's view is stale: it routes shard 1 to b, which handed it to c.
	stale := router{tb: &table{holders: map[int]string{1: b.addr}}, self: a.addr}
	a.d.o.Router = stale
	tb.set(1, c.addr)
	a.d.Dispatch(ShardDelivery{Delivery: "d1", Shards: []int{1}})
	testkit.Eventually(t, "b to refuse shard 1", 10*time.Second, func() bool {
		return testutil.ToFloat64(a.m.forwards.WithLabelValues(Unreachable)) >= 1
	})
	if len(c.took(1)) != 0 {
		t.Error("b handed the part on itself")
	}
	stale.tb.set(1, c.addr) // a learns the new holder
	testkit.Eventually(t, "shard 1 to reach c", 10*time.Second, func() bool { return len(c.took(1)) == 1 })
	if len(b.took(1)) != 0 {
		t.Error("b took a shard it does not hold")
	}
}

// A part nobody takes within Wait is dropped, counted, not retried for
// ever; a part with a wrong signature is refused.
func TestDispatchGivesUpAndRefusesForgeries(t *testing.T) {
	tb := &table{holders: map[int]string{}}
	a, b := startNode(t, tb), startNode(t, tb)
	a.d.o.Wait = 100 * time.Millisecond
	a.d.Dispatch(ShardDelivery{Delivery: "d1", Shards: []int{7}})
	testkit.Eventually(t, "the part to be given up", 10*time.Second, func() bool {
		return testutil.ToFloat64(a.m.forwards.WithLabelValues(NoLeader)) == 1
	})

	tb.set(0, b.addr)
	body, _ := json.Marshal(ShardDelivery{Delivery: "forged", Shards: []int{0}})
	for _, sig := range []string{"", "sha256=" + strings.Repeat("0", 64), signShard([]byte("another secret"), body)} {
		req, _ := http.NewRequest(http.MethodPost, b.srv.URL+ShardDeliveryPath, bytes.NewReader(body))
		req.Header.Set(ShardSignatureHeader, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("signature %q: HTTP %d, want 401", sig, resp.StatusCode)
		}
	}
	if len(b.took(0)) != 0 {
		t.Error("a forged part was taken")
	}
}
