package leader

import "github.com/prometheus/client_golang/prometheus"

// Forward outcomes, the values of kplan_webhook_forwards_total's outcome
// label.
const (
	Forwarded    = "forwarded"    // the leader answered; its answer was passed on
	NoLeader     = "no_leader"    // 503: no other replica is known to lead
	Unreachable  = "unreachable"  // 503: the leader did not answer
	Busy         = "busy"         // 503: too many bodies in flight here
	Unauthorized = "unauthorized" // 401: missing or wrong signature, not forwarded
	TooLarge     = "too_large"    // 413
	Unreadable   = "unreadable"   // 400: the body could not be read
)

var forwardOutcomes = []string{Forwarded, NoLeader, Unreachable, Busy, Unauthorized, TooLarge, Unreadable}

// Metrics are the replica's leadership and forwarding metrics:
//
//	kplan_webhook_leader (1 while this replica leads; with shards, while it holds shard 0)
//	kplan_webhook_shards_held (the shards this replica holds; the leader's one Lease counts as one)
//	kplan_webhook_forwards_total{outcome} (deliveries, or their shards' parts, handed to another replica)
type Metrics struct {
	leader   prometheus.Gauge
	shards   prometheus.Gauge
	forwards *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg; make them once per process and
// pass them to every Elector and Forwarder.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kplan_webhook_leader",
			Help: "1 while this replica holds the leader Lease and deploys, else 0.",
		}),
		shards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kplan_webhook_shards_held",
			Help: "The shards this replica holds and deploys (--shards); with one Lease, 1 on the leader.",
		}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_webhook_forwards_total",
			Help: "Deliveries a replica that does not lead received, by outcome: forwarded to the leader, or answered here (no_leader, unreachable and busy are 503s GitHub shows as failed, to be redelivered). With --shards, the parts of deliveries handed to the replicas holding their shards: forwarded, unreachable (an attempt failed; tried again), no_leader (nobody took the shard in time: it deploys the branch when a replica takes it) and busy (too many parts waiting).",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.leader, m.shards, m.forwards} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range forwardOutcomes {
		m.forwards.WithLabelValues(o)
	}
	return m, nil
}

func (m *Metrics) setLeading(v bool) {
	if m == nil {
		return
	}
	if v {
		m.leader.Set(1)
		m.shards.Set(1)
	} else {
		m.leader.Set(0)
		m.shards.Set(0)
	}
}

// setShards shows how many shards this replica holds, and whether one
// is shard 0 (the one whose holder also runs the live plans and drift
// checks, as the leader does).
func (m *Metrics) setShards(n int, zero bool) {
	if m == nil {
		return
	}
	m.shards.Set(float64(n))
	if zero {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

func (m *Metrics) forwarded(outcome string) {
	if m == nil {
		return
	}
	m.forwards.WithLabelValues(outcome).Inc()
}
