package webhook

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Deliveries are counted by a bounded event label: a header that did not
// come with a valid signature never becomes a label value.
func TestMetricsLabelsBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe("push", Enqueued)
	m.Observe("push", Enqueued)
	m.Observe("", Unauthorized)
	m.Observe("issues", Ignored)
	m.Observe("x-evil-"+strings.Repeat("a", 100), Ignored)
	for _, c := range []struct {
		event, outcome string
		n              float64
	}{{"push", "enqueued", 2}, {"unverified", "unauthorized", 1}, {"other", "ignored", 2}, {"pull_request", "enqueued", 0}} {
		if got := testutil.ToFloat64(m.deliveries.WithLabelValues(c.event, c.outcome)); got != c.n {
			t.Errorf("%s/%s = %v, want %v", c.event, c.outcome, got, c.n)
		}
	}
	if n := testutil.CollectAndCount(m.deliveries); n != 4*len(Outcomes)+len(unverifiedOutcomes) {
		t.Errorf("%d series, want %d (bounded)", n, 4*len(Outcomes)+len(unverifiedOutcomes))
	}
	var nilMetrics *Metrics
	nilMetrics.Observe("push", Enqueued) // no-op
}
