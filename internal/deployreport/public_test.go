package deployreport

import (
	"strings"
	"testing"
)

func TestPublicHidesAddresses(t *testing.T) {
	for _, tc := range []struct {
		msg, want string
	}{
		// Messages without addresses are shown as they are.
		{"some objects failed, were skipped or did not reconcile", "some objects failed, were skipped or did not reconcile"},
		{"app uses the remote resource https://github.com/example/config//base?ref=v1 (in app/kustomization.yaml); remote bases are off",
			"app uses the remote resource https://github.com/example/config//base?ref=v1 (in app/kustomization.yaml); remote bases are off"},
		{`refusing to apply: it would prune all 2 objects ResourceGroup default/inventory-prod`, `refusing to apply: it would prune all 2 objects ResourceGroup default/inventory-prod`},
		{`image postgres:16 and deployed-at 2024-01-01T10:30:00Z`, `image postgres:16 and deployed-at 2024-01-01T10:30:00Z`},
		// The cluster cannot be reached.
		{`Get "https://10.96.0.1:443/api?timeout=32s": dial tcp 10.96.0.1:443: i/o timeout`, "cannot reach the cluster's API server" + logsPointer},
		{`dial tcp 127.0.0.1:6443: connect: connection refused`, "cannot reach the cluster's API server" + logsPointer},
		{`Patch "https://[::1]:6443/apis/kpt.dev/v1alpha1/namespaces/x/resourcegroups/y": EOF`, "cannot reach the cluster's API server" + logsPointer},
		{`Get "https://api.prod.example.com:6443/api": dial tcp: lookup api.prod.example.com on 10.0.0.10:53: no such host`, "cannot reach the cluster's API server" + logsPointer},
		{`Get "https://kubernetes.default.svc/api": context deadline exceeded`, "cannot reach the cluster's API server" + logsPointer},
		// Other classes.
		{`Get "https://10.0.0.1:6443/api": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			"the cluster's API server presented a certificate the webhook does not trust" + logsPointer},
		{`Internal error occurred: failed calling webhook "validate.example.io": failed to call webhook: Post "https://example-webhook.example.svc:443/validate?timeout=10s": no endpoints available`,
			"an admission webhook in the cluster could not be called" + logsPointer},
		{`fetch main from http://127.0.0.1:41234/o/r.git: git fetch: fatal: unable to access`, "cannot fetch the repository" + logsPointer},
		{`the server has asked for the client to provide credentials (Unauthorized) at https://10.1.2.3:6443`, "the cluster's API server refused the webhook's credentials" + logsPointer},
		{`an error on the server ("bad gateway") from 192.168.1.20`, "the cluster's API server could not complete a request" + logsPointer},
	} {
		got := Public(tc.msg)
		if got != tc.want {
			t.Errorf("Public(%q)\n = %q\nwant %q", tc.msg, got, tc.want)
		}
		if got != tc.msg && address.MatchString(got) {
			t.Errorf("Public(%q) still has an address: %q", tc.msg, got)
		}
		if len(got) > 140 && !strings.HasPrefix(tc.msg, got) {
			t.Errorf("Public(%q) is longer than a commit status description", tc.msg)
		}
	}
}
