package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// Lease timings of the replicas in this test: a takeover after a kill
// takes seconds, not the default 15.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = 500 * time.Millisecond
)

var (
	leaseGVR      = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// ghEvent is one report a replica made to GitHub about a deploy, or a
// replica's death; seq orders them as they reached GitHub (a request is
// numbered when it arrives, so one in flight when its sender dies still
// counts as sent before the death).
type ghEvent struct {
	seq     int
	replica string
	kind    string // "start" (a Deployment created), a Deployment status's state, or "killed"
	id      int64  // the GitHub Deployment
	sha     string
	env     string // the Deployment's environment ("start" only)
}

// ghTap stands between each replica and the local GitHub API, so every
// Deployment and Deployment status is attributed to the replica that made
// it.
type ghTap struct {
	t      *testing.T
	target *url.URL
	mu     sync.Mutex
	seq    int
	events []ghEvent
}

var deploymentStatusPath = regexp.MustCompile(`/deployments/(\d+)/statuses$`)

func (g *ghTap) next() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	return g.seq
}

func (g *ghTap) add(ev ghEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, ev)
}

// serve returns the API base URL replica should use.
func (g *ghTap) serve(replica string) string {
	proxy := httputil.NewSingleHostReverseProxy(g.target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seq := g.next()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if r.Method != http.MethodPost || rec.Code != http.StatusCreated {
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/deployments"):
			var d struct {
				ID          int64  `json:"id"`
				SHA         string `json:"sha"`
				Environment string `json:"environment"`
			}
			json.Unmarshal(rec.Body.Bytes(), &d)
			g.add(ghEvent{seq: seq, replica: replica, kind: "start", id: d.ID, sha: d.SHA, env: d.Environment})
		case deploymentStatusPath.MatchString(r.URL.Path):
			var st struct {
				State string `json:"state"`
			}
			json.Unmarshal(body, &st)
			var id int64
			fmt.Sscan(deploymentStatusPath.FindStringSubmatch(r.URL.Path)[1], &id)
			g.add(ghEvent{seq: seq, replica: replica, kind: st.State, id: id})
		}
	}))
	g.t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func (g *ghTap) killed(replica string) {
	g.add(ghEvent{seq: g.next(), replica: replica, kind: "killed"})
}

func (g *ghTap) list() []ghEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.events)
	slices.SortFunc(out, func(a, b ghEvent) int { return a.seq - b.seq })
	return out
}

// started reports whether replica opened a Deployment of sha.
func (g *ghTap) started(replica, sha string) bool {
	return slices.ContainsFunc(g.list(), func(ev ghEvent) bool { return ev.kind == "start" && ev.replica == replica && ev.sha == sha })
}

// overlaps returns what contradicts "one deploy of the target at a time,
// by the leader": a Deployment opened while another, opened by a replica
// still alive, has not finished; or one opened by a replica that is dead.
func overlaps(events []ghEvent) []string {
	var bad []string
	open := map[int64]string{} // Deployment -> replica
	dead := map[string]bool{}
	for _, ev := range events {
		switch ev.kind {
		case "killed":
			dead[ev.replica] = true
		case "start":
			if dead[ev.replica] {
				bad = append(bad, fmt.Sprintf("%s opened Deployment %d after it was killed", ev.replica, ev.id))
			}
			for id, by := range open {
				if !dead[by] {
					bad = append(bad, fmt.Sprintf("%s opened Deployment %d (%s) while Deployment %d of %s was still in progress", ev.replica, ev.id, short(ev.sha), id, by))
				}
			}
			open[ev.id] = ev.replica
		case "success", "failure", "error", "inactive":
			delete(open, ev.id)
		}
	}
	return bad
}

// webhookReplica is one kplan-webhook process run with --leader-elect.
type webhookReplica struct {
	name, url, identity, log string
	metrics                  string // the --metrics-listen URL
	cmd                      *exec.Cmd
}

// startReplica runs a replica with its own state directory and its own
// path to GitHub (through tap), as a pod of a Deployment would; args are
// added to its flags.
func startReplica(e *hookEnv, tap *ghTap, name string, args ...string) *webhookReplica {
	e.t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^apiBaseURL: .*$`).ReplaceAllString(string(cfg), "apiBaseURL: "+tap.serve(name))
	s = regexp.MustCompile(`(?m)^stateDir: .*$`).ReplaceAllString(s, "stateDir: "+e.t.TempDir())
	path := filepath.Join(e.t.TempDir(), name+".yaml")
	os.WriteFile(path, []byte(s), 0o644)

	r := &webhookReplica{name: name, log: filepath.Join(e.t.TempDir(), name+".log")}
	r.cmd = exec.Command(e.bin, "--config", path, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--leader-elect",
		"--leader-elect-lease-duration", testLeaseDuration.String(), "--leader-elect-renew-deadline", testRenewDeadline.String(),
		"--leader-elect-retry-period", testRetryPeriod.String())
	r.cmd.Args = append(r.cmd.Args, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KPLAN_") && !strings.HasPrefix(kv, "POD_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			r.cmd.Env = append(r.cmd.Env, kv)
		}
	}
	// What the downward API gives a pod; the Lease is in the test cluster.
	r.cmd.Env = append(r.cmd.Env, "KPLAN_WEBHOOK_SECRET="+hookSecret, "KPLAN_GITHUB_TOKEN="+hookToken,
		"KUBECONFIG="+e.cluster.Kubeconfig, "POD_NAMESPACE=default", "POD_NAME="+name, "POD_IP=127.0.0.1")
	// Its own process group, killed whole as a pod dies: a git fetch
	// outliving a killed replica would write into the test's directories
	// after they are removed.
	ownGroup(r.cmd)
	stdout, _ := r.cmd.StdoutPipe()
	logs, _ := os.Create(r.log)
	r.cmd.Stderr = logs
	if err := r.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		r.kill()
		r.cmd.Wait()
		if e.t.Failed() {
			data, _ := os.ReadFile(r.log)
			e.t.Logf("%s log:\n%s", name, tailLines(string(data), 40))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		e.t.Fatalf("replica %s did not start: %v", name, err)
	}
	r.url, r.metrics = listenerURLs(e.t, line)
	r.identity = name + "@" + strings.TrimPrefix(r.url, "http://")
	if !strings.Contains(line, "as replica "+r.identity) {
		e.t.Errorf("replica %s says: %q", name, line)
	}
	return r
}

// holder reads the Lease's holderIdentity.
func (e *hookEnv) holder() string {
	u, err := e.dyn.Resource(leaseGVR).Namespace("default").Get(context.Background(), "kplan-webhook", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	h, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
	return h
}

// sendTo posts a signed delivery to one replica.
func sendTo(t *testing.T, r *webhookReplica, event string, payload []byte, delivery string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url+"/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(payload)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric reads one sample of a replica's /metrics.
func metric(t *testing.T, r *webhookReplica, series string) string {
	t.Helper()
	resp, err := http.Get(r.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// kill ends the replica and the processes it started (SIGKILL).
func (r *webhookReplica) kill() { killGroup(r.cmd) }

// Two replicas with --leader-elect: deliveries sent to the one that does
// not lead are deployed by the leader; the leader is killed (SIGKILL, the
// Lease not released) in the middle of a deploy; a delivery meanwhile is
// answered 503, to be redelivered; the survivor takes over within the
// lease time and converges on the newest commit; and at no time do two
// deploys of the target overlap, as the GitHub Deployments each replica
// opened and closed show.
func TestWebhookLeaderElection(t *testing.T) {
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 2m`)
	gh, _ := url.Parse(e.gh.URL())
	tap := &ghTap{t: t, target: gh}
	sha0 := e.commit("a")
	replicas := map[string]*webhookReplica{}
	for _, name := range []string{"replica-a", "replica-b"} {
		replicas[name] = startReplica(e, tap, name)
	}

	// One of them leads, and its term starts with a resync: the cluster
	// reaches the branch.
	var lead, other *webhookReplica
	testkit.Eventually(t, "a leader", time.Minute, func() bool {
		h := e.holder()
		for _, r := range replicas {
			if h == r.identity {
				lead = r
			}
		}
		return lead != nil
	})
	for _, r := range replicas {
		if r != lead {
			other = r
		}
	}
	t.Logf("%s leads; %s does not", lead.name, other.name)
	e.waitDeployed(sha0)
	if v := metric(t, lead, "kplan_webhook_leader"); v != "1" {
		t.Errorf("the leader's kplan_webhook_leader = %q", v)
	}
	if v := metric(t, other, "kplan_webhook_leader"); v != "0" {
		t.Errorf("the other's kplan_webhook_leader = %q", v)
	}
	testkit.Eventually(t, "the other replica to be ready (it knows the leader)", time.Minute, func() bool {
		resp, err := http.Get(other.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// A merge delivered to the replica that does not lead: the leader
	// deploys it (the resync interval is an hour: only the delivery can).
	sha1 := e.commit("a", "b")
	if code, body := sendTo(t, other, "push", pushPayload(t, hookRepo, sha0, sha1), "merge-1"); code != http.StatusAccepted || !strings.Contains(body, "accepted") {
		t.Fatalf("push to the non-leader: HTTP %d %q", code, body)
	}
	e.waitDeployed(sha1)
	eq(t, "ConfigMaps after merge 1", e.configMaps(), []string{"a", "b"})
	if !tap.started(lead.name, sha1) || tap.started(other.name, sha1) {
		t.Errorf("merge 1 was not deployed by the leader alone: %+v", tap.list())
	}
	if v := metric(t, other, `kplan_webhook_forwards_total{outcome="forwarded"}`); v != "1" {
		t.Errorf("the non-leader's forwarded count = %q", v)
	}
	// The same delivery again, through the other replica: the leader
	// knows its ID.
	if code, body := sendTo(t, other, "push", pushPayload(t, hookRepo, sha0, sha1), "merge-1"); code != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Errorf("replayed delivery: HTTP %d %q", code, body)
	}

	// A slow merge, through the non-leader again; the leader is killed
	// while it waits for the Deployment to become available.
	sha2 := e.commitSlow("a", "c")
	if code, _ := sendTo(t, other, "push", pushPayload(t, hookRepo, sha1, sha2), "merge-2"); code != http.StatusAccepted {
		t.Fatalf("slow push: HTTP %d", code)
	}
	testkit.Eventually(t, "the slow deploy to be applied and waiting", time.Minute, func() bool {
		_, err := e.dyn.Resource(deploymentGVR).Namespace(hookNS).Get(context.Background(), "slow", metav1.GetOptions{})
		return err == nil && tap.started(lead.name, sha2)
	})
	lead.kill() // SIGKILL: the Lease is not released
	killed := time.Now()
	lead.cmd.Wait()
	tap.killed(lead.name)
	if s, _ := e.deployed(); s == sha2 {
		t.Fatal("the slow deploy finished before the kill")
	}

	// The branch moves on while nobody leads: the delivery cannot reach a
	// leader and is answered 503, so GitHub shows it failed.
	sha3 := e.commit("a", "late")
	push3 := pushPayload(t, hookRepo, sha2, sha3)
	code, body := sendTo(t, other, "push", push3, "merge-3")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "redeliver") || strings.Contains(body, "127.0.0.1") {
		t.Errorf("delivery with the leader dead: HTTP %d %q, want a 503 asking for a redelivery, naming no address", code, body)
	}

	// The survivor takes over once the Lease expires, and its term's
	// resync deploys the branch tip.
	testkit.Eventually(t, "the survivor to lead", time.Minute, func() bool { return e.holder() == other.identity })
	takeover := time.Since(killed)
	t.Logf("takeover: %s after the SIGKILL (lease duration %s, retry period %s)", takeover.Round(time.Millisecond), testLeaseDuration, testRetryPeriod)
	if takeover > testLeaseDuration+4*testRetryPeriod+2*time.Second {
		t.Errorf("takeover took %s", takeover)
	}
	e.waitDeployed(sha3)
	converged := time.Since(killed)
	t.Logf("converged on the newest commit %s after the SIGKILL", converged.Round(time.Millisecond))
	eq(t, "ConfigMaps after the takeover", e.configMaps(), []string{"a", "late"})
	if _, err := e.dyn.Resource(deploymentGVR).Namespace(hookNS).Get(context.Background(), "slow", metav1.GetOptions{}); err == nil {
		t.Error("the Deployment of the interrupted merge was not pruned")
	}
	if v := metric(t, other, "kplan_webhook_leader"); v != "1" {
		t.Errorf("the new leader's kplan_webhook_leader = %q", v)
	}
	// GitHub's redelivery of the failed delivery is accepted now.
	if code, body := sendTo(t, other, "push", push3, "merge-3"); code != http.StatusAccepted {
		t.Errorf("redelivery: HTTP %d %q", code, body)
	}

	for _, bad := range overlaps(tap.list()) {
		t.Error(bad)
	}
	var starts []string
	for _, ev := range tap.list() {
		if ev.kind == "start" {
			starts = append(starts, ev.replica+" "+short(ev.sha))
		}
	}
	t.Logf("Deployments opened, in order: %s", strings.Join(starts, ", "))
	if !tap.started(other.name, sha3) {
		t.Errorf("the survivor did not deploy %s: %+v", short(sha3), tap.list())
	}
}

// The overlap check above finds what it must.
func TestOverlapsFinds(t *testing.T) {
	sha := strings.Repeat("a", 40)
	tests := []struct {
		name   string
		events []ghEvent
		bad    int
	}{
		{"one after another", []ghEvent{{replica: "a", kind: "start", id: 1, sha: sha}, {replica: "a", kind: "success", id: 1},
			{replica: "a", kind: "start", id: 2, sha: sha}, {replica: "a", kind: "failure", id: 2}}, 0},
		{"taken over after a kill", []ghEvent{{replica: "a", kind: "start", id: 1, sha: sha}, {replica: "a", kind: "killed"},
			{replica: "b", kind: "start", id: 2, sha: sha}, {replica: "b", kind: "success", id: 2}}, 0},
		{"two at once", []ghEvent{{replica: "a", kind: "start", id: 1, sha: sha}, {replica: "b", kind: "start", id: 2, sha: sha},
			{replica: "a", kind: "success", id: 1}}, 1},
		{"a dead replica deploying", []ghEvent{{replica: "a", kind: "killed"}, {replica: "a", kind: "start", id: 1, sha: sha}}, 1},
	}
	for _, tc := range tests {
		if got := overlaps(tc.events); len(got) != tc.bad {
			t.Errorf("%s: %q, want %d findings", tc.name, got, tc.bad)
		}
	}
}
