package deployer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
)

func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewPrometheus(reg, "prod", "staging")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_700_000_000, 0)
	res := &deploy.Result{Objects: []deploy.ObjectResult{
		{Key: "a", Action: deploy.Created}, {Key: "b", Action: deploy.Configured}, {Key: "c", Action: deploy.Unchanged},
		{Key: "d", Action: deploy.Pruned}, {Key: "e", Action: deploy.Kept},
	}}
	prod := named("prod")
	p.Deployed(Outcome{Target: prod, Result: res, Started: start, Finished: start.Add(3 * time.Second)}, true)
	p.Deployed(Outcome{Target: prod, Result: res, Err: errors.New("x"), Reason: ReasonObjectsFailed, Started: start, Finished: start.Add(time.Second)}, true)
	p.Deployed(Outcome{Target: prod, Err: errors.New("render"), Reason: ReasonRenderFailed}, false)
	p.Deployed(Outcome{Target: Target{Target: config.Target{Name: "staging"}}, Err: errors.New("?"), Reason: "Invented"}, false)
	p.Deployed(Outcome{Target: Target{Target: config.Target{Name: "web"}, Source: "repo"}, Result: res, Started: start, Finished: start.Add(time.Second)}, true)

	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"prod success", testutil.ToFloat64(p.deploys.WithLabelValues("prod", "success")), 1},
		{"prod failure", testutil.ToFloat64(p.deploys.WithLabelValues("prod", "failure")), 1},
		{"prod error", testutil.ToFloat64(p.deploys.WithLabelValues("prod", "error")), 1},
		{"staging success", testutil.ToFloat64(p.deploys.WithLabelValues("staging", "success")), 0},
		{"repo/web success", testutil.ToFloat64(p.deploys.WithLabelValues("repo/web", "success")), 1},
		{"prod applied", testutil.ToFloat64(p.applied.WithLabelValues("prod")), 6},
		{"prod pruned", testutil.ToFloat64(p.pruned.WithLabelValues("prod")), 2},
		{"prod last success", testutil.ToFloat64(p.lastSuccess.WithLabelValues("prod")), 1_700_000_003},
		{"prod objects failed", testutil.ToFloat64(p.failures.WithLabelValues("prod", "ObjectsFailed")), 1},
		{"prod render failed", testutil.ToFloat64(p.failures.WithLabelValues("prod", "RenderFailed")), 1},
		{"staging, a reason not in the set", testutil.ToFloat64(p.failures.WithLabelValues("staging", "Other")), 1},
		{"failure series", float64(testutil.CollectAndCount(p.failures)), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	want := `
# HELP kplan_deploy_duration_seconds How long the deploys that applied took, from apply to reconciled, by target.
# TYPE kplan_deploy_duration_seconds histogram
kplan_deploy_duration_seconds_bucket{target="prod",le="0.5"} 0
kplan_deploy_duration_seconds_bucket{target="prod",le="1"} 1
kplan_deploy_duration_seconds_bucket{target="prod",le="2.5"} 1
kplan_deploy_duration_seconds_bucket{target="prod",le="5"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="10"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="30"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="60"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="120"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="300"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="600"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="1800"} 2
kplan_deploy_duration_seconds_bucket{target="prod",le="+Inf"} 2
kplan_deploy_duration_seconds_sum{target="prod"} 4
kplan_deploy_duration_seconds_count{target="prod"} 2
kplan_deploy_duration_seconds_bucket{target="repo/web",le="0.5"} 0
kplan_deploy_duration_seconds_bucket{target="repo/web",le="1"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="2.5"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="5"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="10"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="30"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="60"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="120"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="300"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="600"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="1800"} 1
kplan_deploy_duration_seconds_bucket{target="repo/web",le="+Inf"} 1
kplan_deploy_duration_seconds_sum{target="repo/web"} 1
kplan_deploy_duration_seconds_count{target="repo/web"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kplan_deploy_duration_seconds"); err != nil {
		t.Error(err)
	}
	p.Slots(8, 3)
	p.Slots(2, 0)
	if running, queued := testutil.ToFloat64(p.running), testutil.ToFloat64(p.queued); running != 2 || queued != 0 {
		t.Errorf("kplan_deploys_running %v, kplan_deploys_queued %v, want the last counts: 2 and 0", running, queued)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}

	// Targets a repository declares are bounded.
	for i := range MaxTargetLabels + 10 {
		p.Deployed(Outcome{Target: Target{Target: config.Target{Name: fmt.Sprint("t", i)}, Source: "repo"}, Err: errors.New("x")}, false)
	}
	if got := testutil.ToFloat64(p.deploys.WithLabelValues("_other", "error")); got < 10 {
		t.Errorf("_other = %v, want the targets past the bound", got)
	}
	if n := testutil.CollectAndCount(p.deploys); n > 3*2+1+MaxTargetLabels {
		t.Errorf("%d series", n)
	}
}

// A deployer without metrics records nothing and does not fail.
func TestNoMetrics(t *testing.T) {
	var d Deployer
	d.observe(Outcome{}, true)
	d.observeSlots(1, 1)
	var p *Prometheus
	p.Deployed(Outcome{}, true)
	p.Slots(1, 1)
}
