package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/leader"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"--version"}, func(string) string { return "" }, &stdout, &stderr)
	if err != nil || !strings.HasPrefix(stdout.String(), "kplan-webhook ") {
		t.Errorf("kplan-webhook --version: %v %q %q", err, stdout.String(), stderr.String())
	}
}

// --leader-elect refuses, at start and naming the flag to set, what would
// make a replica that cannot be reached or cannot campaign.
func TestLeaderElectFlags(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(cfg, []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, kubeconfig: /k}\nstateDir: "+t.TempDir()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"), 0o644)
	base := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t", "KUBECONFIG": kubeconfig, "POD_NAMESPACE": "kplan-system", "POD_IP": "127.0.0.1"}
	tests := []struct {
		name string
		args []string
		env  map[string]string // over base; "" unsets
		want string
	}{
		{"no namespace", nil, map[string]string{"POD_NAMESPACE": ""}, "set --leader-election-namespace or POD_NAMESPACE"},
		{"no address to advertise", []string{"--listen", "0.0.0.0:0"}, map[string]string{"POD_IP": ""}, "set --advertise-address or POD_IP"},
		{"advertise address without a port", []string{"--advertise-address", "10.0.0.1"}, nil, `--advertise-address "10.0.0.1": want host:port`},
		{"renew deadline not below the lease", []string{"--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "5s"}, nil, "--leader-elect-lease-duration (5s) > --leader-elect-renew-deadline (5s)"},
		{"no cluster for the Lease", nil, map[string]string{"KUBECONFIG": ""}, "KUBECONFIG is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			args := append([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--leader-elect"}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error containing %q", err, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("it said it listens: %q", stdout.String())
			}
		})
	}
}

// --shards refuses, before anything starts, a count that cannot work and
// shards without the Leases to hold them on.
func TestShardsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0", "--leader-elect"}, "--shards 0: want 1"},
		{[]string{"--shards", "100000", "--leader-elect"}, "at most 256"},
		{[]string{"--shards", "3"}, "--shards 3 needs --leader-elect"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"--config", "/nonexistent.yaml"}, tc.args...), func(string) string { return "" }, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// /metrics and /drift are served on --metrics-listen only: the listener
// GitHub reaches (--listen) answers 404 for them and still serves
// /healthz.
func TestMetricsListener(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	// Nothing listens on port 1: the deployer's fetches fail at once.
	if err := os.WriteFile(cfg, []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, kubeconfig: /k}\nstateDir: "+t.TempDir()+"\ngitBaseURL: http://127.0.0.1:1\napiBaseURL: http://127.0.0.1:1/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t"}
	line := serve(t, func(ctx context.Context, stdout io.Writer) error {
		return run(ctx, []string{"--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--drift-checks=false", "--live-plans=false"},
			func(k string) string { return env[k] }, stdout, io.Discard)
	})
	public, metrics, ok := listenerURLs(line)
	if !ok {
		t.Fatalf("no listener URLs in %q", line)
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, p := range []string{"/metrics", "/drift"} {
		if code, body := get(public + p); code != http.StatusNotFound {
			t.Errorf("GET %s on --listen: HTTP %d, want 404:\n%.300s", p, code, body)
		}
	}
	if code, _ := get(public + "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz on --listen: HTTP %d", code)
	}
	if code, body := get(metrics + "/metrics"); code != http.StatusOK || !strings.Contains(body, "kplan_webhook_") {
		t.Errorf("GET /metrics on --metrics-listen: HTTP %d:\n%.300s", code, body)
	}
	if code, body := get(metrics + "/drift"); code != http.StatusOK || !strings.Contains(body, `"targets"`) {
		t.Errorf("GET /drift on --metrics-listen: HTTP %d:\n%.300s", code, body)
	}
	if code, _ := get(metrics + "/webhook"); code != http.StatusNotFound {
		t.Errorf("GET /webhook on --metrics-listen: HTTP %d, want 404", code)
	}
}

// listenerURLs reads the public and the metrics listener's URLs from the
// line kplan-webhook prints when it listens.
func listenerURLs(line string) (public, metrics string, ok bool) {
	rest, ok := strings.CutPrefix(line, "kplan-webhook listening on ")
	if !ok {
		return "", "", false
	}
	public = strings.Fields(rest)[0]
	_, m, ok := strings.Cut(rest, "/metrics and /drift on ")
	if !ok {
		return "", "", false
	}
	return public, strings.TrimSpace(m), true
}

// panicWriter is an output with a bug: it panics when written to.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("injected: write") }

// A panic in kplan-webhook's run exits 1 with the panic, its stack and
// where to report it, never 2 (Go's status for a panic nobody recovers).
func TestCrashExitsOne(t *testing.T) {
	var stderr bytes.Buffer
	code := runMain(context.Background(), []string{"--version"}, func(string) string { return "" }, panicWriter{}, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"kplan-webhook crashed (a bug): " + crash.Marker + "injected: write", "\npanic(", "please report it, with the lines above, at " + crash.ReportURL} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A configuration file without apiVersion and kind still starts the
// webhook, which logs, naming the file, that it should be versioned; a
// versioned one logs nothing of the kind.
func TestUnversionedConfigWarns(t *testing.T) {
	const body = "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, kubeconfig: /k}\n"
	for _, tc := range []struct {
		name, head string
		warns      bool
	}{
		{"unversioned", "", true},
		{"versioned", "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "webhook.yaml")
			if err := os.WriteFile(cfg, []byte(tc.head+body+"stateDir: "+t.TempDir()+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// --leader-elect without a namespace stops run after the
			// configuration is read, before anything listens.
			env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t"}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--leader-elect"}, func(k string) string { return env[k] }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
				t.Fatalf("run: %v, want the missing namespace", err)
			}
			warned := strings.Contains(stderr.String(), `"level":"WARN","msg":"`+cfg+` has no apiVersion and kind: reading it as kplan.dev/v1alpha1 WebhookConfig`)
			if warned != tc.warns {
				t.Errorf("warned = %v, want %v; stderr:\n%s", warned, tc.warns, stderr.String())
			}
		})
	}
}

// --help lists every environment variable kplan-webhook reads: each one
// run asks getenv for, on its way to campaigning for a Lease, is named
// there (it listed none when it parsed flags with Go's flag package).
func TestHelpListsTheEnvironmentItReads(t *testing.T) {
	var help, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &help, &stderr); err != nil {
		t.Fatalf("--help: %v %s", err, stderr.String())
	}
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(cfg, []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, kubeconfig: /k}\nstateDir: "+t.TempDir()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t", "POD_NAMESPACE": "ns", "POD_IP": "127.0.0.1"}
	getenv := func(k string) string { read[k] = true; return env[k] }
	// No KUBECONFIG and not in a pod: it stops before the Lease.
	run(context.Background(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--leader-elect"}, getenv, io.Discard, io.Discard)
	if len(read) < 5 {
		t.Fatalf("run read only %v: the test no longer reaches the election", read)
	}
	for k := range read {
		if !strings.Contains(help.String(), "\n  "+k+" ") {
			t.Errorf("kplan-webhook reads %s, which --help does not list:\n%s", k, help.String())
		}
	}
}

// Single-dash long flags, which Go's flag package took and manifests
// written for it may use, still parse after the move to cobra.
func TestSingleDashFlagsStillParse(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, func(string) string { return "" }, &stdout, &stderr); err != nil || !strings.HasPrefix(stdout.String(), "kplan-webhook ") {
		t.Errorf("kplan-webhook -version: %v %q %q", err, stdout.String(), stderr.String())
	}
	err := run(context.Background(), []string{"--no-such-flag"}, func(string) string { return "" }, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--help") {
		t.Errorf("an unknown flag: %v, want an error pointing to --help", err)
	}
}

// serve runs the webhook (start, with its stdout) until the test ends and
// returns the first line it prints, the one naming its listeners.
func serve(t *testing.T, start func(ctx context.Context, stdout io.Writer) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- start(ctx, stdoutW)
		stdoutW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, stdoutR)
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// Every flag --help lists is named in the docs (docs/*.md), where a
// reader looks for what it does.
func TestFlagsDocumented(t *testing.T) {
	var help bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &help, io.Discard); err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs strings.Builder
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(data)
	}
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("%d flags found in --help: is the check blind?\n%s", len(flags), help.String())
	}
	for _, f := range flags {
		if f[1] != "help" && !regexp.MustCompile("`--"+regexp.QuoteMeta(f[1])+`\b`).MatchString(docs.String()) {
			t.Errorf("--%s is not named in docs/*.md", f[1])
		}
	}
}

// --max-parallel-deploys bounds the deploys of the process: the
// deployers of its terms and shards share one set of slots of that size,
// deployer.DefaultMaxParallel without the flag; a negative bound is
// refused.
func TestMaxParallelDeploys(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		err  string
	}{
		{nil, deployer.DefaultMaxParallel, ""},
		{[]string{"--max-parallel-deploys", "3"}, 3, ""},
		{[]string{"--max-parallel-deploys=0"}, 0, ""},
		{[]string{"--max-parallel-deploys", "-1"}, 0, "--max-parallel-deploys -1: want 0 (no limit) or more"},
	} {
		o, err := parseFlags(context.Background(), forgeTable(), tc.args, io.Discard, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		a := &app{flags: o, cfg: &config.Config{}, log: slog.New(slog.DiscardHandler), mirrors: &gitmirror.Mirrors{}, reg: prometheus.NewRegistry()}
		if err := a.wireDeploys(); err != nil {
			t.Fatal(err)
		}
		one, other := a.newDeployer(nil, nil, ""), a.newDeployer(nil, nil, "")
		if one.Slots != other.Slots || one.Slots.Limit() != tc.want {
			t.Errorf("%q: the deployers share slots %v, with a limit of %d, want %d", tc.args, one.Slots == other.Slots, one.Slots.Limit(), tc.want)
		}
	}
}

// The status page (/ and /status.json) is served on --metrics-listen
// only, beside /metrics; with KPLAN_ADMIN_TOKEN it and /drift ask for
// the token (bearer, or basic authentication's password) while /metrics
// stays open to Prometheus.
func TestStatusPageListenerAndToken(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	// Nothing listens on port 1: the deployer's fetches fail at once.
	if err := os.WriteFile(cfg, []byte("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, environment: production, kubeconfig: /k/prod-eu.yaml}\nstateDir: "+t.TempDir()+"\ngitBaseURL: http://127.0.0.1:1\napiBaseURL: http://127.0.0.1:1/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "s3cr3t-admin"
	env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t", "KPLAN_ADMIN_TOKEN": token}
	line := serve(t, func(ctx context.Context, stdout io.Writer) error {
		return run(ctx, []string{"--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--drift-checks=false", "--live-plans=false"},
			func(k string) string { return env[k] }, stdout, io.Discard)
	})
	public, admin, ok := listenerURLs(line)
	if !ok {
		t.Fatalf("no listener URLs in %q", line)
	}
	for _, tc := range []struct {
		name, url, auth, accept string
		code                    int
		contentType, says       string
	}{
		{"the page on the public listener", public + "/", "Bearer " + token, "", http.StatusNotFound, "", ""},
		{"its JSON on the public listener", public + "/status.json", "Bearer " + token, "", http.StatusNotFound, "", ""},
		{"no token", admin + "/", "", "", http.StatusUnauthorized, "", "KPLAN_ADMIN_TOKEN"},
		{"a wrong token", admin + "/", "Bearer nope", "", http.StatusUnauthorized, "", ""},
		{"a wrong basic password", admin + "/", "Basic " + base64.StdEncoding.EncodeToString([]byte("me:nope")), "", http.StatusUnauthorized, "", ""},
		{"bearer", admin + "/", "Bearer " + token, "text/html", http.StatusOK, "text/html; charset=utf-8", `data-target="prod"`},
		{"basic, as a browser sends it", admin + "/", "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+token)), "", http.StatusOK, "text/html; charset=utf-8", "Cluster prod-eu.yaml"},
		{"JSON by path", admin + "/status.json", "Bearer " + token, "", http.StatusOK, "application/json", `"environment": "production"`},
		{"JSON by Accept", admin + "/", "Bearer " + token, "application/json", http.StatusOK, "application/json", `"key": "prod"`},
		{"/drift without the token", admin + "/drift", "", "", http.StatusUnauthorized, "", ""},
		{"/drift with it", admin + "/drift", "Bearer " + token, "", http.StatusOK, "application/json", `"targets"`},
		{"/metrics stays open", admin + "/metrics", "", "", http.StatusOK, "", "kplan_webhook_"},
		{"no other path", admin + "/nothing", "Bearer " + token, "", http.StatusNotFound, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("HTTP %d, want %d:\n%.300s", resp.StatusCode, tc.code, body)
			}
			if tc.contentType != "" && resp.Header.Get("Content-Type") != tc.contentType {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tc.contentType)
			}
			if !strings.Contains(string(body), tc.says) {
				t.Errorf("the answer lacks %q:\n%.600s", tc.says, body)
			}
			if strings.Contains(string(body), token) {
				t.Errorf("the answer shows the token")
			}
		})
	}
}

// With --shards, a target and a target it depends on must be on one
// shard: their deployers run apart and could not wait for each other.
// Refused at start, naming both; on one shard, it goes on (to the
// missing namespace, here).
func TestShardsRefuseDependenciesAcrossShards(t *testing.T) {
	const shards = 4
	kc := "/k"
	ctxOn := func(shard int) string {
		for i := 0; ; i++ {
			c := fmt.Sprintf("ctx-%d", i)
			if leader.ShardOf(config.Settings{Kubeconfig: kc, Context: c}.Cluster(), shards) == shard {
				return c
			}
		}
	}
	for _, tc := range []struct {
		name, prodContext, want string
	}{
		{"across shards", ctxOn(1), "target prod dependsOn staging, but with --shards=4 their clusters are on different shards (1 and 0)"},
		{"one shard", ctxOn(0), "POD_NAMESPACE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "webhook.yaml")
			body := "apiVersion: kplan.dev/v1alpha1\nkind: WebhookConfig\nrepositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n" +
				"          - {name: staging, overlay: s, kubeconfig: " + kc + ", context: " + ctxOn(0) + "}\n" +
				"          - {name: prod, overlay: p, kubeconfig: " + kc + ", context: " + tc.prodContext + ", dependsOn: [staging]}\n" +
				"stateDir: " + t.TempDir() + "\n"
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t"}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--leader-elect", "--shards", fmt.Sprint(shards)},
				func(k string) string { return env[k] }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
