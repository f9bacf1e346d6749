package deployer

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kplan-dev/kplan/internal/deploy"
)

// Metrics records finished deploys. A nil Deployer.Metrics records
// nothing.
type Metrics interface {
	// Deployed records one deploy attempt of o.Target; applied is false
	// when it failed before applying (fetch, render, a shared inventory).
	Deployed(o Outcome, applied bool)
	// Slots records how many deploys run and how many wait for a slot
	// (Slots), whenever that changes.
	Slots(running, queued int)
}

// observe records o, if the deployer has metrics.
func (d *Deployer) observe(o Outcome, applied bool) {
	if d.Metrics != nil {
		d.Metrics.Deployed(o, applied)
	}
}

// observeSlots records the deploys running and queued, if the deployer
// has metrics.
func (d *Deployer) observeSlots(running, queued int) {
	if d.Metrics != nil {
		d.Metrics.Slots(running, queued)
	}
}

// Deploy outcomes, the values of the outcome label.
const (
	OutcomeSuccess = deploy.OutcomeSuccess // applied, every object reconciled
	OutcomeFailure = deploy.OutcomeFailure // applied, but the apply or an object failed
	OutcomeError   = "error"               // failed before applying
)

// MaxTargetLabels bounds the target label's values: repositories declare
// targets in .kplan.yaml, so their number is not the configuration's.
// Targets past it are counted as "_other".
const MaxTargetLabels = 500

// Prometheus implements Metrics on a Prometheus registry:
//
//	kplan_deploys_total{target,outcome}
//	kplan_deploy_duration_seconds{target} (deploys that applied)
//	kplan_objects_applied_total{target}, kplan_objects_pruned_total{target}
//	kplan_target_last_success_timestamp_seconds{target}
//	kplan_deploy_failures_total{target,reason} (reason: a Reason)
//	kplan_deploys_running, kplan_deploys_queued (Slots)
//
// The target label is the target's Key: its name, or <source>/<name> for a
// target a repository declares.
type Prometheus struct {
	deploys     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	applied     *prometheus.CounterVec
	pruned      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	failures    *prometheus.CounterVec
	running     prometheus.Gauge
	queued      prometheus.Gauge

	mu      sync.Mutex
	targets map[string]bool
}

// NewPrometheus registers the deploy metrics on reg, with the configured
// targets' counters at 0.
func NewPrometheus(reg prometheus.Registerer, targets ...string) (*Prometheus, error) {
	p := &Prometheus{
		deploys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_deploys_total",
			Help: "Deploy attempts by target and outcome: success, failure (applied but failed) or error (failed before applying).",
		}, []string{"target", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kplan_deploy_duration_seconds",
			Help:    "How long the deploys that applied took, from apply to reconciled, by target.",
			Buckets: []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"target"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_objects_applied_total",
			Help: "Objects applied (created, configured or unchanged) by target.",
		}, []string{"target"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_objects_pruned_total",
			Help: "Objects pruned by target.",
		}, []string{"target"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kplan_target_last_success_timestamp_seconds",
			Help: "When each target's last successful deploy finished, in seconds since the epoch (absent before the first).",
		}, []string{"target"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_deploy_failures_total",
			Help: "Failed deploy attempts by target and reason: FetchFailed, RenderFailed, TargetsInvalid, InventoryConflict, Refused, ApplyFailed, ObjectsFailed or Interrupted.",
		}, []string{"target", "reason"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kplan_deploys_running",
			Help: "Deploys running now (fetch, render, apply and the wait for the objects to reconcile), at most --max-parallel-deploys.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kplan_deploys_queued",
			Help: "Targets waiting for one of the --max-parallel-deploys slots to deploy.",
		}),
		targets: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{p.deploys, p.duration, p.applied, p.pruned, p.lastSuccess, p.failures, p.running, p.queued} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, t := range targets {
		t = p.label(t)
		for _, o := range []string{OutcomeSuccess, OutcomeFailure, OutcomeError} {
			p.deploys.WithLabelValues(t, o)
		}
		p.applied.WithLabelValues(t)
		p.pruned.WithLabelValues(t)
	}
	return p, nil
}

// label bounds the target label's values.
func (p *Prometheus) label(target string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.targets[target] {
		if len(p.targets) >= MaxTargetLabels {
			return "_other"
		}
		p.targets[target] = true
	}
	return target
}

// Deployed implements Metrics.
func (p *Prometheus) Deployed(o Outcome, applied bool) {
	if p == nil {
		return
	}
	t := p.label(o.Target.Key())
	outcome := OutcomeSuccess
	switch {
	case o.Err != nil && applied:
		outcome = OutcomeFailure
	case o.Err != nil:
		outcome = OutcomeError
	}
	p.deploys.WithLabelValues(t, outcome).Inc()
	if o.Err != nil {
		p.failures.WithLabelValues(t, string(reasonLabel(o.Reason))).Inc()
	}
	if !applied {
		return
	}
	if !o.Started.IsZero() && !o.Finished.IsZero() {
		p.duration.WithLabelValues(t).Observe(o.Finished.Sub(o.Started).Seconds())
	}
	if r := o.Result; r != nil {
		var n, pruned int
		for _, obj := range r.Objects {
			switch obj.Action {
			case deploy.Created, deploy.Configured, deploy.Unchanged:
				n++
			case deploy.Pruned:
				pruned++
			}
		}
		p.applied.WithLabelValues(t).Add(float64(n))
		p.pruned.WithLabelValues(t).Add(float64(pruned))
	}
	if outcome == OutcomeSuccess {
		p.lastSuccess.WithLabelValues(t).Set(float64(o.Finished.UnixNano()) / 1e9)
	}
}

// Slots implements Metrics.
func (p *Prometheus) Slots(running, queued int) {
	if p == nil {
		return
	}
	p.running.Set(float64(running))
	p.queued.Set(float64(queued))
}

// reasonLabel bounds the reason label to the Reasons.
func reasonLabel(r Reason) Reason {
	if slices.Contains(Reasons(), r) && r != ReasonDeployed {
		return r
	}
	return "Other"
}
