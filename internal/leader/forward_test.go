package leader

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kplan-dev/kplan/internal/forge"
	forgegithub "github.com/kplan-dev/kplan/internal/forge/github"
	forgegitlab "github.com/kplan-dev/kplan/internal/forge/gitlab"
)

const testSecret = "it's a secret to everybody"

func sign(body []byte) string {
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

type route struct {
	local  bool
	leader string
}

func (r route) Route() (bool, string) { return r.local, r.leader }

// leaderServer is a real HTTP server standing for the leader: it checks
// the signature itself, as the leader's webhook handler does, and records
// what it received.
type leaderServer struct {
	*httptest.Server
	mu       sync.Mutex
	received []*http.Request
	bodies   [][]byte
	status   int
}

func newLeader(t *testing.T, status int) *leaderServer {
	l := &leaderServer{status: status}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.received = append(l.received, r)
		l.bodies = append(l.bodies, body)
		l.mu.Unlock()
		if github.ValidateSignature(r.Header.Get("X-Hub-Signature-256"), body, []byte(testSecret)) != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(l.status)
		io.WriteString(w, "leader says "+http.StatusText(l.status)+"\n")
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *leaderServer) addr() string { return strings.TrimPrefix(l.URL, "http://") }

func (l *leaderServer) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.received)
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestForwarder(t *testing.T) {
	payload := []byte(`{"ref":"refs/heads/main","after":"0123456789012345678901234567890123456789"}`)
	type want struct {
		status    int
		outcome   string // "" when the request is served locally
		forwarded bool
		body      string // a substring of the answer
	}
	tests := []struct {
		name   string
		route  func(leader, closed string) route
		method string
		path   string
		header map[string]string
		body   []byte
		leader int // the leader's status
		want   want
	}{
		{name: "leading: served here", route: func(string, string) route { return route{local: true} },
			want: want{status: http.StatusTeapot, body: "local"}},
		{name: "not leading, not a delivery: served here", route: func(l, _ string) route { return route{leader: l} },
			method: http.MethodGet, path: "/readyz", want: want{status: http.StatusTeapot, body: "local"}},
		{name: "signed delivery goes to the leader, its answer comes back", route: func(l, _ string) route { return route{leader: l} },
			leader: http.StatusAccepted, want: want{status: http.StatusAccepted, outcome: Forwarded, forwarded: true, body: "leader says Accepted"}},
		{name: "the leader's refusal comes back too", route: func(l, _ string) route { return route{leader: l} },
			leader: http.StatusServiceUnavailable, want: want{status: http.StatusServiceUnavailable, outcome: Forwarded, forwarded: true, body: "leader says Service Unavailable"}},
		{name: "no leader known: 503 to redeliver", route: func(string, string) route { return route{} },
			want: want{status: http.StatusServiceUnavailable, outcome: NoLeader, body: "redeliver"}},
		{name: "leader unreachable: 503 that names no address", route: func(_, c string) route { return route{leader: c} },
			want: want{status: http.StatusServiceUnavailable, outcome: Unreachable, body: "redeliver"}},
		{name: "no signature: not forwarded", route: func(l, _ string) route { return route{leader: l} },
			header: map[string]string{"X-Hub-Signature-256": ""}, want: want{status: http.StatusUnauthorized, outcome: Unauthorized}},
		{name: "wrong signature: not forwarded", route: func(l, _ string) route { return route{leader: l} },
			header: map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}, want: want{status: http.StatusUnauthorized, outcome: Unauthorized}},
		{name: "already forwarded once: not bounced on", route: func(l, _ string) route { return route{leader: l} },
			header: map[string]string{ForwardedByHeader: "other@10.0.0.9:8080"}, want: want{status: http.StatusServiceUnavailable, outcome: NoLeader}},
		{name: "over 25 MB: refused unread", route: func(l, _ string) route { return route{leader: l} },
			body: bytes.Repeat([]byte(" "), 25<<20+1), want: want{status: http.StatusRequestEntityTooLarge, outcome: TooLarge}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLeader(t, tc.leader)
			closed := closedAddr(t)
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusTeapot)
				io.WriteString(w, "local")
			})
			f, err := NewForwarder(ForwarderOptions{Router: tc.route(l.addr(), closed), Local: local, Secret: []byte(testSecret), Receiver: forgegithub.Receiver{},
				Identity: "me@127.0.0.1:1", Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(f)
			defer front.Close()

			body := payload
			if tc.body != nil {
				body = tc.body
			}
			method, path := http.MethodPost, "/webhook"
			if tc.method != "" {
				method, path = tc.method, tc.path
			}
			req, _ := http.NewRequest(method, front.URL+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-GitHub-Delivery", "d-1")
			req.Header.Set("X-GitHub-Hook-ID", "42")
			req.Header.Set("X-Hub-Signature-256", sign(body))
			req.Header.Set("Authorization", "Bearer not-for-the-leader")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			if resp.StatusCode != tc.want.status || !strings.Contains(string(answer), tc.want.body) {
				t.Errorf("answer %d %q, want %d containing %q", resp.StatusCode, answer, tc.want.status, tc.want.body)
			}
			for _, addr := range []string{l.addr(), closed} {
				if strings.Contains(string(answer), addr) {
					t.Errorf("the answer GitHub shows names the address %s: %q", addr, answer)
				}
			}
			if got := l.count(); got != map[bool]int{true: 1}[tc.want.forwarded] {
				t.Fatalf("the leader received %d requests", got)
			}
			if tc.want.forwarded {
				got := l.received[0]
				if !bytes.Equal(l.bodies[0], body) {
					t.Error("the forwarded body differs from the delivery")
				}
				for _, h := range []string{"Content-Type", "X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID", "X-Hub-Signature-256"} {
					if got.Header.Get(h) != req.Header.Get(h) {
						t.Errorf("forwarded %s = %q, want %q", h, got.Header.Get(h), req.Header.Get(h))
					}
				}
				if got.Header.Get("Authorization") != "" {
					t.Error("a header GitHub does not send for deliveries was forwarded")
				}
				if got.Header.Get(ForwardedByHeader) != "me@127.0.0.1:1" || got.URL.Path != "/webhook" {
					t.Errorf("forwarded as %s by %q", got.URL.Path, got.Header.Get(ForwardedByHeader))
				}
			}
			for _, o := range forwardOutcomes {
				want := 0.0
				if o == tc.want.outcome {
					want = 1
				}
				if got := testutil.ToFloat64(m.forwards.WithLabelValues(o)); got != want {
					t.Errorf("kplan_webhook_forwards_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
		})
	}
}

// Bodies beyond the budget wait at most budgetWait and get a 503 that
// GitHub shows as failed, rather than holding the client; once the budget
// is free again deliveries go through.
func TestForwarderBudget(t *testing.T) {
	l := newLeader(t, http.StatusAccepted)
	f, err := NewForwarder(ForwarderOptions{Router: route{leader: l.addr()}, Local: http.NotFoundHandler(), Secret: []byte(testSecret), Receiver: forgegithub.Receiver{}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.budget.TryAcquire(BodyBudget) { // everything in flight
		t.Fatal("budget not free")
	}
	front := httptest.NewServer(f)
	defer front.Close()
	body := []byte(`{}`)
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/webhook", bytes.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", sign(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || l.count() != 0 {
		t.Errorf("with the budget spent: HTTP %d, %d forwarded", resp.StatusCode, l.count())
	}
	f.budget.Release(BodyBudget)
	req, _ = http.NewRequest(http.MethodPost, front.URL+"/webhook", bytes.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", sign(body))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || l.count() != 1 {
		t.Errorf("with the budget free: HTTP %d, %d forwarded", resp.StatusCode, l.count())
	}
}

// TestForwarderGitLab pins the forwarding of a webhook serving GitHub and
// GitLab on one endpoint: a GitLab delivery reaching a follower goes to
// the leader with the headers GitLab sends (its secret token with it, the
// leader verifies it again), checked against GitLab's own secret token;
// one with a wrong token, or GitHub's secret, stays here.
func TestForwarderGitLab(t *testing.T) {
	const gitLabSecret = "gitlab's own"
	var (
		mu       sync.Mutex
		received []http.Header
	)
	l := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer l.Close()
	rs := forge.Routes{
		{Forge: "github", Header: "X-GitHub-Event", Receiver: forgegithub.Receiver{}},
		{Forge: "gitlab", Header: "X-Gitlab-Event", Receiver: forgegitlab.Receiver{}, Secret: []byte(gitLabSecret)},
	}
	f, err := NewForwarder(ForwarderOptions{Router: route{leader: strings.TrimPrefix(l.URL, "http://")}, Local: http.NotFoundHandler(),
		Secret: []byte(testSecret), Receiver: rs, Identity: "me@127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(f)
	defer front.Close()
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"GitLab's secret token: forwarded", gitLabSecret, http.StatusAccepted},
		{"GitHub's secret: refused here", testSecret, http.StatusUnauthorized},
		{"a wrong token: refused here", "guess", http.StatusUnauthorized},
	} {
		mu.Lock()
		received = nil
		mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/webhook", strings.NewReader(`{"object_kind":"merge_request"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitlab-Event", "Merge Request Hook")
		req.Header.Set("X-Gitlab-Token", tc.token)
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		got := received
		mu.Unlock()
		if resp.StatusCode != tc.status || (len(got) == 1) != (tc.status == http.StatusAccepted) {
			t.Fatalf("%s: status %d, %d forwarded; want %d", tc.name, resp.StatusCode, len(got), tc.status)
		}
		if len(got) == 1 {
			for _, h := range []string{"X-Gitlab-Event", "X-Gitlab-Token", "Idempotency-Key", "Content-Type"} {
				if got[0].Get(h) != req.Header.Get(h) {
					t.Errorf("%s: forwarded %s = %q, want %q", tc.name, h, got[0].Get(h), req.Header.Get(h))
				}
			}
		}
	}
}
