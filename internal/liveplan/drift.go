package liveplan

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
)

// DriftMetrics are the drift loop's metrics:
//
//	kplan_drift_objects{target}: live objects that differ from what the
//	  deployed commit renders (changed, or deleted), at the last check
//	kplan_drift_check_timestamp_seconds{target}: when the last check
//	  succeeded
//	kplan_drift_check_errors_total{target}: checks that failed
type DriftMetrics struct {
	objects, checked *prometheus.GaugeVec
	errors           *prometheus.CounterVec
}

// NewDriftMetrics registers the drift metrics on reg.
func NewDriftMetrics(reg prometheus.Registerer) (*DriftMetrics, error) {
	m := &DriftMetrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kplan_drift_objects",
			Help: "Live objects of a target that differ from what its deployed commit renders (changed or deleted in the cluster), at the last drift check.",
		}, []string{"target"}),
		checked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kplan_drift_check_timestamp_seconds",
			Help: "When each target's last successful drift check finished, in seconds since the epoch.",
		}, []string{"target"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kplan_drift_check_errors_total",
			Help: "Drift checks that failed (fetch, render or dry-run), by target.",
		}, []string{"target"}),
	}
	for _, c := range []prometheus.Collector{m.objects, m.checked, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// DriftStatus is one target's last drift check.
type DriftStatus struct {
	Target      string    `json:"target"`
	Repo        string    `json:"repo"`
	Branch      string    `json:"branch"`
	DeployedSHA string    `json:"deployedSha,omitempty"`
	Drifted     []Row     `json:"drifted"`
	Refused     []Finding `json:"refused,omitempty"`
	Checked     time.Time `json:"checked"`
	Took        float64   `json:"tookSeconds"`
	Objects     int       `json:"objects"`
	Err         string    `json:"error,omitempty"`
	Note        string    `json:"note,omitempty"`
}

// Drift dry-runs each target's deployed commit against its cluster every
// Interval and records what drifted: in Metrics and in Status (served as
// JSON). It never applies.
type Drift struct {
	Targets  []config.TargetRef
	Mirrors  Mirror
	Planner  func(config.Target) Planner
	Interval time.Duration
	Metrics  *DriftMetrics // nil records none
	Logger   *slog.Logger
	// GitBases is the directory of the git-base cache renders fetch git
	// remote bases into, as deploys do; "" fetches none.
	GitBases string

	mu     sync.Mutex
	status map[string]DriftStatus
}

// Run checks every target now and then every Interval until ctx ends.
func (d *Drift) Run(ctx context.Context) {
	if d.Interval <= 0 {
		return
	}
	for {
		d.CheckAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.Interval):
		}
	}
}

// CheckAll checks every target once, one after another (the dry-runs
// share the API servers with deploys).
func (d *Drift) CheckAll(ctx context.Context) {
	for _, t := range d.Targets {
		if ctx.Err() != nil {
			return
		}
		if t.Target.FromFile != "" {
			continue // the targets a repository declares are not checked yet
		}
		st := d.Check(ctx, t)
		d.record(st)
	}
}

func (d *Drift) log() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

func (d *Drift) record(st DriftStatus) {
	d.mu.Lock()
	if d.status == nil {
		d.status = map[string]DriftStatus{}
	}
	d.status[st.Target] = st
	d.mu.Unlock()
	log := d.log().With("target", st.Target, "deployed", st.DeployedSHA, "took", st.Took)
	if st.Err != "" {
		log.Warn("drift check failed", "err", st.Err)
		if d.Metrics != nil {
			d.Metrics.errors.WithLabelValues(st.Target).Inc()
		}
		return
	}
	if d.Metrics != nil {
		d.Metrics.objects.WithLabelValues(st.Target).Set(float64(len(st.Drifted)))
		d.Metrics.checked.WithLabelValues(st.Target).Set(float64(st.Checked.UnixNano()) / 1e9)
	}
	if len(st.Drifted) > 0 {
		keys := make([]string, 0, len(st.Drifted))
		for _, r := range st.Drifted {
			keys = append(keys, r.Key)
		}
		log.Warn("live objects drifted from the deployed commit", "objects", keys)
	}
}

// Check dry-runs one target's deployed commit.
func (d *Drift) Check(ctx context.Context, ref config.TargetRef) DriftStatus {
	start := time.Now()
	t := ref.Target
	st := DriftStatus{Target: t.Name, Repo: ref.Repo, Branch: ref.Branch, Drifted: []Row{}}
	fail := func(err error) DriftStatus {
		st.Err, st.Checked, st.Took = err.Error(), time.Now(), time.Since(start).Seconds()
		return st
	}
	dir, tip, err := d.Mirrors.Fetch(ctx, ref.CloneURL, ref.Branch)
	if err != nil {
		return fail(err)
	}
	// The inventory the branch applies to names where the deployed commit
	// is recorded.
	s, err := d.Mirrors.Snapshot(ctx, dir, tip)
	if err != nil {
		return fail(err)
	}
	settings := settings(t, d.GitBases)
	tg, err := deploy.Prepare(ctx, deploy.FromSnapshot(s), settings, deploy.Online)
	if err != nil {
		return fail(fmt.Errorf("render %s at the branch's tip %s: %w", t.Overlay, short(tip), err))
	}
	pl := d.Planner(t)
	state, err := pl.State(ctx, tg.Inventory)
	if err != nil {
		return fail(err)
	}
	st.DeployedSHA = state.SHA
	if st.DeployedSHA == "" {
		st.Note = "nothing deployed yet"
		st.Checked, st.Took = time.Now(), time.Since(start).Seconds()
		return st
	}
	if st.DeployedSHA != tip {
		if s, err = d.Mirrors.Snapshot(ctx, dir, st.DeployedSHA); err != nil {
			return fail(err)
		}
		if tg, err = deploy.Prepare(ctx, deploy.FromSnapshot(s), settings, deploy.Online); err != nil {
			return fail(fmt.Errorf("render %s at the deployed commit %s: %w", t.Overlay, short(st.DeployedSHA), err))
		}
	}
	// Drift is the deployed objects moved away from their render: what
	// the inventory holds beyond them is the next deploy's to prune, not
	// drift, so none is listed.
	opts := deploy.OptionsOf(t)
	opts.NoPrune = true
	res, err := pl.Plan(ctx, Input{Inventory: tg.Inventory, Objects: tg.Objects, Options: opts, Deployed: tg.Objects})
	if err != nil {
		return fail(err)
	}
	st.Drifted = append(st.Drifted, res.Drifted()...)
	st.Refused = res.Findings()
	st.Objects = len(res.Rows)
	st.Checked, st.Took = time.Now(), time.Since(start).Seconds()
	return st
}

// Status is every target's last check, by target name.
func (d *Drift) Status() []DriftStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DriftStatus, 0, len(d.status))
	for _, s := range d.status {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b DriftStatus) int {
		if a.Target < b.Target {
			return -1
		}
		if a.Target > b.Target {
			return 1
		}
		return 0
	})
	return out
}

// ServeHTTP serves Status as JSON (GET /drift). Secret values are not in
// it: field changes of Secrets are hidden. Nor are the clusters'
// addresses: errors and notes come through ScrubAddresses (the full
// error is in the log).
func (d *Drift) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	st := d.Status()
	for i := range st {
		st[i].Err, st[i].Note = ScrubAddresses(st[i].Err), ScrubAddresses(st[i].Note)
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<cluster>" as written
	enc.Encode(struct {
		Targets []DriftStatus `json:"targets"`
	}{st})
}

// addresses are what names a host in an error: a URL (an API server's
// https://10.0.0.1:6443/api/v1/..., a git remote), an IP address with or
// without a port, a host:port, a name DNS failed to look up, the names a
// certificate is "valid for", and in-cluster names (*.svc,
// *.cluster.local, *.internal, *.local).
var addresses = regexp.MustCompile(`\bvalid for [^"]+?, not [^\s"]+` +
	`|[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+` +
	`|\[[0-9a-fA-F:.]+\](?::\d+)?` +
	`|\b(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}\b|(?:[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?\b` +
	`|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b` +
	`|\b[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*:\d+\b` +
	`|\blookup [^\s:]+` +
	`|\b[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.(?:svc|cluster\.local|internal|local)\b`)

// ScrubAddresses replaces the hosts, IP addresses and URLs in s with
// "<cluster>": what /drift serves must not map the clusters' network
// for whoever can reach it.
func ScrubAddresses(s string) string {
	return addresses.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.HasPrefix(m, "lookup "):
			return "lookup <cluster>"
		case strings.HasPrefix(m, "valid for "):
			return "valid for <cluster>, not <cluster>"
		}
		// A file and line ("kustomization.yaml:12") is no host:port.
		if host, _, ok := strings.Cut(m, ":"); ok && !strings.Contains(m, "/") {
			switch path.Ext(host) {
			case ".yaml", ".yml", ".json", ".go":
				return m
			}
		}
		return "<cluster>"
	})
}
