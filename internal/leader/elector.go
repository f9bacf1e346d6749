// Package leader lets several replicas of the webhook run at once: they
// elect one leader on a Kubernetes Lease (client-go's leaderelection), the
// leader alone deploys, and a replica that is not the leader forwards the
// deliveries it receives to the leader (Forwarder); or they share the
// targets, sharded by cluster (ShardOf), each replica holding its share of
// the shards on a Lease each (Shards) and handing each delivery's part to
// the holders of its shards (Dispatcher).
//
// A replica's identity is "<name>@<host:port>": the Lease's holderIdentity
// then tells every replica where the leader (or a shard's holder)
// listens, so no other state is needed to find it.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Config configures an Elector.
type Config struct {
	// Leases reaches the Lease (a coordination/v1 client).
	Leases coordinationv1client.LeasesGetter
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity of this replica, made with Identity; it names the address
	// the other replicas forward deliveries to.
	Identity string
	// LeaseDuration is how long the others wait, after the leader's last
	// renewal, before they take over; RenewDeadline is how long the
	// leader keeps trying to renew before it stops leading; RetryPeriod
	// is how often everyone tries. client-go requires LeaseDuration >
	// RenewDeadline > 1.2 × RetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Logger                                    *slog.Logger
	// Metrics, if set, shows whether this replica leads.
	Metrics *Metrics
}

// Elector campaigns for the Lease and runs a term of work while it holds
// it. Create it with New.
type Elector struct {
	c     Config
	log   *slog.Logger
	fence *Fence

	mu      sync.Mutex
	le      *leaderelection.LeaderElector // the current campaign's
	leading bool                          // a term runs and has not been told to stop
}

// New checks c and returns an Elector.
func New(c Config) (*Elector, error) {
	switch {
	case c.Leases == nil:
		return nil, errors.New("leader election: no Lease client")
	case c.Namespace == "" || c.Name == "":
		return nil, errors.New("leader election: the Lease needs a namespace and a name (--leader-election-namespace, --leader-election-id)")
	case AddressOf(c.Identity) == "":
		return nil, fmt.Errorf("leader election: identity %q does not name this replica's address (want name@host:port)", c.Identity)
	}
	// The same checks NewLeaderElector makes, at start rather than at the
	// first campaign, with the flags' names.
	if c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)) || c.RetryPeriod <= 0 {
		return nil, fmt.Errorf("leader election: need --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > %.1f × --leader-elect-retry-period (%s) > 0",
			c.LeaseDuration, c.RenewDeadline, leaderelection.JitterFactor, c.RetryPeriod)
	}
	if c.LeaseDuration%time.Second != 0 {
		// The Lease stores whole seconds: 2.5s would become 2s.
		return nil, fmt.Errorf("leader election: --leader-elect-lease-duration %s is not a whole number of seconds", c.LeaseDuration)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.Metrics.setLeading(false)
	return &Elector{c: c, log: log.With("lease", c.Namespace+"/"+c.Name, "identity", c.Identity), fence: NewFence(c.RenewDeadline)}, nil
}

// Identity makes a replica's identity from its name (the pod's) and the
// address other replicas reach it at.
func Identity(name, addr string) string { return name + "@" + addr }

// AddressOf returns the address in an identity made by Identity, or "" for
// any other holder (another program's, or none).
func AddressOf(identity string) string {
	i := strings.LastIndex(identity, "@")
	if i < 0 {
		return ""
	}
	addr := identity[i+1:]
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return ""
	}
	return addr
}

// Fence is what the clients that write to the clusters check before each
// write (Fence.Transport): open only while this replica holds the Lease
// by its own clock.
func (e *Elector) Fence() *Fence { return e.fence }

// Run campaigns until ctx ends. Each time this replica acquires the Lease
// it calls lead with a context that is cancelled as soon as leadership is
// lost: the moment the fence's deadline passes (the last renewal is older
// than RenewDeadline by this process's clock), when client-go gives up
// renewing, or when ctx ends; lead must return promptly then. A lost term
// is not fatal: Run waits for lead to return, hands the Lease back, and
// campaigns again, so no two terms of this replica overlap and a flaky
// API server does not turn into a crash loop.
func (e *Elector) Run(ctx context.Context, lead func(context.Context)) {
	// client-go logs through klog: send its lines to our logger.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(e.log.Handler()))
	for ctx.Err() == nil {
		e.campaign(ctx, lead)
	}
}

// campaign runs one client-go LeaderElector: acquire, lead, lose or end.
func (e *Elector) campaign(ctx context.Context, lead func(context.Context)) {
	// A term the fence ends ends the campaign too: else client-go, whose
	// renewals may succeed again after a short pause, would hold the Lease
	// for a replica whose work stopped.
	ctx, endCampaign := context.WithCancel(ctx)
	defer endCampaign()
	lock := fencedLock{Interface: e.lock(), f: e.fence}
	var (
		mu       sync.Mutex
		over     bool          // Run returned: a term not started yet must not start
		termDone chan struct{} // closed when lead returns
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: e.c.Name,
		LeaseDuration: e.c.LeaseDuration, RenewDeadline: e.c.RenewDeadline, RetryPeriod: e.c.RetryPeriod,
		// Not ReleaseOnCancel: client-go would release while lead may
		// still be deploying. release below runs after lead returned.
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				mu.Lock()
				if over || term.Err() != nil {
					mu.Unlock()
					return
				}
				termDone = make(chan struct{})
				mu.Unlock()
				defer close(termDone)
				term, stop := e.fence.Context(term)
				defer stop()
				context.AfterFunc(term, endCampaign)
				e.term(term, lead)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				e.log.Info("leader elected", "leader", id)
			},
		},
	})
	if err != nil {
		// New checked the timings; nothing else can fail here.
		e.log.Error("leader election", "err", err)
		<-ctx.Done()
		return
	}
	e.mu.Lock()
	e.le = le
	e.mu.Unlock()
	le.Run(ctx)
	mu.Lock()
	over = true
	done := termDone
	mu.Unlock()
	if done == nil {
		e.fence.close()
		return
	}
	<-done
	e.fence.close()
	// The term's work has stopped: hand the Lease over now rather than
	// make the others wait for it to expire.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.RenewDeadline)
	defer cancel()
	if err := e.release(rctx); err != nil {
		e.log.Warn("could not release the Lease; the other replicas take over when it expires", "err", err)
	}
}

// term runs lead while this replica leads.
func (e *Elector) term(ctx context.Context, lead func(context.Context)) {
	start := time.Now()
	e.setLeading(true)
	e.log.Info("leading: this replica deploys")
	// Stop routing deliveries here the moment leadership is lost, not
	// when lead has wound down.
	stop := context.AfterFunc(ctx, func() { e.setLeading(false) })
	defer stop()
	lead(ctx)
	e.setLeading(false)
	e.log.Info("stopped leading", "led", time.Since(start).Round(time.Millisecond), "why", context.Cause(ctx))
}

func (e *Elector) setLeading(v bool) {
	e.mu.Lock()
	e.leading = v
	e.mu.Unlock()
	e.c.Metrics.setLeading(v)
}

func (e *Elector) lock() *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.c.Namespace, Name: e.c.Name},
		Client:     e.c.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.c.Identity},
	}
}

// release empties the Lease if this replica still holds it, as client-go
// does on ReleaseOnCancel: the others acquire it at their next retry.
func (e *Elector) release(ctx context.Context) error {
	lock := e.lock()
	rec, _, err := lock.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != e.c.Identity {
		return nil
	}
	now := metav1.NewTime(time.Now())
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
	if apierrors.IsConflict(err) {
		return nil // someone else wrote it since: it is not ours to release
	}
	if err == nil {
		e.log.Info("released the Lease")
	}
	return err
}

// Route says where a delivery received now should go: local when this
// replica leads, else the leader's address ("" when no other replica is
// known to lead: the caller answers 503).
func (e *Elector) Route() (local bool, leader string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leading {
		return true, ""
	}
	if e.le == nil {
		return false, ""
	}
	holder := e.le.GetLeader()
	if holder == e.c.Identity {
		return false, "" // this replica's term is ending or not started yet
	}
	return false, AddressOf(holder)
}

// ServiceAccountNamespace is where Kubernetes mounts the pod's namespace.
const ServiceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace picks the Lease's namespace: the flag, else $POD_NAMESPACE,
// else the namespace file of the pod's service account.
func Namespace(flag string, getenv func(string) string, saFile string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	data, err := os.ReadFile(saFile)
	if ns := strings.TrimSpace(string(data)); err == nil && ns != "" {
		return ns, nil
	}
	return "", errors.New("--leader-elect: no namespace for the Lease: set --leader-election-namespace or POD_NAMESPACE (the downward API's metadata.namespace)")
}

// AdvertiseAddress picks the address the other replicas forward deliveries
// to: the flag, else $POD_IP, else the listener's host when it is a
// specific one, with the listener's port.
func AdvertiseAddress(flag string, getenv func(string) string, listener net.Addr) (string, error) {
	if flag != "" {
		if _, port, err := net.SplitHostPort(flag); err != nil || port == "" {
			return "", fmt.Errorf("--advertise-address %q: want host:port", flag)
		}
		return flag, nil
	}
	host, port, err := net.SplitHostPort(listener.String())
	if err != nil {
		return "", fmt.Errorf("listener address %s: %w", listener, err)
	}
	if ip := getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port), nil
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("--leader-elect: the other replicas cannot reach this one at %s: set --advertise-address or POD_IP (the downward API's status.podIP)", listener)
}
