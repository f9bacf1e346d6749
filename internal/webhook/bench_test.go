package webhook

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/forge/github"
)

// BenchmarkDeliveries sends b.N signed push deliveries, each with its own
// delivery ID, to the handler on a loopback listener from a fixed number
// of concurrent clients, as GitHub would on a busy organization, and
// reports acknowledgements per second and latency percentiles: with no
// attack, while 64 connections trickle unsigned bodies a byte every
// 100 ms (attack=slow), and while 128 clients send unsigned 25 MB bodies
// as fast as they can (attack=flood; busy-ops is how many of those were
// refused 503 per delivery).
//
//	go test -run '^$' -bench Deliveries ./internal/webhook
func BenchmarkDeliveries(b *testing.B) {
	for _, attack := range []string{"none", "slow", "flood"} {
		for _, clients := range []int{1, 8, 32} {
			if attack != "none" && clients != 8 {
				continue // the attacks are measured against one load
			}
			b.Run(fmt.Sprintf("attack=%s/clients=%d", attack, clients), func(b *testing.B) { benchDeliveries(b, attack, clients) })
		}
	}
}

func benchDeliveries(b *testing.B, attack string, clients int) {
	intents := make(chan Intent, 1024)
	var drained sync.WaitGroup
	drained.Go(func() {
		for range intents {
		}
	})
	var busy atomic.Int64
	h, err := New(Options{
		Secret:   []byte(secret),
		Config:   testCfg(b),
		Receiver: github.Receiver{},
		Enqueue:  func(i Intent) { intents <- i },
		Logger:   slog.New(slog.NewJSONHandler(io.Discard, nil)), // production logs one line per delivery
		Observe: func(_ string, o Outcome) {
			if o == Busy {
				busy.Add(1)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h) // 127.0.0.1 only
	defer srv.Close()
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients},
	}
	defer client.CloseIdleConnections()

	stop := make(chan struct{})
	var attackers sync.WaitGroup
	switch attack {
	case "slow":
		ready := make(chan struct{})
		attackers.Go(func() { slowAttack(b, srv.URL, 64, ready, stop) })
		<-ready
	case "flood":
		// The flood comes from another process, as an attacker's would:
		// in this one it would compete with the handler for the Go
		// scheduler, which no remote client can.
		flooder := exec.Command(os.Args[0])
		flooder.Env = append(os.Environ(), floodURLEnv+"="+srv.URL)
		flooder.Stderr = os.Stderr
		out, err := flooder.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		in, err := flooder.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := flooder.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // all flooders started
			b.Fatal(err)
		}
		attackers.Go(func() {
			<-stop
			in.Close()
			flooder.Wait()
		})
	}

	body := fixture(b, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
	sig := sign(secret, body)
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failures atomic.Int64

	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	busy.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "push")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", i))
				req.Header.Set("X-Hub-Signature-256", sig)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				latencies[i] = time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusAccepted {
					if failures.Add(1) == 1 {
						b.Errorf("delivery %d: %v %v", i, err, resp)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	refused := busy.Load()
	close(stop)
	attackers.Wait()
	close(intents)
	drained.Wait()

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(failures.Load()), "failures")
	if attack == "flood" {
		b.ReportMetric(float64(refused)/float64(b.N), "busy/op")
	}
}

// slowAttack holds n connections that send an unsigned POST /webhook's
// headers, declaring 25 MB, and then a byte every 100 ms, until stop;
// ready is closed once all are open.
func slowAttack(b *testing.B, url string, n int, ready chan<- struct{}, stop <-chan struct{}) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	head := fmt.Sprintf("POST /webhook HTTP/1.1\r\nHost: bench\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n",
		strings.Repeat("0", 64), MaxBodyBytes)
	for range n {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			b.Error(err)
			close(ready)
			return
		}
		io.WriteString(c, head)
		conns = append(conns, c)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for first := true; ; first = false {
		for _, c := range conns {
			c.Write([]byte{'{'})
		}
		if first {
			close(ready)
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// floodURLEnv, set, makes the test binary the flooding process of
// BenchmarkDeliveries instead of running tests.
const floodURLEnv = "KPLAN_BENCH_FLOOD_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(floodURLEnv); url != "" {
		flooder(url)
		return
	}
	os.Exit(m.Run())
}

// flooder floods the webhook at url with 128 clients sending unsigned
// 25 MB bodies until its stdin closes, and prints a line once all have
// started.
func flooder(url string) {
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	ready := make(chan struct{})
	go func() {
		<-ready
		fmt.Println("flooding")
	}()
	floodAttack(url, 128, ready, stop)
}

// floodAttack runs n clients that each send unsigned 25 MB bodies, one
// after the other, until stop; ready is closed once all n have started.
func floodAttack(url string, n int, ready chan<- struct{}, stop <-chan struct{}) {
	payload := make([]byte, MaxBodyBytes)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	var started, wg sync.WaitGroup
	started.Add(n)
	for range n {
		wg.Go(func() {
			first := true
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, url+"/webhook", bytes.NewReader(payload))
				req.Header.Set("X-GitHub-Event", "push")
				req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
				if first {
					started.Done()
					first = false
				}
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	started.Wait()
	close(ready)
	wg.Wait()
}
