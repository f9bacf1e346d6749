package test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/githubapi"
)

// The danger rules as a reviewer meets them: each finding in the plan
// comment with its rule, the step failing under fail-on-dangerous after
// the comment is posted, and the PR label acknowledging them.
func TestActionDangerousChanges(t *testing.T) {
	statefulSet := func(size string) string {
		return "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  serviceName: db\n  replicas: 1\n  selector: {matchLabels: {app: db}}\n" +
			"  template:\n    metadata: {labels: {app: db}}\n    spec: {containers: [{name: db, image: 'postgres:16'}]}\n" +
			"  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: " + size + "}}}\n"
	}
	web := func(replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + replicas + "\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: 'web:1'}]}\n"
	}
	// base64 of s3cr3t-one and s3cr3t-two: neither may show, in any form.
	secret := func(password string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nimmutable: true\ndata:\n  password: " + password + "\n"
	}
	// The repository turns scale-to-zero off, on base and head: the
	// Deployment scaled to 0 is a change, not a finding.
	kplanYAML := "dangerous:\n  disable: [scale-to-zero]\n"
	base := map[string]string{
		".kplan.yaml":                      kplanYAML,
		"overlays/prod/kustomization.yaml": "namespace: prod\nresources: [db.yaml, web.yaml, secret.yaml]\n",
		"overlays/prod/db.yaml":            statefulSet("1Gi"),
		"overlays/prod/web.yaml":           web("2"),
		"overlays/prod/secret.yaml":        secret("czNjcjN0LW9uZQ=="),
	}
	head := map[string]string{
		"overlays/prod/kustomization.yaml": "namespace: prod\nresources: [db.yaml, web.yaml, secret.yaml, admin.yaml]\n",
		"overlays/prod/db.yaml":            statefulSet("2Gi"),
		"overlays/prod/web.yaml":           web("0"),
		"overlays/prod/secret.yaml":        secret("czNjcjN0LXR3bw=="),
		"overlays/prod/admin.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: ops-admin\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: ops}]\n",
	}
	up, baseSHA, headSHA := prRepo(t, base, head)
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	bin := buildAction(t)

	// run runs the Action's binary as the runner does, on a pull request
	// carrying labels, and returns the comment and the exit code.
	run := func(t *testing.T, inputs map[string]string, labels ...string) (body string, code int, r *runner) {
		t.Helper()
		r = newRunner(t, ws, labelled(t, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), labels...), gh.URL(), "ghs_test")
		for k, v := range inputs {
			r.env[k] = v
		}
		code = r.runBinary(t, bin)
		cs := gh.Comments("Codertocat", "Hello-World", 2)
		if len(cs) != 1 {
			t.Fatalf("%d comments, want kplan's one (exit %d)\n%s", len(cs), code, r.stdout.String())
		}
		return cs[0].Body, code, r
	}
	findings := []string{
		"> ⚠️ **Dangerous:** StatefulSet prod/db: changes spec.volumeClaimTemplates; the API server refuses changes to a StatefulSet's spec other than replicas, template, updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds, ordinals, revisionHistoryLimit, so the apply fails: delete the StatefulSet with --cascade=orphan (its pods and volumes stay) and apply again (`statefulset-immutable`)\n",
		"> ⚠️ **Dangerous:** Secret prod/creds is immutable (immutable: true): changes its data (password), which the API server refuses, so the apply fails: generate it with a name suffix (configMapGenerator/secretGenerator) or give it a new name (`immutable-data`)\n",
		"> ⚠️ **Dangerous:** ClusterRoleBinding ops-admin: grants ClusterRole cluster-admin (every permission on every resource) in the whole cluster to Group ops (`binds-powerful-role`)\n",
	}
	noSecret := func(t *testing.T, texts ...string) {
		t.Helper()
		for _, text := range texts {
			for _, v := range []string{"s3cr3t", "czNjcjN0", "LW9uZQ", "LXR3bw"} {
				if strings.Contains(text, v) {
					t.Errorf("a Secret value shows (%q)", v)
				}
			}
		}
	}

	t.Run("reported by default, the step passes", func(t *testing.T) {
		body, code, r := run(t, nil)
		if code != 0 {
			t.Fatalf("exit %d, want 0: fail-on-dangerous is off by default\n%s", code, r.stdout.String())
		}
		for _, want := range append([]string{"⚠️ **3 dangerous changes**.\n", "| `overlays/prod` | 1 | 3 | 0 | ⚠️ 3 dangerous |"}, findings...) {
			if !strings.Contains(body, want) {
				t.Errorf("comment lacks %q:\n%s", want, body)
			}
		}
		// Turned off on both sides: the scale to zero is only a change.
		if strings.Contains(body, "scale-to-zero") || !strings.Contains(body, "! spec.replicas: 2 → 0") {
			t.Errorf("scale-to-zero is disabled in .kplan.yaml; the comment should show the change and no finding:\n%s", body)
		}
		log := r.stdout.String()
		if !strings.Contains(log, "::warning file=overlays/prod/kustomization.yaml,title=kplan%3A dangerous change in overlays/prod::ClusterRoleBinding ops-admin: grants ClusterRole cluster-admin") {
			t.Errorf("no warning annotation for the binding:\n%s", log)
		}
		out := r.outputs(t)
		data, err := os.ReadFile(out["report-json"])
		if err != nil {
			t.Fatal(err)
		}
		var js struct {
			Overlays []struct {
				Path              string
				DangerousFindings []struct{ Rule, Object, Reason string }
			}
		}
		if err := json.Unmarshal(data, &js); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range js.Overlays[0].DangerousFindings {
			got[f.Rule] = f.Object
		}
		want := map[string]string{
			"statefulset-immutable": "apps_v1_StatefulSet|prod|db",
			"immutable-data":        "~G_v1_Secret|prod|creds",
			"binds-powerful-role":   "rbac.authorization.k8s.io_v1_ClusterRoleBinding||ops-admin",
		}
		if out["dangerous"] != "true" || len(got) != len(want) {
			t.Errorf("output dangerous=%q, findings %v; want %v", out["dangerous"], got, want)
		}
		for rule, obj := range want {
			if got[rule] != obj {
				t.Errorf("finding %s on %q, want %q", rule, got[rule], obj)
			}
		}
		noSecret(t, body, log, string(data))
	})

	t.Run("fail-on-dangerous fails the step after posting the comment", func(t *testing.T) {
		body, code, r := run(t, map[string]string{"INPUT_FAIL-ON-DANGEROUS": "true"}, "bug")
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, r.stdout.String())
		}
		if want := "⚠️ **3 dangerous changes**: this check fails until they are fixed or the label `kplan/allow-dangerous` acknowledges them.\n"; !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
		for _, want := range findings {
			if !strings.Contains(body, want) {
				t.Errorf("comment lacks %q", want)
			}
		}
		log := r.stdout.String()
		for _, want := range []string{"::error::kplan: the plan has 3 dangerous changes (", "statefulset-immutable", "binds-powerful-role", "immutable-data", `add the label "kplan/allow-dangerous"`} {
			if !strings.Contains(log, want) {
				t.Errorf("the failure lacks %q:\n%s", want, log)
			}
		}
		noSecret(t, body, log)
	})

	t.Run("the label acknowledges them", func(t *testing.T) {
		body, code, r := run(t, map[string]string{"INPUT_FAIL-ON-DANGEROUS": "true"}, "bug", "kplan/allow-dangerous")
		if code != 0 {
			t.Fatalf("exit %d, want 0: the label acknowledges the findings\n%s", code, r.stdout.String())
		}
		if want := "⚠️ **3 dangerous changes**: acknowledged by the label `kplan/allow-dangerous`.\n"; !strings.Contains(body, want) || !strings.Contains(body, findings[2]) {
			t.Errorf("comment lacks %q and the findings:\n%s", want, body)
		}
	})

	t.Run("allow-dangerous-label names another label", func(t *testing.T) {
		body, code, r := run(t, map[string]string{"INPUT_FAIL-ON-DANGEROUS": "true", "INPUT_ALLOW-DANGEROUS-LABEL": "risk-accepted"}, "kplan/allow-dangerous")
		if code != 1 || !strings.Contains(r.stdout.String(), `add the label "risk-accepted"`) {
			t.Fatalf("exit %d, want 1 naming the label risk-accepted\n%s", code, r.stdout.String())
		}
		if !strings.Contains(body, "the label `risk-accepted` acknowledges them") {
			t.Errorf("the comment does not name the label:\n%s", body)
		}
		body, code, r = run(t, map[string]string{"INPUT_FAIL-ON-DANGEROUS": "true", "INPUT_ALLOW-DANGEROUS-LABEL": "risk-accepted"}, "risk-accepted")
		if code != 0 || !strings.Contains(body, "acknowledged by the label `risk-accepted`") {
			t.Fatalf("exit %d with the label risk-accepted, want 0\n%s\n%s", code, r.stdout.String(), body)
		}
	})
}

// A plan without findings passes under fail-on-dangerous, and says
// nothing about them.
func TestActionFailOnDangerousQuietPlan(t *testing.T) {
	up, baseSHA, headSHA := prRepo(t,
		map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": configMap("app")},
		map[string]string{"app/cm.yaml": strings.Replace(configMap("app"), "k: v", "k: v2", 1)})
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), gh.URL(), "ghs_test")
	r.env["INPUT_FAIL-ON-DANGEROUS"] = "true"
	body := planComment(t, r, gh, ws)
	if strings.Contains(body, "dangerous") || !strings.Contains(body, "0 to add, 1 to change") {
		t.Errorf("comment:\n%s", body)
	}
	if out := r.outputs(t); out["dangerous"] != "false" {
		t.Errorf("output dangerous = %q", out["dangerous"])
	}
}

// labelled adds labels to the event payload at path (the example
// payload's own labels are replaced).
func labelled(t *testing.T, path string, labels ...string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	ls := []any{}
	for _, l := range labels {
		ls = append(ls, map[string]any{"name": l, "color": "d73a4a"})
	}
	ev["pull_request"].(map[string]any)["labels"] = ls
	out, _ := json.Marshal(ev)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildAction builds the Action's binary, as action.yml runs it.
func buildAction(t *testing.T) string {
	return program(t, "../cmd/action")
}

// runBinary runs the Action's binary with the runner's environment and
// returns its exit code.
func (r *runner) runBinary(t *testing.T, bin string) int {
	t.Helper()
	r.stdout.Reset()
	r.stderr.Reset()
	cmd := exec.Command(bin)
	cmd.Env = os.Environ()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return -1
}
