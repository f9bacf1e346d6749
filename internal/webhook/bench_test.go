package webhook

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDeliveries sends b.N signed push deliveries, each with its own
// delivery ID, to the handler on a loopback listener from a fixed number
// of concurrent clients, as GitHub would on a busy organization, and
// reports acknowledgements per second and latency percentiles.
//
//	go test -run '^$' -bench Deliveries ./internal/webhook
func BenchmarkDeliveries(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchDeliveries(b, clients) })
	}
}

func benchDeliveries(b *testing.B, clients int) {
	intents := make(chan Intent, 1024)
	var drained sync.WaitGroup
	drained.Go(func() {
		for range intents {
		}
	})
	h, err := New(Options{
		Secret:  []byte(secret),
		Config:  testCfg(b),
		Enqueue: func(i Intent) { intents <- i },
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)), // production logs one line per delivery
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

	body := fixture(b, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
	sig := sign(secret, body)
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failures atomic.Int64

	b.SetBytes(int64(len(body)))
	b.ResetTimer()
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
}
