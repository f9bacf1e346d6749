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
//	kplan_webhook_leader (1 while this replica leads)
//	kplan_webhook_forwards_total{outcome} (deliveries a non-leader handled)
type Metrics struct {
	leader   prometheus.Gauge
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
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_webhook_forwards_total",
			Help: "Deliveries a replica that does not lead received, by outcome: forwarded to the leader, or answered here (no_leader, unreachable and busy are 503s GitHub shows as failed, to be redelivered).",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.leader, m.forwards} {
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
