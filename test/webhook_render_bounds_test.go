package test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/render/hostiletest"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// alive checks that the webhook process runs and answers.
func (e *hookEnv) alive(when string) {
	e.t.Helper()
	if e.proc.ProcessState != nil {
		e.t.Fatalf("%s: the webhook exited: %v", when, e.proc.ProcessState)
	}
	resp, err := http.Get(e.url + "/healthz")
	if err != nil {
		e.t.Fatalf("%s: the webhook does not answer: %v", when, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("%s: /healthz: HTTP %d", when, resp.StatusCode)
	}
}

// statusCount counts the statuses of context on sha in state.
func (e *hookEnv) statusCount(sha, context, state string) int {
	n := 0
	for _, s := range e.gh.Statuses("Codertocat", "Hello-World", sha) {
		if s.Context == context && s.State == state {
			n++
		}
	}
	return n
}

// Issue 10: one merged alias bomb made the webhook run out of memory at
// every start — a crash loop that stopped every target. Now the bomb
// (and an alias that refers to itself, which overflowed the stack) fails
// its target alone: the webhook keeps serving and deploying the other
// target, its memory stays small, and after a restart it renders the
// bomb again, fails that target again, and goes on.
func TestWebhookAliasBombFailsItsTargetAlone(t *testing.T) {
	e := newHookEnvBranch(t, "1h", `
        targets:
          - {name: staging, overlay: staging, kubeconfig: KUBECONFIG, reconcileTimeout: 20s}
          - {name: prod, overlay: prod, kubeconfig: KUBECONFIG, reconcileTimeout: 20s}`)
	// prod keeps one object throughout, so that replacing its other one
	// is a change, not the signature of a copied inventory.
	prod := overlay("prod", "default", "prod-1", "inventory-prod")
	prod["prod/kustomization.yaml"] = "namespace: default\nresources: [cm.yaml, keep.yaml]\n"
	prod["prod/keep.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod-keep}\n"
	sha1 := e.write("two targets", merge(overlay("staging", "default", "staging-cm", "inventory-staging"), prod))
	e.start()
	e.send("push", pushPayload(t, hookRepo, "0000000000000000000000000000000000000000", sha1), "", true)
	e.status(sha1, "kplan/staging", "success")
	e.status(sha1, "kplan/prod", "success")

	// PR 1 merges a bomb into staging and changes prod.
	sha2 := e.write("bomb", map[string]string{"staging/cm.yaml": hostiletest.AliasBomb("staging-cm"),
		"prod/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod-2}\n"})
	// As GitHub does, the commits name their merged PRs: the startup
	// resync's request, still queued for staging, may deploy sha2 first,
	// and its report then finds PR 1 from the commit.
	merged := time.Now()
	e.gh.SeedPullForCommit("Codertocat", "Hello-World", sha2, githubapi.PullRequest{Number: 1, State: "closed", MergedAt: &merged, Base: githubapi.Branch{Ref: "main"}})
	start := time.Now()
	if code := e.send("pull_request", mergedPRPayload(t, 1, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("merged PR: HTTP %d", code)
	}
	st := e.status(sha2, "kplan/staging", "failure")
	if !strings.Contains(st.Description, "staging/cm.yaml") || !strings.Contains(st.Description, "alias") {
		t.Errorf("staging's status does not name the file and the cause: %q", st.Description)
	}
	e.status(sha2, "kplan/prod", "success")
	t.Logf("the bomb failed staging and prod deployed in %s", time.Since(start).Round(time.Millisecond))
	if !e.configMap("default", "prod-2") || e.configMap("default", "prod-1") {
		t.Error("prod was not deployed beside the failing staging")
	}
	if !e.configMap("default", "staging-cm") {
		t.Error("staging's failed render changed the cluster")
	}
	testkit.Eventually(t, "the comment on PR 1", time.Minute, func() bool {
		cs := e.gh.Comments("Codertocat", "Hello-World", 1)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "write the repeated YAML out")
	})
	e.alive("after the bomb")

	// PR 2: an alias inside its own anchor, which used to overflow the
	// stack — a crash no recover catches.
	sha3 := e.write("self-reference", map[string]string{"staging/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: staging-cm}\nx: &a [*a]\n",
		"prod/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod-3}\n"})
	e.gh.SeedPullForCommit("Codertocat", "Hello-World", sha3, githubapi.PullRequest{Number: 2, State: "closed", MergedAt: &merged, Base: githubapi.Branch{Ref: "main"}})
	e.send("pull_request", mergedPRPayload(t, 2, sha3), "", true)
	if st := e.status(sha3, "kplan/staging", "failure"); !strings.Contains(st.Description, "staging/cm.yaml") {
		t.Errorf("staging's status: %q", st.Description)
	}
	e.status(sha3, "kplan/prod", "success")
	e.alive("after the self-reference")
	rss := int(peakRSS(t, e.proc.Process.Pid) >> 20)
	t.Logf("webhook peak RSS: %d MiB", rss)
	if rss > 400 {
		t.Errorf("the webhook's peak RSS is %d MiB", rss)
	}

	// Restart on the same tip: the start resync renders staging again
	// (its last deploy failed) and fails it again, without crashing.
	failures := e.statusCount(sha3, "kplan/staging", "failure")
	killGroup(e.proc)
	e.proc.Wait()
	e.start()
	testkit.Eventually(t, "the restarted webhook to fail staging again", time.Minute, func() bool {
		return e.statusCount(sha3, "kplan/staging", "failure") > failures
	})
	e.alive("after the restart")
	// And it still deploys prod.
	sha4 := e.write("prod moves on", map[string]string{"prod/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod-4}\n"})
	e.send("push", pushPayload(t, hookRepo, sha3, sha4), "", true)
	e.status(sha4, "kplan/prod", "success")
	if !e.configMap("default", "prod-4") {
		t.Error("prod was not deployed after the restart")
	}
	e.alive("at the end")
	t.Logf("restarted webhook peak RSS: %d MiB", int(peakRSS(t, e.proc.Process.Pid)>>20))
}
