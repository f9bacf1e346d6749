package liveplan

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// What client-go, net and crypto/tls say of an unreachable or unexpected
// API server loses its addresses on /drift; a file and line keeps them.
func TestScrubAddresses(t *testing.T) {
	tests := []struct{ in, want string }{
		{`Get "https://10.0.0.1:6443/api/v1/namespaces/app?timeout=32s": dial tcp 10.0.0.1:6443: connect: connection refused`,
			`Get "<cluster>": dial tcp <cluster>: connect: connection refused`},
		{"dial tcp: lookup api.prod.example.com on 10.96.0.10:53: no such host",
			"dial tcp: lookup <cluster> on <cluster>: no such host"},
		{"tls: failed to verify certificate: x509: certificate is valid for kubernetes, kubernetes.default, not api.prod.example.com",
			"tls: failed to verify certificate: x509: certificate is valid for <cluster>, not <cluster>"},
		{`Get "https://[fd00::1]:6443/version": EOF; then [fd00::2]:6443 and fd00::3`, `Get "<cluster>": EOF; then <cluster> and <cluster>`},
		{"dial tcp kubernetes.default.svc.cluster.local:443: i/o timeout", "dial tcp <cluster>: i/o timeout"},
		{"fetch git@git.corp.internal:org/repo.git: denied by kube-api.internal", "fetch git@<cluster>:org/repo.git: denied by <cluster>"},
		{"render app at the branch's tip 1a2b3c4: app/kustomization.yaml:12: unknown field", "render app at the branch's tip 1a2b3c4: app/kustomization.yaml:12: unknown field"},
	}
	for _, tc := range tests {
		if got := ScrubAddresses(tc.in); got != tc.want {
			t.Errorf("ScrubAddresses(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// GET /drift serves a failed check's error without the API server's URL.
func TestDriftServesErrorsWithoutAddresses(t *testing.T) {
	d := &Drift{}
	d.record(DriftStatus{Target: "prod", Err: `list apps/v1 Deployment: Get "https://10.0.0.1:6443/apis/apps/v1/deployments": dial tcp 10.0.0.1:6443: connect: connection refused`})
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest("GET", "/drift", nil))
	body := rec.Body.String()
	if strings.Contains(body, "10.0.0.1") || strings.Contains(body, "6443") || !strings.Contains(body, "<cluster>") || !strings.Contains(body, "connection refused") {
		t.Errorf("GET /drift:\n%s", body)
	}
	if got := d.Status()[0].Err; !strings.Contains(got, "https://10.0.0.1:6443") {
		t.Errorf("the recorded error %q lost the URL (the log and Status keep it)", got)
	}
}
