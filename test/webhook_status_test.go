package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplan-dev/kplan/internal/browsertest"
	"github.com/kplan-dev/kplan/internal/status"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// EnvStatusScreenshot, set to a file, has TestWebhookStatusPageInBrowser
// save the page it checked there as a PNG (`make screenshots` writes
// docs/status-page.png so).
const EnvStatusScreenshot = "KPLAN_STATUS_SCREENSHOT"

// An operator opens the status page in a browser (headless Chromium,
// scripts off) after three merges under requireReviewedPlan: #2
// approved by alice and deployed, #3 approved but refused by the API
// server, #4 approved only by a reader and refused. The page shows the
// target in its cluster and environment, what it runs and who approved
// it, each deploy's outcome with its change, duration, approver or
// refusal reason and links to the forge, and loads nothing but itself.
// After a ConfigMap is edited in the cluster and the webhook restarted,
// the page shows what the cluster records the target runs (its
// approval not known to the new process) and the drifted field.
func TestWebhookStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            requireReviewedPlan: true`)
	e.gh.SetPermission("Codertocat", "Hello-World", "alice", "write")
	e.gh.SetPermission("Codertocat", "Hello-World", "mallory", "read")
	const token = "admin-t0ken"
	e.env = append(e.env, "KPLAN_ADMIN_TOKEN="+token)
	e.commit("a")
	e.start()
	headOf := func(merge string) string { return git(t, e.repo, "rev-parse", merge+"^2") }

	// #2, approved by alice at its head: deployed.
	merge2, head2 := e.quickPR(2, "a", "b")
	e.approve(2, "alice", head2)
	e.mergePR(2, merge2)
	e.waitDeployed(merge2)
	e.status(merge2, "kplan/prod", "success")

	// #3, approved, adds a ConfigMap the API server refuses (a key with
	// a space): the apply fails.
	git(t, e.repo, "checkout", "-qb", "pr-3", "main")
	head3 := e.write("a ConfigMap the API server refuses", map[string]string{
		"app/bad.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {\"not a key\": x}\n",
		"app/kustomization.yaml": "namespace: hook\nresources: [ns.yaml, rg.yaml, a.yaml, b.yaml, bad.yaml]\n",
	})
	git(t, e.repo, "checkout", "-q", "main")
	git(t, e.repo, "merge", "-q", "--no-ff", "-m", "Merge PR 3", "pr-3")
	merge3 := git(t, e.repo, "rev-parse", "HEAD")
	e.approve(3, "alice", head3)
	e.mergePR(3, merge3)
	e.status(merge3, "kplan/prod", "failure")

	// #4, approved only by mallory, who may not write: refused.
	merge4, head4 := e.quickPR(4, "a", "b", "d")
	e.approve(4, "mallory", head4)
	e.mergePR(4, merge4)
	if st := e.status(merge4, "kplan/prod", "failure"); !strings.Contains(st.Description, "refusing to apply (requireReviewedPlan)") {
		t.Fatalf("status of #4's merge: %+v", st)
	}
	if headOf(merge4) != head4 {
		t.Fatalf("#4's merge has head %s, want %s", headOf(merge4), head4)
	}

	b := browsertest.Start(t)
	auth := http.Header{"Authorization": {"Bearer " + token}}
	page := b.Open(t, e.metricsURL+"/", auth)
	if got := page.Elsewhere(); len(got) != 0 {
		t.Errorf("the page loaded more than itself: %+v", got)
	}
	if got := page.Text("h3"); got != "Cluster "+e.clusterName() {
		t.Errorf("cluster heading %q, want %q", got, "Cluster "+e.clusterName())
	}
	if got := page.Text("h4"); got != "Environment production" {
		t.Errorf("environment heading %q", got)
	}
	// The cluster runs #3's merge, whose apply failed on one object.
	row := page.Text(`tr.target[data-target="prod"]`)
	for _, want := range []string{"prod", hookRepo + "@main", "app", merge3[:7] + " failure", "#3", "approved by @alice",
		fmt.Sprintf("applied exactly as approved in #3 at %s by @alice", head3[:7]), "refused " + merge4[:7] + " #4", "idle"} {
		if !strings.Contains(row, want) {
			t.Errorf("the target's row lacks %q:\n%s", want, row)
		}
	}
	deploys := page.Texts(`details[data-target="prod"] tr.deploy`)
	if len(deploys) < 3 {
		t.Fatalf("%d deploys shown, want at least #4's, #3's and #2's:\n%s", len(deploys), strings.Join(deploys, "\n---\n"))
	}
	took := regexp.MustCompile(`\b\d+(\.\d+)?(ms|s)\b`)
	for i, want := range [][]string{
		{merge4[:7], "#4", "refused", "Refused", "not-approved", "not approved: #4 has no standing approval by a user with write access", "kplan/apply-unreviewed"},
		{merge3[:7], "#3", "failed", "ObjectsFailed", "approved by @alice", `ConfigMap bad (hook): ConfigMap "bad" is invalid: data[not a key]`},
		{merge2[:7], "#2", "deployed", "Deployed", "approved by @alice", "created"},
	} {
		for _, w := range want {
			if !strings.Contains(deploys[i], w) {
				t.Errorf("deploy %d lacks %q:\n%s", i, w, deploys[i])
			}
		}
		if !took.MatchString(deploys[i]) {
			t.Errorf("deploy %d says not how long it took:\n%s", i, deploys[i])
		}
	}
	links := page.Attrs(`details[data-target="prod"] tr.deploy a`, "href")
	forgeURL := strings.TrimSuffix(e.cloneURL(), "/"+hookRepo+".git")
	for _, want := range []string{forgeURL + "/" + hookRepo + "/commit/" + merge4, forgeURL + "/" + hookRepo + "/pull/4", forgeURL + "/" + hookRepo + "/pull/2"} {
		if !strings.Contains(strings.Join(links, " "), want) {
			t.Errorf("no link to %s among %q", want, links)
		}
	}
	if got := page.Text("p.queue-empty"); !strings.Contains(got, "Nothing queued") {
		t.Errorf("queue: %q", got)
	}
	if body := page.Text("body"); strings.Contains(body, token) {
		t.Error("the page shows the admin token")
	}

	if path := os.Getenv(EnvStatusScreenshot); path != "" {
		// The page with its three deploys, before the restart forgets them.
		page.Screenshot(path)
		t.Logf("wrote %s", path)
	}

	// Without the token: asked for it (a browser prompts for the
	// password), shown nothing.
	resp, err := http.Get(e.metricsURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("the page without the token: HTTP %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}

	// Someone edits ConfigMap a in the cluster; the webhook restarts
	// and its first drift check finds it.
	if _, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Patch(context.Background(), "a", types.MergePatchType,
		[]byte(`{"data":{"v":"hand-edited"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	killGroup(e.proc)
	e.proc.Wait()
	e.start()
	testkit.Eventually(t, "a drift check finding ConfigMap a", 2*time.Minute, func() bool {
		p := e.statusJSON(token)
		return len(p.Drift) == 1 && len(p.Drift[0].Drifted) == 1
	})
	testkit.Eventually(t, "the target's resync at start, reading what the cluster runs", time.Minute, func() bool {
		p := e.statusJSON(token)
		return len(p.Targets) == 1 && p.Targets[0].Runs != nil
	})
	page = b.Open(t, e.metricsURL+"/", auth)
	drift := page.Text(`div.drift[data-target="prod"]`)
	for _, want := range []string{"at " + merge3[:7], "1 of 4 objects drifted", "ConfigMap a (hook)\n~ data.v: \"hand-edited\" → \"a\"",
		"The API server would refuse ConfigMap bad (hook) (invalid)"} {
		if !strings.Contains(drift, want) {
			t.Errorf("the drift section lacks %q:\n%s", want, drift)
		}
	}
	row = page.Text(`tr.target[data-target="prod"]`)
	if !strings.Contains(row, merge3[:7]+" failure") || !strings.Contains(row, "not known") {
		t.Errorf("after a restart the row shows:\n%s\nwant %s, the approval not known", row, merge3[:7])
	}
	if got := page.Elsewhere(); len(got) != 0 {
		t.Errorf("the page loaded more than itself: %+v", got)
	}
}

// statusJSON is the status page's JSON twin.
func (e *hookEnv) statusJSON(token string) status.Page {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.metricsURL+"/status.json", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var p status.Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		e.t.Fatalf("GET /status.json: HTTP %d: %v", resp.StatusCode, err)
	}
	return p
}

// clusterName is how the status page names the test cluster: its
// kubeconfig file's name.
func (e *hookEnv) clusterName() string {
	return status.ClusterName(e.cluster.Kubeconfig, "")
}

// cloneURL is the repository's clone URL in the webhook's configuration.
func (e *hookEnv) cloneURL() string {
	e.t.Helper()
	data, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	m := regexp.MustCompile(`cloneURL: (\S+)`).FindSubmatch(data)
	if m == nil {
		e.t.Fatalf("no cloneURL in %s", data)
	}
	return string(m[1])
}
