package status

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// Whoever reaches the admin listener sends the headers the page reads
// (Accept, Authorization): whatever they are, the guarded page answers
// without a panic, lets in only the token (as a bearer token or basic
// authentication's password), never shows the token, and serves JSON
// that parses when it serves JSON. Seeds: raw requests in
// testdata/requests.
func FuzzRequest(f *testing.F) {
	for _, data := range fuzzseed.Files(f, "testdata/requests/*") {
		f.Add(data)
	}
	const token = "s3cr3t-T0ken"
	b := board()
	b.Declare(prod)
	h := Guard([]byte(token), Handler{Board: b})
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before any handler
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		_, pass, basic := req.BasicAuth()
		bearer, isBearer := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		allowed := (basic && pass == token) || (!basic && isBearer && strings.TrimSpace(bearer) == token)
		if (rec.Code == http.StatusOK) != allowed {
			t.Fatalf("HTTP %d for Authorization %q", rec.Code, req.Header.Values("Authorization"))
		}
		if strings.Contains(rec.Body.String(), token) {
			t.Fatalf("the answer shows the token:\n%s", rec.Body)
		}
		if rec.Code == http.StatusOK && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			var p Page
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("JSON that does not parse: %v", err)
			}
		}
	})
}
