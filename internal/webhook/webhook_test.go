package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/forge/github"
)

// fixtures are GitHub's published example payloads, copied into testdata
// (see its LICENCE.md) so that a clean clone tests on its own.
const fixtures = "testdata/github-webhooks"

const (
	secret   = "It's a Secret to Everybody"
	mergeSHA = "9049f1265b7d61be4a8904a9a27120d2064dab3b"
	pushSHA  = "6113728f27ae82c7b1a177c8d03f9e96e0adf246" // after of push/with-new-branch
)

// The fixtures' repository is Codertocat/Hello-World; the config spells it
// in lower case to check that names match case-insensitively.
const testConfig = `
gitBaseURL: http://127.0.0.1:9/git
repositories:
  - name: codertocat/hello-world
    branches:
      - name: main
        targets:
          - {name: web, overlay: overlays/web}
          - {name: db, overlay: overlays/db, prune: false}
  - name: octo-org/other
    branches:
      - name: main
        targets:
          - {name: other, overlay: .}
`

func testCfg(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fixture reads a payload and applies edits, given as dotted paths
// (pull_request.base.ref) to new values, keeping the rest of its shape.
func fixture(t testing.TB, name string, edits map[string]any) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep ids exactly as they are
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for path, v := range edits {
		keys := strings.Split(path, ".")
		m := doc
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				t.Fatalf("%s: no object at %s", name, path)
			}
			m = next
		}
		if _, ok := m[keys[len(keys)-1]]; !ok {
			t.Fatalf("%s: no field %s (edits keep the fixture's shape)", name, path)
		}
		m[keys[len(keys)-1]] = v
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sign(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// post builds a POST /webhook request as GitHub sends it.
func post(event, id string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", id)
	r.Header.Set("X-Hub-Signature-256", sign(secret, body))
	return r
}

// recorder collects what a handler enqueues and observes.
type recorder struct {
	mu       sync.Mutex
	intents  []Intent
	outcomes []string
}

func (rec *recorder) handler(t testing.TB, o Options) *Handler {
	t.Helper()
	if o.Secret == nil {
		o.Secret = []byte(secret)
	}
	if o.Config == nil {
		o.Config = testCfg(t)
	}
	o.Receiver = github.Receiver{}
	o.Enqueue = func(i Intent) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.intents = append(rec.intents, i)
	}
	o.Observe = func(event string, out Outcome) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.outcomes = append(rec.outcomes, event+":"+string(out))
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestDeliveries(t *testing.T) {
	cfg := testCfg(t)
	targets := cfg.Targets("codertocat/hello-world", "main")
	mergedPR := map[string]any{"pull_request.merged": true, "pull_request.merge_commit_sha": mergeSHA, "pull_request.base.ref": "main"}

	for _, tc := range []struct {
		name    string
		req     func(t *testing.T) *http.Request
		status  int
		body    string // a substring of the answer
		outcome string // what Observe saw
		want    []Intent
	}{
		{
			name: "push to a configured branch",
			req: func(t *testing.T) *http.Request {
				return post("push", "d-push", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"}))
			},
			status: http.StatusAccepted, body: "accepted: 2 target(s) of codertocat/hello-world@main to " + pushSHA, outcome: "push:enqueued",
			want: []Intent{{Repo: "codertocat/hello-world", Branch: "main", SHA: pushSHA,
				CloneURL: "http://127.0.0.1:9/git/codertocat/hello-world.git", DeliveryID: "d-push", Targets: targets}},
		},
		{
			name: "push from an organization, charset in Content-Type",
			req: func(t *testing.T) *http.Request {
				r := post("push", "d-org", fixture(t, "push/with-organization.payload.json", map[string]any{
					"ref": "refs/heads/main", "deleted": false, "after": mergeSHA}))
				r.Header.Set("Content-Type", "application/json; charset=utf-8")
				return r
			},
			status: http.StatusAccepted, outcome: "push:enqueued",
			want: []Intent{{Repo: "codertocat/hello-world", Branch: "main", SHA: mergeSHA,
				CloneURL: "http://127.0.0.1:9/git/codertocat/hello-world.git", DeliveryID: "d-org", Targets: targets}},
		},
		{
			name: "push, form-encoded",
			req: func(t *testing.T) *http.Request {
				payload := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
				r := post("push", "d-form", []byte(url.Values{"payload": {string(payload)}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				return r
			},
			status: http.StatusAccepted, outcome: "push:enqueued",
			want: []Intent{{Repo: "codertocat/hello-world", Branch: "main", SHA: pushSHA,
				CloneURL: "http://127.0.0.1:9/git/codertocat/hello-world.git", DeliveryID: "d-form", Targets: targets}},
		},
		{
			name: "merged pull request",
			req: func(t *testing.T) *http.Request {
				return post("pull_request", "d-pr", fixture(t, "pull_request/closed.payload.json", mergedPR))
			},
			status: http.StatusAccepted, outcome: "pull_request:enqueued",
			want: []Intent{{Repo: "codertocat/hello-world", Branch: "main", SHA: mergeSHA, PR: 2,
				CloneURL: "http://127.0.0.1:9/git/codertocat/hello-world.git", DeliveryID: "d-pr", Targets: targets}},
		},
		{
			name: "pull request closed without merging",
			req: func(t *testing.T) *http.Request {
				return post("pull_request", "d", fixture(t, "pull_request/closed.with-organization.payload.json", map[string]any{"pull_request.base.ref": "main"}))
			},
			status: http.StatusOK, body: "ignored: pull request closed without merging", outcome: "pull_request:ignored",
		},
		{
			name: "pull request opened",
			req: func(t *testing.T) *http.Request {
				return post("pull_request", "d", fixture(t, "pull_request/opened.payload.json", map[string]any{"pull_request.base.ref": "main"}))
			},
			status: http.StatusOK, body: "ignored: pull request opened", outcome: "pull_request:ignored",
		},
		{
			name: "merged into an unconfigured branch",
			req: func(t *testing.T) *http.Request {
				return post("pull_request", "d", fixture(t, "pull_request/closed.payload.json", map[string]any{
					"pull_request.merged": true, "pull_request.merge_commit_sha": mergeSHA}))
			},
			status: http.StatusOK, body: "ignored: branch master of Codertocat/Hello-World is not configured", outcome: "pull_request:ignored",
		},
		{
			name: "tag deleted",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/payload.json", nil))
			},
			status: http.StatusOK, body: "ignored: push to refs/tags/simple-tag, not a branch", outcome: "push:ignored",
		},
		{
			name: "tag pushed",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/tags/main"}))
			},
			status: http.StatusOK, body: "ignored: push to refs/tags/main, not a branch", outcome: "push:ignored",
		},
		{
			name: "branch deleted",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/payload.json", map[string]any{"ref": "refs/heads/main"}))
			},
			status: http.StatusOK, body: "ignored: branch main deleted", outcome: "push:ignored",
		},
		{
			name: "foreign repository",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{
					"ref": "refs/heads/main", "repository.full_name": "mallory/Hello-World"}))
			},
			status: http.StatusOK, body: "ignored: repository mallory/Hello-World is not configured", outcome: "push:ignored",
		},
		{
			name: "unconfigured branch",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/with-new-branch.payload.json", nil))
			},
			status: http.StatusOK, body: "ignored: branch master of Codertocat/Hello-World is not configured", outcome: "push:ignored",
		},
		{
			name: "other event",
			req: func(t *testing.T) *http.Request {
				return post("issue_comment", "d", fixture(t, "issue_comment/created.payload.json", nil))
			},
			status: http.StatusOK, body: "ignored: issue_comment events do not deploy", outcome: "issue_comment:ignored",
		},
		{
			name: "ping",
			req: func(t *testing.T) *http.Request {
				return post("ping", "d", fixture(t, "ping/payload.json", nil))
			},
			status: http.StatusOK, body: "pong", outcome: "ping:pong",
		},
		{
			name: "wrong signature",
			req: func(t *testing.T) *http.Request {
				r := post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"}))
				r.Header.Set("X-Hub-Signature-256", sign("not the secret", []byte("{}")))
				return r
			},
			status: http.StatusUnauthorized, body: "invalid signature", outcome: ":unauthorized",
		},
		{
			name: "body changed after signing",
			req: func(t *testing.T) *http.Request {
				body := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
				r := post("push", "d", body)
				r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(body, []byte(pushSHA), []byte(mergeSHA), 1)))
				return r
			},
			status: http.StatusUnauthorized, outcome: ":unauthorized",
		},
		{
			name: "missing signature",
			req: func(t *testing.T) *http.Request {
				r := post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"}))
				r.Header.Del("X-Hub-Signature-256")
				return r
			},
			status: http.StatusUnauthorized, body: "missing X-Hub-Signature-256", outcome: ":unauthorized",
		},
		{
			name: "SHA-1 signature only",
			req: func(t *testing.T) *http.Request {
				body := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
				r := post("push", "d", body)
				r.Header.Del("X-Hub-Signature-256")
				r.Header.Set("X-Hub-Signature", "sha1=0000")
				return r
			},
			status: http.StatusUnauthorized, outcome: ":unauthorized",
		},
		{
			name: "malformed JSON, validly signed",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", []byte(`{"ref": "refs/heads/main", "after": `))
			},
			status: http.StatusBadRequest, body: "malformed push payload", outcome: "push:malformed",
		},
		{
			name: "wrong field type, validly signed",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": 7}))
			},
			status: http.StatusBadRequest, body: "malformed push payload", outcome: "push:malformed",
		},
		{
			name: "malformed JSON of another event",
			req: func(t *testing.T) *http.Request {
				return post("issue_comment", "d", []byte(`{`))
			},
			status: http.StatusBadRequest, body: "malformed JSON payload", outcome: "issue_comment:malformed",
		},
		{
			name: "not a commit SHA",
			req: func(t *testing.T) *http.Request {
				return post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main", "after": "HEAD~1"}))
			},
			status: http.StatusBadRequest, body: `push payload: "HEAD~1" is not a commit SHA`, outcome: "push:malformed",
		},
		{
			name: "merged without merge_commit_sha",
			req: func(t *testing.T) *http.Request {
				return post("pull_request", "d", fixture(t, "pull_request/closed.payload.json", map[string]any{
					"pull_request.merged": true, "pull_request.merge_commit_sha": nil, "pull_request.base.ref": "main"}))
			},
			status: http.StatusBadRequest, body: `pull_request payload: "" is not a commit SHA`, outcome: "pull_request:malformed",
		},
		{
			name: "no event header",
			req: func(t *testing.T) *http.Request {
				return post("", "d", fixture(t, "ping/payload.json", nil))
			},
			status: http.StatusBadRequest, body: "missing X-GitHub-Event header", outcome: ":malformed",
		},
		{
			name: "unsupported content type",
			req: func(t *testing.T) *http.Request {
				r := post("push", "d", fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"}))
				r.Header.Set("Content-Type", "text/plain")
				return r
			},
			status: http.StatusUnsupportedMediaType, body: `unsupported Content-Type "text/plain"`, outcome: "push:malformed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			w := serve(rec.handler(t, Options{}), tc.req(t))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("answer %d %q, want %d containing %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			if !reflect.DeepEqual(rec.intents, tc.want) {
				t.Errorf("enqueued\n%+v\nwant\n%+v", rec.intents, tc.want)
			}
			if want := []string{tc.outcome}; !reflect.DeepEqual(rec.outcomes, want) {
				t.Errorf("observed %v, want %v", rec.outcomes, want)
			}
		})
	}
}

func TestReplayedDelivery(t *testing.T) {
	var rec recorder
	h := rec.handler(t, Options{})
	body := fixture(t, "push/with-new-branch.payload.json", map[string]any{"ref": "refs/heads/main"})
	if w := serve(h, post("push", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)); w.Code != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", w.Code, w.Body)
	}
	w := serve(h, post("push", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "duplicate delivery") {
		t.Errorf("replay: %d %q, want 200 duplicate delivery", w.Code, w.Body)
	}
	// Concurrent copies of a new delivery are enqueued once.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { serve(h, post("push", "concurrent", body)) })
	}
	wg.Wait()
	if len(rec.intents) != 2 {
		t.Errorf("%d intents, want 2 (one per distinct delivery)", len(rec.intents))
	}
	// A failed signature check does not record the ID: the genuine
	// delivery that follows is still accepted.
	forged := post("push", "later", body)
	forged.Header.Set("X-Hub-Signature-256", sign("guess", body))
	serve(h, forged)
	if w := serve(h, post("push", "later", body)); w.Code != http.StatusAccepted {
		t.Errorf("genuine delivery after a forged one with its ID: %d %s", w.Code, w.Body)
	}
}

func TestOversizedBody(t *testing.T) {
	for _, tc := range []struct {
		name          string
		contentLength bool
		maxRead       int64 // bytes the handler may read at most
	}{
		{"declared length", true, 0},
		{"chunked", false, MaxBodyBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			body := &countingReader{r: io.LimitReader(zeros{}, MaxBodyBytes+1<<20)}
			r := post("push", "big", nil)
			r.Body = io.NopCloser(body)
			r.ContentLength = -1
			if tc.contentLength {
				r.ContentLength = MaxBodyBytes + 1<<20
			}
			w := serve(rec.handler(t, Options{}), r)
			if w.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("answer %d %s, want 413", w.Code, w.Body)
			}
			if body.n > tc.maxRead {
				t.Errorf("read %d bytes, want at most %d", body.n, tc.maxRead)
			}
			if len(rec.intents) != 0 || !reflect.DeepEqual(rec.outcomes, []string{":too_large"}) {
				t.Errorf("intents %v, outcomes %v", rec.intents, rec.outcomes)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestHealth(t *testing.T) {
	var rec recorder
	notReady := errors.New("inventory informer not synced")
	ready := error(nil)
	h := rec.handler(t, Options{Ready: func() error { return ready }})
	for _, tc := range []struct {
		method, path string
		ready        error
		status       int
		body         string
	}{
		{"GET", "/healthz", notReady, 200, "ok\n"},
		{"GET", "/readyz", nil, 200, "ok\n"},
		{"GET", "/readyz", notReady, 503, "not ready: inventory informer not synced\n"},
		{"HEAD", "/healthz", nil, 200, ""},
		{"GET", "/webhook", nil, 405, ""},
		{"POST", "/healthz", nil, 405, ""},
		{"GET", "/", nil, 404, ""},
	} {
		ready = tc.ready
		w := serve(h, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || tc.body != "" && w.Body.String() != tc.body {
			t.Errorf("%s %s (ready: %v) = %d %q, want %d %q", tc.method, tc.path, tc.ready, w.Code, w.Body, tc.status, tc.body)
		}
	}
	// Without a Ready hook the server is ready.
	h2 := rec.handler(t, Options{})
	if w := serve(h2, httptest.NewRequest("GET", "/readyz", nil)); w.Code != 200 {
		t.Errorf("readyz without a hook: %d", w.Code)
	}
}

// TestLogs checks what a delivery logs: its identity and decision, never
// the secret, the signature or the body.
func TestLogs(t *testing.T) {
	var buf bytes.Buffer
	var rec recorder
	h := rec.handler(t, Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	body := fixture(t, "pull_request/closed.payload.json", map[string]any{
		"pull_request.merged": true, "pull_request.merge_commit_sha": mergeSHA, "pull_request.base.ref": "main"})
	good := post("pull_request", "d-1", body)
	bad := post("pull_request", "d-2", body)
	bad.Header.Set("X-Hub-Signature-256", sign("wrong", body))
	for _, r := range []*http.Request{good, bad} {
		serve(h, r)
	}

	logs := buf.String()
	for _, never := range []string{secret, sign(secret, body), sign("wrong", body)[7:], "Codertocat@users.noreply.github.com", `"body"`} {
		if strings.Contains(logs, never) {
			t.Errorf("logs contain %q:\n%s", never, logs)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), logs)
	}
	var first, second map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	for k, want := range map[string]any{"delivery": "d-1", "event": "pull_request", "repo": "Codertocat/Hello-World",
		"branch": "main", "sha": mergeSHA, "pr": float64(2), "outcome": "enqueued", "status": float64(202), "level": "INFO"} {
		if first[k] != want {
			t.Errorf("log %s = %v, want %v", k, first[k], want)
		}
	}
	for k, want := range map[string]any{"delivery": "d-2", "outcome": "unauthorized", "reason": "wrong signature", "level": "WARN"} {
		if second[k] != want {
			t.Errorf("log %s = %v, want %v", k, second[k], want)
		}
	}
}

func TestNew(t *testing.T) {
	cfg := testCfg(t)
	enqueue := func(Intent) {}
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{Config: cfg, Enqueue: enqueue}, "no secret"},
		{Options{Secret: []byte{}, Config: cfg, Enqueue: enqueue}, "no secret"},
		{Options{Secret: []byte("s"), Enqueue: enqueue}, "no config"},
		{Options{Secret: []byte("s"), Config: cfg}, "no Enqueue"},
		{Options{Secret: []byte("s"), Config: cfg, Enqueue: enqueue}, "no forge Receiver"},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%+v) = %v, want %q", tc.o, err, tc.err)
		}
	}
}

func TestDedupEviction(t *testing.T) {
	d := newDeliveries(3)
	var got []bool
	for _, id := range []string{"a", "b", "a", "c", "d", "b", "a", "d"} {
		got = append(got, d.add(id))
	}
	// "a" is forgotten once "d" arrives (three remembered), then "b" once "a" returns.
	want := []bool{true, true, false, true, true, false, true, false}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if len(d.ids) != 3 {
		t.Errorf("remembers %d IDs, want 3", len(d.ids))
	}
}

func ExampleNew() {
	cfg, _ := config.Parse("webhook.yaml", []byte(testConfig))
	intents := make(chan Intent, 100)
	h, err := New(Options{
		Secret:   []byte(secret),
		Config:   cfg,
		Receiver: github.Receiver{},
		Enqueue:  func(i Intent) { intents <- i },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := os.ReadFile(filepath.Join(fixtures, "ping/payload.json"))
	w := serve(h, post("ping", "1", body))
	fmt.Print(w.Code, " ", w.Body)
	// Output: 200 pong
}
