package test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const hookAppID = 4242

// tokenGate serves git like GitHub does for an App: Basic auth whose
// password is a token the fake API minted and that has not expired. It
// records the tokens fetches used.
type tokenGate struct {
	gh   *githubapi.Server
	mu   sync.Mutex
	used []string
}

func (g *tokenGate) serve(t *testing.T, backend string) string {
	u, _ := url.Parse(backend)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
		dec, _ := base64.StdEncoding.DecodeString(raw)
		_, pass, _ := strings.Cut(string(dec), ":")
		if pass == "" || !g.gh.ValidToken(pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Authentication failed", http.StatusUnauthorized)
			return
		}
		g.mu.Lock()
		if len(g.used) == 0 || g.used[len(g.used)-1] != pass {
			g.used = append(g.used, pass)
		}
		g.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (g *tokenGate) tokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.used...)
}

// startWithEnv runs the webhook binary with env (and no other kplan
// credentials) and returns its log file.
func (e *hookEnv) startWithEnv(env ...string) string {
	e.t.Helper()
	cmd := exec.Command(e.bin, "--config", e.config, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KPLAN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	ownGroup(cmd)
	stdout, _ := cmd.StdoutPipe()
	logs := filepath.Join(e.t.TempDir(), "webhook.log")
	f, _ := os.Create(logs)
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.proc = cmd
	e.t.Cleanup(func() {
		killGroup(cmd)
		cmd.Wait()
		if e.t.Failed() {
			data, _ := os.ReadFile(logs)
			e.t.Logf("webhook log:\n%s", tailLines(string(data), 40))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		e.t.Fatalf("webhook did not start: %v", err)
	}
	e.url, e.metricsURL = listenerURLs(e.t, line)
	return logs
}

// metrics scrapes /metrics.
func (e *hookEnv) metrics() string {
	e.t.Helper()
	resp, err := http.Get(e.metricsURL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("/metrics: HTTP %d: %s", resp.StatusCode, body)
	}
	return string(body)
}

// sample returns the value of the series written exactly as series
// (name{labels} in exposition order), or -1 when it is absent.
func sample(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// The webhook configured as a GitHub App (no token anywhere) looks up the
// repository's installation, mints installation tokens after the fake API
// checked its JWT, fetches and reports with them, and mints a new one
// before the old expires; /metrics, on its own listener, then counts the
// deliveries and deploys.
func TestWebhookGitHubAppAndMetrics(t *testing.T) {
	t.Parallel()
	e, root := newHookBase(t, hookRepo)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	// Tokens live 62 s, so the webhook mints a new one after 2 s (a minute
	// before expiry).
	e.gh.AddApp(githubapi.App{ID: hookAppID, Slug: "kplan-deploy", Key: &key.PublicKey, TokenTTL: 62 * time.Second,
		Installations: map[int64][]string{31337: {hookRepo}}})
	gate := &tokenGate{gh: e.gh}
	gitURL := gate.serve(t, githttp.Serve(t, root, "").URL)

	e.config = filepath.Join(t.TempDir(), "webhook.yaml")
	cfg := fmt.Sprintf(`repositories:
  - name: %s
    branches:
      - name: main
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: %s
            reconcileTimeout: 20s
gitBaseURL: %s
apiBaseURL: %s/api/v3/
resyncInterval: 1h
stateDir: %s
`, hookRepo, e.cluster.Kubeconfig, gitURL, e.gh.URL(), t.TempDir())
	os.WriteFile(e.config, []byte(cfg), 0o644)
	e.bin = buildWebhook(t)

	sha1 := e.commit("a", "b")
	e.startWithEnv("KPLAN_WEBHOOK_SECRET="+hookSecret,
		fmt.Sprint("KPLAN_GITHUB_APP_ID=", hookAppID), "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE="+keyFile)

	// Before any delivery: the series exist at 0, with the Go and process
	// collectors, on --metrics-listen; the listener GitHub reaches has
	// neither /metrics nor /drift.
	m := e.metrics()
	for _, p := range []string{"/metrics", "/drift"} {
		resp, err := http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the public listener: HTTP %d, want 404", p, resp.StatusCode)
		}
	}
	for _, s := range []string{
		`kplan_webhook_deliveries_total{event="push",outcome="enqueued"}`,
		`kplan_deploys_total{outcome="success",target="prod"}`,
	} {
		if v := sample(m, s); v != 0 {
			t.Errorf("%s = %v before any delivery, want 0", s, v)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "process_start_time_seconds"} {
		if !strings.Contains(m, "\n"+name+" ") {
			t.Errorf("/metrics has no %s", name)
		}
	}

	if code := e.send("push", pushPayload(t, hookRepo, strings.Repeat("0", 40), sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha1)
	eq(t, "ConfigMaps after merge 1", e.configMaps(), []string{"a", "b"})
	testkit.Eventually(t, "the App's success status on merge 1", time.Minute, func() bool {
		st := e.gh.Statuses("Codertocat", "Hello-World", sha1)
		return len(st) > 0 && st[len(st)-1].State == "success" && st[len(st)-1].Creator.Login == "kplan-deploy[bot]"
	})

	// Past the refresh time of the first token (ghinstallation renews a
	// token a minute before it expires, when it is next used): the next
	// merge is fetched and reported with a new one. The barrier is that
	// time, from the token the fake API minted, not a guess.
	first := e.gh.Minted()
	if len(first) == 0 {
		t.Fatal("no installation token minted for merge 1")
	}
	refresh := first[0].ExpiresAt.Add(-time.Minute)
	testkit.Eventually(t, "the first token's refresh time, "+refresh.Format(time.RFC3339Nano), time.Minute, func() bool { return time.Now().After(refresh) })
	sha2 := e.commit("a", "c")
	// As GitHub does, the commit's pulls endpoint names the merged PR: the
	// push of merge 1 may still be queued (the deploy at start took sha1)
	// and deploy sha2 before the PR's delivery, whose report then finds
	// its PR from the commit.
	merged := time.Now()
	e.gh.SeedPullForCommit("Codertocat", "Hello-World", sha2, githubapi.PullRequest{Number: 2, State: "closed", MergedAt: &merged, Base: githubapi.Branch{Ref: "main"}})
	if code := e.send("pull_request", mergedPRPayload(t, 2, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("merged PR: HTTP %d", code)
	}
	e.waitDeployed(sha2)
	eq(t, "ConfigMaps after merge 2", e.configMaps(), []string{"a", "c"})
	testkit.Eventually(t, "the App's comment on PR 2", time.Minute, func() bool {
		cs := e.gh.Comments("Codertocat", "Hello-World", 2)
		return len(cs) == 1 && cs[0].User.Login == "kplan-deploy[bot]"
	})
	minted := e.gh.Minted()
	if len(minted) < 2 {
		t.Errorf("%d installation tokens minted, want a refresh (2 or more)", len(minted))
	}
	for _, tok := range minted {
		if tok.Installation != 31337 {
			t.Errorf("a token for installation %d", tok.Installation)
		}
	}
	if used := gate.tokens(); len(used) < 2 {
		t.Errorf("git fetched with %d distinct tokens in turn, want a fresh one after the refresh", len(used))
	}
	lookups := 0
	for _, r := range e.gh.Requests() {
		if r.Path == "/repos/"+hookRepo+"/installation" && r.Status == http.StatusOK {
			lookups++
		}
	}
	if lookups != 1 {
		t.Errorf("the installation was looked up %d times, want once", lookups)
	}

	// A forged delivery is counted without its event header.
	if code := e.send("push", pushPayload(t, hookRepo, sha1, sha2), "", false); code != http.StatusUnauthorized {
		t.Errorf("forged delivery: HTTP %d", code)
	}
	m = e.metrics()
	for s, want := range map[string]float64{
		`kplan_webhook_deliveries_total{event="push",outcome="enqueued"}`:           1,
		`kplan_webhook_deliveries_total{event="pull_request",outcome="enqueued"}`:   1,
		`kplan_webhook_deliveries_total{event="unverified",outcome="unauthorized"}`: 1,
		`kplan_deploys_total{outcome="success",target="prod"}`:                      2,
		`kplan_deploys_total{outcome="failure",target="prod"}`:                      0,
		`kplan_deploy_duration_seconds_count{target="prod"}`:                        2,
		`kplan_objects_pruned_total{target="prod"}`:                                 1, // b
	} {
		if got := sample(m, s); got != want {
			t.Errorf("%s = %v, want %v", s, got, want)
		}
	}
	// Each deploy applied the Namespace and two ConfigMaps.
	if got := sample(m, `kplan_objects_applied_total{target="prod"}`); got != 6 {
		t.Errorf("objects applied = %v, want 6 (3 per deploy)", got)
	}
	if ts := sample(m, `kplan_target_last_success_timestamp_seconds{target="prod"}`); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("last success at %v", ts)
	}
	if strings.Contains(m, "ghs_") {
		t.Error("/metrics shows a token")
	}

	// Every token minted so far is revoked in the middle of a deploy
	// (GitHub answers 401 to them from then on): the deploy's reports are
	// answered 401, then re-sent with a freshly minted token, and arrive.
	// They used to be tried once and dropped.
	sha3 := e.commitSlow("a", "d")
	if code := e.send("push", pushPayload(t, hookRepo, sha2, sha3), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	testkit.Eventually(t, "the pending status of merge 3", time.Minute, func() bool {
		st := e.gh.Statuses("Codertocat", "Hello-World", sha3)
		return len(st) > 0 && st[len(st)-1].State == "pending"
	})
	mintedBefore := len(e.gh.Minted())
	for _, tok := range e.gh.Minted() {
		e.gh.Revoke(tok.Token)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.actAsDeploymentController(ctx)
	e.waitDeployed(sha3)
	testkit.Eventually(t, "the App's success status on merge 3, re-sent with a fresh token", time.Minute, func() bool {
		st := e.gh.Statuses("Codertocat", "Hello-World", sha3)
		return len(st) > 0 && st[len(st)-1].State == "success" && st[len(st)-1].Creator.Login == "kplan-deploy[bot]"
	})
	var reports []string
	for _, r := range e.gh.Requests() {
		if r.Method == http.MethodPost && (strings.HasSuffix(r.Path, "/statuses/"+sha3) || strings.HasSuffix(r.Path, "/statuses") && strings.Contains(r.Path, "/deployments/")) {
			reports = append(reports, fmt.Sprint(r.Status))
		}
	}
	// Whether a report itself meets the 401 depends on what else the
	// replica asks GitHub meanwhile (a new token may be minted first):
	// the reports must arrive, with a token minted after the revocation.
	// That a report answered 401 is held and re-sent with a fresh token is
	// pinned without the race by TestUnauthorizedReportIsResentWithFreshToken.
	if !slices.Contains(reports, "201") {
		t.Errorf("reports of merge 3 answered %v: want them to arrive after the revocation", reports)
	}
	if n := len(e.gh.Minted()); n <= mintedBefore {
		t.Errorf("no token minted after the 401 (%d minted in all)", n)
	}
}
