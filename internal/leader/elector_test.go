package leader

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// Short timings, so that a takeover after a lost lease takes seconds.
const (
	testLease = 2 * time.Second
	testRenew = 1 * time.Second
	testRetry = 200 * time.Millisecond
)

// terms records the terms of several electors and how many ran at once.
type terms struct {
	active  atomic.Int32
	overlap atomic.Bool
	mu      sync.Mutex
	started []string // identity of each term, in order
	changed chan struct{}
}

func newTerms() *terms { return &terms{changed: make(chan struct{}, 100)} }

// lead returns a term's work for identity: it counts itself active until
// its context ends, then takes a little longer to wind down, as a deploy
// being cancelled does.
func (ts *terms) lead(identity string) func(context.Context) {
	return func(ctx context.Context) {
		if ts.active.Add(1) > 1 {
			ts.overlap.Store(true)
		}
		ts.mu.Lock()
		ts.started = append(ts.started, identity)
		ts.mu.Unlock()
		ts.changed <- struct{}{}
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // winding down still counts as leading
		ts.active.Add(-1)
		ts.changed <- struct{}{}
	}
}

func (ts *terms) list() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.started...)
}

// waitTerms waits until n terms have started.
func (ts *terms) waitTerms(t *testing.T, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for len(ts.list()) < n {
		select {
		case <-ts.changed:
		case <-deadline:
			t.Fatalf("%d terms started within %s, want %d: %q", len(ts.list()), within, n, ts.list())
		}
	}
	return ts.list()
}

func leases(t *testing.T, c *testcluster.Cluster) coordinationv1client.LeasesGetter {
	client, err := coordinationv1client.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

type replica struct {
	id     string
	el     *Elector
	m      *Metrics
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, l coordinationv1client.LeasesGetter, name string, ts *terms) *replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: Identity(name, "127.0.0.1:"+fmt.Sprint(10000+len(name))), m: m, done: make(chan struct{})}
	if r.el, err = New(Config{Leases: l, Namespace: "default", Name: "kplan-webhook", Identity: r.id,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Metrics: m}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.el.Run(ctx, ts.lead(r.id))
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *replica) gauge() float64 { return testutil.ToFloat64(r.m.leader) }

// Two replicas: one leads, the other routes to its address; when the
// leader shuts down it hands the Lease over at once, rather than after
// the lease duration; never do two terms run at once.
func TestElectorHandsOverOnShutdown(t *testing.T) {
	c := testcluster.Start(t)
	l := leases(t, c)
	ts := newTerms()
	a := startReplica(t, l, "a", ts)
	b := startReplica(t, l, "b", ts)
	first := ts.waitTerms(t, 1, 30*time.Second)[0]
	lead, other := a, b
	if first == b.id {
		lead, other = b, a
	}
	if local, _ := lead.el.Route(); !local {
		t.Error("the leader does not route deliveries to itself")
	}
	testkit.Eventually(t, "the other replica to learn the leader's address", 30*time.Second, func() bool {
		local, addr := other.el.Route()
		return !local && addr == AddressOf(lead.id)
	})
	if lead.gauge() != 1 || other.gauge() != 0 {
		t.Errorf("kplan_webhook_leader: leader %v, other %v", lead.gauge(), other.gauge())
	}

	stopped := time.Now()
	lead.cancel()
	<-lead.done
	second := ts.waitTerms(t, 2, 10*time.Second)[1]
	took := time.Since(stopped)
	t.Logf("takeover after a graceful stop: %s", took.Round(time.Millisecond))
	if second != other.id {
		t.Errorf("term 2 went to %s", second)
	}
	if took >= testLease {
		t.Errorf("takeover took %s: the Lease was not released", took)
	}
	if lead.gauge() != 0 || other.gauge() != 1 {
		t.Errorf("kplan_webhook_leader after the handover: old %v, new %v", lead.gauge(), other.gauge())
	}
	if ts.overlap.Load() {
		t.Error("two terms ran at once")
	}
}

// A leader that cannot renew (here: someone else took the Lease) stops
// its term within the renew deadline, and campaigns again instead of
// exiting: when the Lease expires it leads a fresh term.
func TestElectorLosesLeadershipAndComesBack(t *testing.T) {
	c := testcluster.Start(t)
	l := leases(t, c)
	ts := newTerms()
	a := startReplica(t, l, "a", ts)
	ts.waitTerms(t, 1, 30*time.Second)

	ctx := context.Background()
	thief := Identity("thief", "127.0.0.1:1")
	// The leader renews meanwhile: retry on its writes.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := l.Leases("default").Get(ctx, "kplan-webhook", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = &thief, &now, &now
		_, err = l.Leases("default").Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	testkit.Eventually(t, "the term to end", 30*time.Second, func() bool { return ts.active.Load() == 0 })
	lost := time.Since(stolen)
	t.Logf("term ended %s after the Lease was taken", lost.Round(time.Millisecond))
	if lost > testRenew+2*testRetry+time.Second {
		t.Errorf("the term ran on for %s after the Lease was lost", lost)
	}
	// The next campaign reads the Lease at once and routes to the thief.
	testkit.Eventually(t, "deliveries to be routed to the new holder", 30*time.Second, func() bool {
		local, addr := a.el.Route()
		return !local && addr == "127.0.0.1:1"
	})
	if a.gauge() != 0 {
		t.Error("kplan_webhook_leader is still 1")
	}
	// The thief never renews: the replica leads again once it expires.
	ts.waitTerms(t, 2, 5*testLease)
	if a.gauge() != 1 {
		t.Error("kplan_webhook_leader is not 1 in the second term")
	}
	select {
	case <-a.done:
		t.Error("the elector stopped after losing the Lease")
	default:
	}
	if ts.overlap.Load() {
		t.Error("two terms ran at once")
	}
}

func TestNewChecksTimings(t *testing.T) {
	fake := coordinationv1client.New(nil)
	tests := []struct {
		name                string
		id                  string
		lease, renew, retry time.Duration
		err                 string
	}{
		{"defaults", Identity("pod", "10.0.0.1:8080"), 15 * time.Second, 10 * time.Second, 2 * time.Second, ""},
		{"renew not below lease", Identity("pod", "10.0.0.1:8080"), 10 * time.Second, 10 * time.Second, 2 * time.Second, "--leader-elect-lease-duration (10s) > --leader-elect-renew-deadline (10s)"},
		{"retry too close to renew", Identity("pod", "10.0.0.1:8080"), 15 * time.Second, 2 * time.Second, 2 * time.Second, "1.2 × --leader-elect-retry-period"},
		{"fractional lease", Identity("pod", "10.0.0.1:8080"), 2500 * time.Millisecond, time.Second, 100 * time.Millisecond, "not a whole number of seconds"},
		{"identity without an address", "pod", 15 * time.Second, 10 * time.Second, 2 * time.Second, "does not name this replica's address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Leases: fake, Namespace: "ns", Name: "kplan-webhook", Identity: tc.id,
				LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("New: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestAddressOf(t *testing.T) {
	for id, want := range map[string]string{
		Identity("kplan-webhook-5d9c7-x2x", "10.1.2.3:8080"): "10.1.2.3:8080",
		Identity("host", "[fd00::1]:8080"):                   "[fd00::1]:8080",
		"kube-controller-manager_2c3f8f0e":                   "",
		"name@no-port":                                       "",
		"":                                                   "",
	} {
		if got := AddressOf(id); got != want {
			t.Errorf("AddressOf(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestNamespace(t *testing.T) {
	dir := t.TempDir()
	sa := dir + "/namespace"
	writeFile(t, sa, "kplan-system\n")
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name, flag string
		env        map[string]string
		file, want string
	}{
		{"flag first", "flagged", map[string]string{"POD_NAMESPACE": "env"}, sa, "flagged"},
		{"then POD_NAMESPACE", "", map[string]string{"POD_NAMESPACE": "env"}, sa, "env"},
		{"then the service account", "", nil, sa, "kplan-system"},
		{"else an error", "", nil, dir + "/missing", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Namespace(tc.flag, env(tc.env), tc.file)
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Errorf("Namespace = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAdvertiseAddress(t *testing.T) {
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	tests := []struct {
		name, flag, podIP string
		listener          net.Addr
		want              string
	}{
		{"flag", "kplan-0.kplan:8080", "10.0.0.7", tcp("0.0.0.0:8080"), "kplan-0.kplan:8080"},
		{"flag without port", "10.0.0.7", "", tcp("0.0.0.0:8080"), ""},
		{"POD_IP and the listener's port", "", "10.0.0.7", tcp("[::]:9090"), "10.0.0.7:9090"},
		{"POD_IP v6", "", "fd00::7", tcp("0.0.0.0:8080"), "[fd00::7]:8080"},
		{"a specific listener", "", "", tcp("127.0.0.1:34567"), "127.0.0.1:34567"},
		{"a wildcard listener and no POD_IP", "", "", tcp("0.0.0.0:8080"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AdvertiseAddress(tc.flag, func(k string) string {
				if k == "POD_IP" {
					return tc.podIP
				}
				return ""
			}, tc.listener)
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Errorf("AdvertiseAddress = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
