package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/webhook"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// podMemoryLimit is the webhook container's memory limit in deploy/.
const podMemoryLimit = 1 << 30

// newIngressEnv runs the webhook binary with a target that never deploys
// (its repository is on a closed port), to keep the attack tests light:
// signed pushes to main are still accepted (202) and enqueued.
func newIngressEnv(t *testing.T) *hookEnv {
	e := &hookEnv{t: t}
	e.gh = githubapi.New()
	t.Cleanup(e.gh.Close)
	e.gh.AddToken(hookToken, githubapi.Identity{Login: "kplan[bot]"})
	e.config = filepath.Join(t.TempDir(), "webhook.yaml")
	cfg := fmt.Sprintf(`repositories:
  - name: %s
    cloneURL: http://127.0.0.1:9/%s.git
    branches:
      - name: main
        targets:
          - {name: prod, overlay: app, kubeconfig: %s}
gitBaseURL: http://127.0.0.1:9
apiBaseURL: %s/
resyncInterval: 1h
stateDir: %s
`, hookRepo, hookRepo, filepath.Join(t.TempDir(), "no-kubeconfig"), e.gh.URL(), t.TempDir())
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.bin = buildWebhook(t)
	e.start()
	return e
}

// deliverWhile sends a signed push every interval until stop is closed and
// fails the test unless every one is answered 202 well within GitHub's
// 10 s delivery timeout (half of it: on an idle machine answers take
// milliseconds, but a CI machine running other tests can starve the
// webhook for seconds); it returns how many were sent and the slowest
// answer, which the README's figures come from.
// githubTimeout is how long GitHub waits for a delivery's answer.
const githubTimeout = 10 * time.Second

func (e *hookEnv) deliverWhile(stop <-chan struct{}, interval time.Duration) (int, time.Duration) {
	e.t.Helper()
	var slowest time.Duration
	for n := 0; ; n++ {
		select {
		case <-stop:
			return n, slowest
		case <-time.After(interval):
		}
		sha := fmt.Sprintf("%040x", n+1)
		t0 := time.Now()
		code := e.send("push", pushPayload(e.t, hookRepo, strings.Repeat("0", 40), sha), "", true)
		took := time.Since(t0)
		slowest = max(slowest, took)
		if code != http.StatusAccepted || took > githubTimeout/2 {
			e.t.Errorf("signed delivery %d during the attack: HTTP %d after %v, want 202 within %v", n, code, took, githubTimeout/2)
		}
	}
}

// peakRSS reads the process's peak resident set size (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// trickle opens a connection that sends a POST /webhook's headers, with a
// wrong signature, and then its body a byte every interval until stop;
// declared is the Content-Length, -1 for a chunked body. The answer's
// status line (or the read error) arrives on the returned channel.
func trickle(t *testing.T, addr string, declared int, interval time.Duration, stop <-chan struct{}) <-chan string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST /webhook HTTP/1.1\r\nHost: kplan\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: slow\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\n"
	if declared >= 0 {
		head += "Content-Length: " + strconv.Itoa(declared) + "\r\n"
	} else {
		head += "Transfer-Encoding: chunked\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() {
		b := "{"
		if declared < 0 {
			b = "1\r\n{\r\n"
		}
		for {
			if _, err := io.WriteString(conn, b); err != nil {
				return // answered and closed
			}
			select {
			case <-time.After(interval):
			case <-stop:
				return
			}
		}
	}()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answer <- err.Error()
			return
		}
		resp.Body.Close()
		answer <- resp.Status
	}()
	return answer
}

// 64 connections trickling their bodies a byte every 200 ms (declaring
// 25 MB, 2 KB, or chunked) do not keep signed deliveries waiting: each is
// answered 202 in time (deliverWhile) while they trickle. Each slow body is
// answered 408 when its 10 s deadline passes, and /metrics counts them.
func TestWebhookSlowBodyAttack(t *testing.T) {
	// Parallel: it spends its half minute waiting for the body timeout.
	t.Parallel()
	const slow = 64
	e := newIngressEnv(t)
	addr := strings.TrimPrefix(e.url, "http://")
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	var answers []<-chan string
	for i := range slow {
		answers = append(answers, trickle(t, addr, []int{webhook.MaxBodyBytes, 2000, -1}[i%3], 200*time.Millisecond, stop))
	}

	// Deliveries while every slow body is still arriving.
	sending := make(chan struct{})
	time.AfterFunc(webhook.DefaultBodyTimeout-2*time.Second, func() { close(sending) })
	n, slowest := e.deliverWhile(sending, 100*time.Millisecond)
	t.Logf("%d signed deliveries while %d bodies trickled, the slowest answered in %v", n, slow, slowest)
	if n < 20 {
		t.Errorf("only %d deliveries sent during the attack", n)
	}

	for i, a := range answers {
		select {
		case status := <-a:
			if !strings.HasPrefix(status, "408") {
				t.Errorf("slow body %d: %s, want 408", i, status)
			}
		case <-time.After(time.Until(start.Add(webhook.DefaultBodyTimeout + 10*time.Second))):
			t.Fatalf("slow body %d still unanswered %v after it started", i, time.Since(start))
		}
	}
	if took := time.Since(start); took < webhook.DefaultBodyTimeout {
		t.Errorf("slow bodies answered after %v, before their deadline", took)
	}
	m := e.metrics()
	for series, want := range map[string]float64{
		`kplan_webhook_deliveries_total{event="unverified",outcome="timeout"}`: slow,
		`kplan_webhook_deliveries_total{event="push",outcome="enqueued"}`:      float64(n),
	} {
		if got := sample(m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	t.Logf("peak RSS %d MiB", peakRSS(t, e.proc.Process.Pid)>>20)
}

// flooderSource is the flooding client, built without the race detector
// and run as its own process, as an attacker is: in the test process,
// instrumented, writing the bodies took it about 8 CPU seconds in 10 on
// the 2 cores it shares with the webhook. It keeps -n requests of -size
// byte unsigned bodies in flight on new connections to -addr, prints
// "flooding" once all are, and when its stdin closes prints
// "requests=R cut=C peak=P busy=B unauthorized=U".
const flooderSource = `package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "", "host:port")
	n := flag.Int("n", 128, "requests in flight")
	size := flag.Int("size", 25<<20, "body bytes")
	flag.Parse()
	body := make([]byte, *size)
	head := fmt.Sprintf("POST /webhook HTTP/1.1\r\nHost: kplan\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
		"X-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n", strings.Repeat("0", 64), *size)
	var stopped atomic.Bool
	var inFlight, peak, requests, cut, busy, unauthorized atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range *n {
		wg.Go(func() {
			for !stopped.Load() {
				cur := inFlight.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				if cur >= int64(*n) {
					once.Do(func() { fmt.Println("flooding") })
				}
				status := post(*addr, head, body)
				inFlight.Add(-1)
				requests.Add(1)
				switch status {
				case 0:
					cut.Add(1)
				case 503:
					busy.Add(1)
				case 401:
					unauthorized.Add(1)
				}
			}
		})
	}
	io.Copy(io.Discard, os.Stdin)
	stopped.Store(true)
	wg.Wait()
	fmt.Printf("requests=%d cut=%d peak=%d busy=%d unauthorized=%d\n", requests.Load(), cut.Load(), peak.Load(), busy.Load(), unauthorized.Load())
}

// post sends one request on a new connection, its body in one write, and
// returns the answer's status, 0 when none could be read.
func post(addr, head string, body []byte) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		return 0
	}
	conn.Write(body) // fails when the body is refused early; the answer may still be read
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
`

// 128 clients sending unsigned 25 MB bodies as fast as they can, over and
// over, neither keep signed deliveries waiting (each answered 202 within a
// second) nor take the webhook's memory near the pod's 1 GiB limit: the
// bodies it holds stay within its 128 MiB budget and the rest are
// answered 503 at once.
func TestWebhookBodyFlood(t *testing.T) {
	const (
		flooders = 128
		floodFor = 8 * time.Second
	)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "flooder.go"), []byte(flooderSource), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", "flooder", "flooder.go")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the flooder: %v\n%s", err, out)
	}
	e := newIngressEnv(t)

	flood := exec.Command(filepath.Join(dir, "flooder"), "-addr", strings.TrimPrefix(e.url, "http://"),
		"-n", strconv.Itoa(flooders), "-size", strconv.Itoa(webhook.MaxBodyBytes))
	stdin, _ := flood.StdinPipe()
	stdout, _ := flood.StdoutPipe()
	flood.Stderr = os.Stderr
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flood.Process.Kill(); flood.Wait() })
	out := bufio.NewReader(stdout)
	// Deliveries are measured once the flood is at full strength.
	if line, err := out.ReadString('\n'); err != nil || line != "flooding\n" {
		t.Fatalf("flooder: %q %v", line, err)
	}
	stop := make(chan struct{})
	time.AfterFunc(floodFor, func() { close(stop) })
	n, slowest := e.deliverWhile(stop, 100*time.Millisecond)
	stdin.Close()
	summary, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("flooder: %v", err)
	}
	var requests, cut, peak, busy, unauthorized int
	if _, err := fmt.Sscanf(summary, "requests=%d cut=%d peak=%d busy=%d unauthorized=%d", &requests, &cut, &peak, &busy, &unauthorized); err != nil {
		t.Fatalf("flooder: %q: %v", summary, err)
	}

	rss := peakRSS(t, e.proc.Process.Pid)
	t.Logf("%d signed deliveries during the flood, the slowest answered in %v; %d flood requests at most %d at once: %d answered 503, %d read whole and answered 401, %d cut off; webhook peak RSS %d MiB",
		n, slowest, requests, peak, busy, unauthorized, cut, rss>>20)
	if n < 20 {
		t.Errorf("only %d deliveries sent during the flood", n)
	}
	if rss >= podMemoryLimit {
		t.Errorf("peak RSS %d MiB, over the pod's limit of %d MiB", rss>>20, podMemoryLimit>>20)
	}
	m := e.metrics()
	if got := sample(m, `kplan_webhook_deliveries_total{event="unverified",outcome="busy"}`); got < flooders || got < float64(busy) {
		t.Errorf("%v flood bodies refused as busy, want at least %d and the %d the flooder saw: the flood did not saturate the budget", got, flooders, busy)
	}
	if got := sample(m, `kplan_webhook_deliveries_total{event="push",outcome="enqueued"}`); got != float64(n) {
		t.Errorf("%v deliveries enqueued, want %d", got, n)
	}
}
