package webhook

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Events are the values of the event label: the events the webhook
// handles, "other" for any other event GitHub sends, and "unverified" for
// requests whose signature did not check out (their headers are anyone's).
var Events = []string{"push", "pull_request", "ping", "other", "unverified"}

// Outcomes are every Outcome a delivery can have.
var Outcomes = []Outcome{Enqueued, Ignored, Duplicate, Pong, Unauthorized, TooLarge, Malformed, Busy, Timeout}

// unverifiedOutcomes are those a request can have before its signature
// is checked.
var unverifiedOutcomes = []Outcome{Unauthorized, TooLarge, Malformed, Busy, Timeout}

// Metrics counts deliveries on a Prometheus registry:
// kplan_webhook_deliveries_total{event,outcome}. Pass its Observe as
// Options.Observe.
type Metrics struct {
	deliveries *prometheus.CounterVec
}

// NewMetrics registers the delivery counter on reg, every known event and
// outcome at 0 so that rates exist before the first delivery.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kplan_webhook_deliveries_total",
		Help: "Webhook deliveries received on POST /webhook, by event (push, pull_request, ping, other; unverified when the signature did not check out) and outcome.",
	}, []string{"event", "outcome"})}
	if err := reg.Register(m.deliveries); err != nil {
		return nil, err
	}
	for _, e := range Events {
		for _, o := range Outcomes {
			if e == "unverified" && !slices.Contains(unverifiedOutcomes, o) {
				continue // an unverified request gets no further
			}
			m.deliveries.WithLabelValues(e, string(o))
		}
	}
	return m, nil
}

// Observe counts one delivery. event is "" when the signature was not
// verified. Label values are bounded: events outside Events become
// "other"; outcomes are this package's constants.
func (m *Metrics) Observe(event string, o Outcome) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(eventLabel(event), string(o)).Inc()
}

func eventLabel(event string) string {
	switch event {
	case "":
		return "unverified"
	case "push", "pull_request", "ping":
		return event
	}
	return "other"
}
