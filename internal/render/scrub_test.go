package render

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// leaks lists the forms in which an error could show secret.
func leaks(secret string) map[string]string {
	q := strconv.Quote(secret)
	b := fmt.Sprint([]byte(secret))
	return map[string]string{
		"raw":           secret,
		"go quoted":     q[1 : len(q)-1],
		"bytes":         b[1 : len(b)-1],
		"base64":        base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64 url":    base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64 rawurl": base64.RawURLEncoding.EncodeToString([]byte(secret)),
	}
}

// The scrubber hides a collected value in each form an error may print
// it in, and the forms in which kustomize quotes input whatever they hold.
func TestScrubberHidesEveryEncoding(t *testing.T) {
	const secret = "hunter2/é+s3cr3t\"x"
	for form, shown := range leaks(secret) {
		t.Run(form, func(t *testing.T) {
			var s scrubber
			s.add(secret)
			msg := "render app: value `" + shown + "` is wrong"
			got := s.scrub(msg)
			if strings.Contains(got, shown) || !strings.Contains(got, hidden) {
				t.Errorf("scrub(%q) = %q", msg, got)
			}
		})
	}
	// A Secret's data holds base64; an error may print it decoded.
	t.Run("decoded data", func(t *testing.T) {
		var s scrubber
		s.add(base64.StdEncoding.EncodeToString([]byte(secret)))
		if got := s.scrub("value " + secret); strings.Contains(got, "s3cr3t") {
			t.Errorf("got %q", got)
		}
	})
	// Values too short to be told from the message's words are left.
	t.Run("short", func(t *testing.T) {
		var s scrubber
		s.add("yes")
		if got := s.scrub("render app: yes"); got != "render app: yes" {
			t.Errorf("got %q", got)
		}
	})
	for name, tc := range map[string]struct{ msg, secret string }{
		"env line as bytes": {"env source files: [db.env]: line [80 65 83 83 61 104 117 110] has invalid utf8 bytes", "80 65 83 83"},
		"builtin config":    {"trouble configuring builtin PatchTransformer with config: `\npatch: |-\n  password: hunter2\n`: bad", "hunter2"},
		"go-quoted patch":   {`unable to parse SM or JSON patch from [patch: "kind: Secret\nstringData:\n  password: hunter2"]`, "hunter2"},
		"patch as a path":   {"'/repo/psm/kind: Secret\ndata:\n  password: aHVudGVy' doesn't exist", "aHVudGVy"},
		"literal":           {"invalid literal source hunter2-no-equals, expected key=value", "hunter2"},
	} {
		t.Run("form "+name, func(t *testing.T) {
			var s scrubber // nothing collected: the form alone hides it
			if got := s.scrub(tc.msg); strings.Contains(got, tc.secret) {
				t.Errorf("scrub(%q) = %q", tc.msg, got)
			}
		})
	}
}

// Real kustomize errors that quote Secret values and generator inputs,
// produced by krusty: unscrubbed they show the secret; a render's error
// shows it in no form.
func TestRenderErrorsLeakNoSecret(t *testing.T) {
	cases := map[string]struct {
		files  map[string]string
		secret string
	}{
		"malformed inline patch of a Secret": {map[string]string{
			"kustomization.yaml": "resources: [secret.yaml]\npatches:\n- patch: |-\n    apiVersion: v1\n    kind: Secret\n    metadata:\n      name: db\n    stringData:\n      password: hunter2-inline\n      token: [unclosed\n",
			"secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: x\n",
		}, "hunter2-inline"},
		"malformed inline strategic merge patch, base64 data": {map[string]string{
			"kustomization.yaml": "resources: [secret.yaml]\npatchesStrategicMerge:\n- |-\n  apiVersion: v1\n  kind: Secret\n  metadata:\n    name: db\n  data:\n    password: " + base64.StdEncoding.EncodeToString([]byte("hunter2-psm")) + "\n   bad: : :\n",
			"secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: x\n",
		}, "hunter2-psm"},
		"env file line with invalid UTF-8": {map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  envs: [db.env]\n",
			"db.env":             "PASSWORD=caf\xe9-s3cr3t-env\n",
		}, "s3cr3t-env"},
		"literal without a key": {map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  literals: [hunter2-literal]\n",
		}, "hunter2-literal"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for p, c := range tc.files {
				files["app/"+p] = c
			}
			s := testkit.Snapshot(t, "test", files)
			// As krusty reports it, the error shows the secret in some form.
			_, raw := renderOne(s.FS, "app", krusty.MakeDefaultOptions())
			if raw == nil {
				t.Fatal("krusty rendered it")
			}
			if !showsAny(raw.Error(), tc.secret) {
				t.Fatalf("krusty's error does not show the secret, so this case tests nothing: %v", raw)
			}
			got := renderAll(t, s)["app"].Err
			if got == nil {
				t.Fatal("rendered, want an error")
			}
			if showsAny(got.Error(), tc.secret) {
				t.Errorf("the error shows the secret: %v", got)
			}
			if !strings.Contains(got.Error(), "hidden") {
				t.Errorf("the error does not say what it hides: %v", got)
			}
		})
	}
}

// showsAny says whether msg holds secret in any form of leaks, or
// base64-encoded before being quoted.
func showsAny(msg, secret string) bool {
	for _, f := range leaks(secret) {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}
