package webhook

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// free reports how many bytes of s can be taken now (to a chunk), leaving
// s as it was.
func free(s interface {
	TryAcquire(int64) bool
	Release(int64)
}, size int64) int64 {
	for n := size; n > 0; n -= chunkSize {
		if s.TryAcquire(n) {
			s.Release(n)
			return n
		}
	}
	return 0
}

// The budget's rules, with a small budget: 64 chunks, 32 of them for
// tails (the bytes past each body's first headBytes = 16 chunks).
func TestBodyBudget(t *testing.T) {
	const (
		total = 64 * chunkSize
		tails = 32 * chunkSize
		wait  = 100 * time.Millisecond
	)
	for _, tc := range []struct {
		name       string
		heldHeads  int64         // chunks other bodies hold in their heads
		heldTails  int64         // chunks other bodies hold in their tails
		freeAfter  time.Duration // other bodies release everything after this (0: never)
		size       int           // the body read
		declared   int64         // its Content-Length; 0 stands for unknown (-1)
		err        error
		unread     bool          // refused before a byte was read
		minTook    time.Duration // it waited at least this long
		chargedMax int64         // chunks it was charged while reading, at most
	}{
		{name: "empty body", size: 0, chargedMax: 0},
		{name: "small body", size: 20 << 10, chargedMax: 2},
		{name: "a body fills its last chunk exactly", size: 2 * chunkSize, chargedMax: 2},
		{name: "tails full: a small body still fits", heldHeads: 16, heldTails: 32, size: headBytes, chargedMax: 16},
		{name: "tails full: a large body is refused without waiting", heldHeads: 16, heldTails: 32, size: headBytes + 1, err: errBusy},
		{name: "large body within the tails", heldTails: 16, size: headBytes + 16*chunkSize, chargedMax: 33},
		{name: "large body past the tails", heldTails: 16, size: headBytes + 16*chunkSize + 1, err: errBusy},
		{name: "declared large body within the tails", heldTails: 16, size: headBytes + 16*chunkSize, declared: headBytes + 16*chunkSize, chargedMax: 32},
		{name: "declared large body past the tails: refused before a byte is read", heldTails: 16, size: headBytes + 16*chunkSize + 1,
			declared: headBytes + 16*chunkSize + 1, err: errBusy, unread: true},
		{name: "declared small body, tails full", heldHeads: 16, heldTails: 32, size: 100, declared: 100, chargedMax: 1},
		{name: "all full: a small body waits, then is refused", heldHeads: 32, heldTails: 32, size: 100, err: errBusy, minTook: wait},
		{name: "all full: a small body gets room freed while it waits", heldHeads: 32, heldTails: 32, freeAfter: wait / 4, size: 100, chargedMax: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBodyBudget(total, tails, wait)
			b.total.Acquire(context.Background(), (tc.heldHeads+tc.heldTails)*chunkSize)
			b.tails.Acquire(context.Background(), tc.heldTails*chunkSize)
			var held atomic.Int64 // chunks the other bodies hold
			held.Store(tc.heldHeads + tc.heldTails)
			freed := make(chan struct{})
			if tc.freeAfter > 0 {
				time.AfterFunc(tc.freeAfter, func() {
					held.Store(0)
					b.tails.Release(tc.heldTails * chunkSize)
					b.total.Release((tc.heldHeads + tc.heldTails) * chunkSize)
					close(freed)
				})
			} else {
				close(freed)
			}
			in := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			start := time.Now()
			var charged, reads int64
			declared := tc.declared
			if declared == 0 {
				declared = -1
			}
			bd, err := b.read(context.Background(), &probe{r: iotest.HalfReader(bytes.NewReader(in)), at: func() {
				// while reading: what this body holds is what the budget lost
				charged = max(charged, (total-free(b.total, total))/chunkSize-held.Load())
				reads++
			}}, declared)
			took := time.Since(start)
			if !errors.Is(err, tc.err) {
				t.Fatalf("read: %v, want %v", err, tc.err)
			}
			if tc.unread != (reads == 0) {
				t.Errorf("%d reads, want reads %v", reads, !tc.unread)
			}
			if took < tc.minTook || took > tc.minTook+time.Second {
				t.Errorf("took %v, want at least %v and not much more", took, tc.minTook)
			}
			if err == nil {
				if got := bd.bytes(); !bytes.Equal(got, in) {
					t.Errorf("read %d bytes back, want the %d written", len(got), len(in))
				}
				if charged > tc.chargedMax {
					t.Errorf("charged %d chunks, want at most %d", charged, tc.chargedMax)
				}
				bd.release()
			}
			<-freed
			heldTails := tc.heldTails
			if tc.freeAfter > 0 {
				heldTails = 0
			}
			if got, want := free(b.total, total), total-held.Load()*chunkSize; got != want {
				t.Errorf("after the read %d bytes of the budget are free, want %d: chunks leaked", got, want)
			}
			if got, want := free(b.tails, tails), tails-heldTails*chunkSize; got != want {
				t.Errorf("after the read %d bytes of the tails are free, want %d", got, want)
			}
		})
	}
}

// probe calls at before every Read.
type probe struct {
	r  io.Reader
	at func()
}

func (p *probe) Read(b []byte) (int, error) {
	p.at()
	return p.r.Read(b)
}

// A body is charged for the bytes that arrived, not for what it declares:
// a client that sent one byte of a 25 MB body holds one chunk. Tails
// yield to bodies waiting for their first bytes.
func TestBodyChargedAsItArrives(t *testing.T) {
	const total, tails = 2 * MaxBodyBytes, MaxBodyBytes
	b := newBodyBudget(total, tails, time.Minute)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		bd, err := b.read(context.Background(), pr, MaxBodyBytes)
		pr.CloseWithError(errors.New("the reader is done")) // unblocks the writer
		if err == nil {
			err = fmt.Errorf("read all %d bytes", bd.n)
		}
		bd.release()
		done <- err
	}()
	pw.Write([]byte{'x'})
	testkit.Eventually(t, "one chunk charged for the byte", 5*time.Second, func() bool { return free(b.total, total) == total-chunkSize })
	pw.Write(make([]byte, headBytes+chunkSize)) // into the tails
	testkit.Eventually(t, "two tail chunks charged", 5*time.Second, func() bool { return free(b.tails, tails) == tails-2*chunkSize })
	if got := free(b.total, total); got != total-18*chunkSize {
		t.Errorf("after headBytes+chunkSize+1 bytes, %d chunks used, want 18", (total-got)/chunkSize)
	}
	// Fill the budget and make a small body wait: the large body's next
	// tail chunk is refused, though the tails have room, and its memory
	// goes to the waiting small body.
	b.total.Acquire(context.Background(), free(b.total, total))
	small := make(chan error, 1)
	go func() {
		bd, err := b.read(context.Background(), strings.NewReader("small"), 5)
		bd.release()
		small <- err
	}()
	testkit.Eventually(t, "a waiter queued", 5*time.Second, func() bool { return !b.total.TryAcquire(0) })
	pw.Write(make([]byte, chunkSize)) // fills the current chunk and asks for the next
	if err := <-done; !errors.Is(err, errBusy) {
		t.Errorf("the large body, with a small one waiting: %v, want busy", err)
	}
	if err := <-small; err != nil {
		t.Errorf("the small body: %v", err)
	}
}

func TestBodySignature(t *testing.T) {
	b := newBodyBudget(64*chunkSize, 32*chunkSize, time.Second)
	for _, size := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, headBytes + 3*chunkSize + 7} {
		in := bytes.Repeat([]byte{'a', 'b', 'c'}, size/3+1)[:size]
		bd, err := b.read(context.Background(), bytes.NewReader(in), -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			sig  string
			want bool
		}{
			{sign(secret, in), true},
			{strings.TrimPrefix(sign(secret, in), "sha256="), true}, // as github.ValidateSignature, the prefix is checked by the caller
			{sign("other", in), false},
			{sign(secret, append(slices.Clone(in), 'x')), false},
			{"sha256=", false},
			{"sha256=zz", false},
			{sign(secret, in)[:20], false},
		} {
			if got := (github.Receiver{}).Verify(forge.Delivery{Credential: tc.sig}, bd.each, []byte(secret)); got != tc.want {
				t.Errorf("%d bytes, signature %.20q: %v, want %v", size, tc.sig, got, tc.want)
			}
		}
		bd.release()
	}
}

// slowPost opens a connection and sends a POST /webhook whose body
// arrives a byte every interval; declared is its Content-Length, -1 for
// chunked. The answer is sent on the returned channel.
func slowPost(t *testing.T, addr string, declared int, interval time.Duration, stop <-chan struct{}) <-chan *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST /webhook HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\n"
	if declared >= 0 {
		head += fmt.Sprintf("Content-Length: %d\r\n", declared)
	} else {
		head += "Transfer-Encoding: chunked\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			b := "{"
			if declared < 0 {
				b = "1\r\n{\r\n"
			}
			if _, err := io.WriteString(conn, b); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	answer := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			resp = &http.Response{Status: err.Error()}
		}
		answer <- resp
	}()
	return answer
}

// Slow clients cannot starve deliveries: while 48 connections trickle
// their bodies a byte every 100 ms (declaring 25 MB, 2 KB, or nothing),
// signed deliveries are answered at once; the slow ones are answered 408
// when their body deadline passes.
func TestSlowBodies(t *testing.T) {
	const timeout = 2 * time.Second
	var rec recorder
	srv := httptest.NewServer(rec.handler(t, Options{BodyTimeout: timeout}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	var answers []<-chan *http.Response
	for i := range 48 {
		answers = append(answers, slowPost(t, addr, []int{MaxBodyBytes, 2000, -1}[i%3], 100*time.Millisecond, stop))
	}
	body := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
	for i := 0; time.Since(start) < timeout/2; i++ {
		req := post("push", fmt.Sprint("valid-", i), body)
		req.RequestURI = ""
		req.URL, _ = req.URL.Parse(srv.URL + "/webhook")
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if took := time.Since(t0); resp.StatusCode != http.StatusAccepted || took > time.Second {
			t.Fatalf("delivery %d during the attack: HTTP %d after %v, want 202 within a second", i, resp.StatusCode, took)
		}
	}
	for i, a := range answers {
		select {
		case resp := <-a:
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("slow client %d: %s, want 408", i, resp.Status)
			}
		case <-time.After(timeout + 5*time.Second - time.Since(start)):
			t.Fatalf("slow client %d unanswered %v after it started", i, time.Since(start))
		}
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("the slow clients were answered after %v, before their deadline of %v", took, timeout)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	timeouts := 0
	for _, o := range rec.outcomes {
		if o == ":timeout" {
			timeouts++
		}
	}
	if timeouts != 48 {
		t.Errorf("%d :timeout outcomes, want 48: %v", timeouts, rec.outcomes)
	}
}

// When the budget has no room, a large body is answered 503 with
// Retry-After at once, whether it declares its length or not, while a
// small signed delivery still gets through; once room is back, large
// bodies are read again.
func TestBusy(t *testing.T) {
	var rec recorder
	h := rec.handler(t, Options{})
	h.bodies = newBodyBudget(64*chunkSize, 32*chunkSize, 100*time.Millisecond)
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	// A holds the whole tails: its head and 32 tail chunks, then waits.
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	aSize := headBytes + 32*chunkSize
	fmt.Fprintf(a, "POST /webhook HTTP/1.1\r\nHost: w\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: %d\r\n\r\n", aSize)
	a.Write(make([]byte, aSize-1))
	testkit.Eventually(t, "every tail chunk taken", 5*time.Second, func() bool { return free(h.bodies.tails, 32*chunkSize) == 0 })

	large := func(chunked bool) *http.Response {
		t.Helper()
		var body io.Reader = bytes.NewReader(make([]byte, 2*headBytes))
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook", body)
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("large body (chunked %v): %v", chunked, err)
		}
		resp.Body.Close()
		if took := time.Since(t0); took > time.Second {
			t.Errorf("large body (chunked %v) answered after %v", chunked, took)
		}
		return resp
	}
	for _, chunked := range []bool{false, true} {
		if resp := large(chunked); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("large body (chunked %v) while the tails are full: %s %v, want 503 with Retry-After", chunked, resp.Status, resp.Header)
		}
	}
	req := post("push", "small", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"}))
	req.RequestURI = ""
	req.URL, _ = req.URL.Parse(srv.URL + "/webhook")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("small signed delivery while the tails are full: %s, want 202", resp.Status)
	}

	// A completes (unsigned): its memory is back and large bodies are read.
	a.Write([]byte{0})
	aResp, err := http.ReadResponse(bufio.NewReader(a), nil)
	if err != nil || aResp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("A: %v %v, want 401", aResp, err)
	}
	testkit.Eventually(t, "the whole budget free again", 5*time.Second, func() bool { return free(h.bodies.total, 64*chunkSize) == 64*chunkSize })
	if resp := large(false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("large body with room: %s, want 401", resp.Status)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{":busy", ":busy", "push:enqueued", ":unauthorized", ":unauthorized"}; !reflect.DeepEqual(rec.outcomes, want) {
		t.Errorf("outcomes %v, want %v", rec.outcomes, want)
	}
}

func TestBodyOptions(t *testing.T) {
	cfg := testCfg(t)
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{BodyBudget: 2*MaxBodyBytes - 1}, "BodyBudget of 52428799 bytes is under 52428800"},
		{Options{BodyBudget: -1}, "negative"},
		{Options{BodyTimeout: -time.Second}, "negative"},
		{Options{BodyBudget: 2 * MaxBodyBytes}, ""},
		{Options{}, ""},
	} {
		tc.o.Secret, tc.o.Config, tc.o.Enqueue, tc.o.Receiver = []byte("s"), cfg, func(Intent) {}, github.Receiver{}
		h, err := New(tc.o)
		if tc.err == "" {
			if err != nil {
				t.Errorf("New(%d, %v): %v", tc.o.BodyBudget, tc.o.BodyTimeout, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%d, %v) = %v, want %q", tc.o.BodyBudget, tc.o.BodyTimeout, err, tc.err)
		}
		_ = h
	}
	h, _ := New(Options{Secret: []byte("s"), Config: cfg, Enqueue: func(Intent) {}, Receiver: github.Receiver{}})
	if h.timeout != DefaultBodyTimeout || free(h.bodies.total, DefaultBodyBudget) != DefaultBodyBudget || free(h.bodies.tails, DefaultBodyBudget) != DefaultBodyBudget/2 {
		t.Errorf("defaults: timeout %v", h.timeout)
	}
}

// The body deadline counts from the handler's start: a signed body that
// arrives in parts within it is accepted, one that stalls past it is
// answered 408, whatever it declares.
func TestBodyDeadline(t *testing.T) {
	const timeout = time.Second
	body := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
	for _, tc := range []struct {
		name    string
		parts   int           // the body is sent in this many parts
		pause   time.Duration // between parts
		chunked bool
		unsign  bool
		status  int
		outcome string
	}{
		{name: "at once", parts: 1, status: http.StatusAccepted, outcome: "push:enqueued"},
		{name: "in parts within the deadline", parts: 4, pause: timeout / 6, status: http.StatusAccepted, outcome: "push:enqueued"},
		{name: "chunked, in parts within the deadline", parts: 4, pause: timeout / 6, chunked: true, status: http.StatusAccepted, outcome: "push:enqueued"},
		{name: "unsigned, within the deadline", parts: 2, pause: timeout / 4, unsign: true, status: http.StatusUnauthorized, outcome: ":unauthorized"},
		{name: "past the deadline", parts: 3, pause: timeout * 3 / 4, status: http.StatusRequestTimeout, outcome: ":timeout"},
		{name: "chunked, past the deadline", parts: 3, pause: timeout * 3 / 4, chunked: true, status: http.StatusRequestTimeout, outcome: ":timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := httptest.NewServer(rec.handler(t, Options{BodyTimeout: timeout}))
			defer srv.Close()
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sig := sign(secret, body)
			if tc.unsign {
				sig = sign("guess", body)
			}
			head := "POST /webhook HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: d\r\nX-Hub-Signature-256: " + sig + "\r\n"
			if tc.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
			} else {
				head += fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
			}
			io.WriteString(conn, head)
			start := time.Now()
			go func() {
				for i := range tc.parts {
					if i > 0 {
						time.Sleep(tc.pause)
					}
					part := body[i*len(body)/tc.parts : (i+1)*len(body)/tc.parts]
					if tc.chunked {
						fmt.Fprintf(conn, "%x\r\n%s\r\n", len(part), part)
						if i == tc.parts-1 {
							io.WriteString(conn, "0\r\n\r\n")
						}
					} else {
						conn.Write(part)
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != tc.status {
				t.Errorf("%s after %v, want %d", resp.Status, took, tc.status)
			}
			if tc.status == http.StatusRequestTimeout && (took < timeout*9/10 || took > timeout+time.Second) {
				t.Errorf("answered after %v, want at the %v deadline", took, timeout)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if want := []string{tc.outcome}; !reflect.DeepEqual(rec.outcomes, want) {
				t.Errorf("outcomes %v, want %v", rec.outcomes, want)
			}
		})
	}
}

// Busy refusals are logged at most once a second, with how many were not.
func TestBusyLogSampling(t *testing.T) {
	var s sampler
	t0 := time.Unix(1000, 0)
	type got struct {
		log     bool
		skipped int64
	}
	var out []got
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond, 3 * time.Second} {
		log, n := s.allow(t0.Add(at))
		out = append(out, got{log, n})
	}
	want := []got{{true, 0}, {false, 0}, {false, 0}, {false, 0}, {true, 3}, {false, 0}, {true, 1}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got %v, want %v", out, want)
	}
}
