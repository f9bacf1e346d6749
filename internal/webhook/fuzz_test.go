package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// Anyone can POST to /webhook: whatever the headers and body, the handler
// answers with a status and never panics; only a correctly signed
// delivery ever becomes an intent. Seeds: GitHub's example payloads, each
// signed and not.
func FuzzDelivery(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s: %v", fixtures, err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		event := filepath.Base(filepath.Dir(file))
		f.Add(event, body, true, "", "application/json")
		f.Add(event, body, false, "sha256=00", "application/x-www-form-urlencoded")
	}
	f.Fuzz(func(t *testing.T, event string, body []byte, signed bool, signature, contentType string) {
		rec := &recorder{}
		h := rec.handler(t, Options{LivePlan: func(i Intent) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.intents = append(rec.intents, i)
		}})
		r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		for k, v := range map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": "fuzz", "Content-Type": contentType} {
			r.Header[k] = []string{v} // as sent: unchecked by Header.Set
		}
		r.Header["X-Hub-Signature-256"] = []string{signature}
		if signed {
			r.Header["X-Hub-Signature-256"] = []string{sign(secret, body)}
		}
		w := serve(h, r)
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
		if !signed && len(rec.intents) > 0 {
			t.Fatalf("an unsigned delivery became intents %+v", rec.intents)
		}
	})
}
