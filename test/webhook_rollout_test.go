package test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// logOrder is the position in the webhook's log of the first line whose
// message is msg about target (-1: none).
func (e *hookEnv) logOrder(msg, target, sha string) int {
	e.t.Helper()
	data, _ := os.ReadFile(e.log)
	for i, l := range strings.Split(string(data), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil {
			continue
		}
		if rec["msg"] == msg && rec["target"] == target && rec["sha"] == sha {
			return i
		}
	}
	return -1
}

// statusSays waits for the newest commit status context on sha to be in
// state with a description holding want.
func (e *hookEnv) statusSays(sha, context, state, want string) githubapi.Status {
	e.t.Helper()
	var got githubapi.Status
	testkit.Eventually(e.t, "status "+context+" "+state+" on "+short(sha)+" saying "+want, time.Minute, func() bool {
		sts := e.gh.Statuses("Codertocat", "Hello-World", sha)
		for i := len(sts) - 1; i >= 0; i-- {
			if s := sts[i]; s.Context == context {
				got = s
				return s.State == state && strings.Contains(s.Description, want)
			}
		}
		return false
	})
	return got
}

// Targets with dependsOn roll out in order, on the real apiserver:
// production applies a merge only after staging deployed it, and a
// staging the apiserver refuses stops production, which reports that it
// waits on staging's failure and keeps what it ran; the next merge that
// fixes staging deploys both, in order.
func TestWebhookRolloutOrder(t *testing.T) {
	t.Parallel()
	staging, prod := fleetTarget{n: 0}, fleetTarget{n: 1}
	targets := []fleetTarget{staging, prod}
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: staging
            overlay: fleet/t0
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
          - name: prod
            overlay: fleet/t1
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            dependsOn: [staging]`)
	e.gh.SetPermission("Codertocat", "Hello-World", "alice", "write")
	good := func(extra ...string) func(fleetTarget) []string {
		return func(fleetTarget) []string { return append([]string{"a"}, extra...) }
	}
	sha1 := e.commitFleet(targets, good(), nil)
	e.start()
	e.waitFleet(targets, sha1)
	// Production applied only after staging had deployed.
	if s, p := e.logOrder("deployed", "staging", sha1), e.logOrder("deploying", "prod", sha1); s < 0 || p < 0 || p < s {
		t.Errorf("the log has staging deployed at line %d and prod deploying at line %d: prod must start after staging finished", s, p)
	}

	// Merge 2 breaks staging: a ConfigMap name the apiserver refuses.
	sha2 := e.commitFleet(targets, func(f fleetTarget) []string {
		if f == staging {
			return []string{"a", "b", "Not_A_Name"}
		}
		return []string{"a", "b"}
	}, nil)
	if code := e.send("pull_request", mergedPRPayload(t, 2, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("merge 2: HTTP %d", code)
	}
	e.statusSays(sha2, "kplan/staging", "failure", "")
	e.statusSays(sha2, "kplan/prod", "pending", "waiting on staging's failure")
	body := e.deployComment(2, "waiting on staging's failure")
	for _, want := range []string{"0 of 2 targets succeeded, 1 waiting", "Rollout order (dependsOn): staging → prod", "❌"} {
		if !strings.Contains(body, want) {
			t.Errorf("the deploy comment of merge 2 lacks %q:\n%s", want, body)
		}
	}
	// The report of the wait comes after the decision not to apply:
	// production still runs merge 1.
	if sha, outcome, _ := e.fleetInventory(prod); sha != sha1 || outcome != "success" {
		t.Errorf("prod records %s %s after staging failed, want merge 1 %s", short(sha), outcome, short(sha1))
	}
	eq(t, "prod's objects after staging failed", e.fleetObjects(prod), []string{"ConfigMap/a"})
	if e.logOrder("deploying", "prod", sha2) >= 0 {
		t.Error("prod started deploying merge 2, whose staging failed")
	}

	// Merge 3 fixes staging: both deploy, production after staging.
	sha3 := e.commitFleet(targets, good("b"), nil)
	if code := e.send("pull_request", mergedPRPayload(t, 3, sha3), "", true); code != http.StatusAccepted {
		t.Fatalf("merge 3: HTTP %d", code)
	}
	e.waitFleet(targets, sha3)
	eq(t, "prod's objects after merge 3", e.fleetObjects(prod), []string{"ConfigMap/a", "ConfigMap/b"})
	if s, p := e.logOrder("deployed", "staging", sha3), e.logOrder("deploying", "prod", sha3); s < 0 || p < s {
		t.Errorf("merge 3: staging deployed at log line %d, prod deploying at %d", s, p)
	}
	e.deployComment(3, "2 of 2 targets succeeded")
	// Production's row of merge 2, which waited, says merge 3 carried it.
	e.statusSays(sha2, "kplan/prod", "success", "superseded: deployed with the branch's newer commit "+short(sha3))
}
