package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const (
	hookSecret = "it's a secret to everybody"
	hookToken  = "ghs_webhooktoken"
	hookNS     = "hook"
	hookRepo   = "Codertocat/Hello-World" // the repository of GitHub's example payloads
)

var (
	rgGVR = schema.GroupVersionResource{Group: "kpt.dev", Version: "v1alpha1", Resource: "resourcegroups"}
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// hookEnv is everything the webhook end-to-end test runs against.
type hookEnv struct {
	t          *testing.T
	cluster    *testcluster.Cluster
	dyn        dynamic.Interface
	repo       string // the upstream repository's work tree
	gh         *githubapi.Server
	bin        string
	config     string
	url        string // the public listener (--listen)
	metricsURL string // the listener of /metrics and /drift (--metrics-listen)
	proc       *exec.Cmd
	env        []string // added to the webhook's environment
	state      string   // the configuration's stateDir
	log        string   // the webhook's log file
	delivery   atomic.Int64
}

// commit writes the overlay app/ with the given ConfigMaps and commits it.
func (e *hookEnv) commit(configMaps ...string) string {
	e.t.Helper()
	app := filepath.Join(e.repo, "app")
	os.RemoveAll(app)
	os.MkdirAll(app, 0o755)
	files := map[string]string{
		"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: hook}\n",
		"rg.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000042}\n",
	}
	resources := []string{"ns.yaml", "rg.yaml"}
	for _, name := range configMaps {
		files[name+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {v: " + name + "}\n"
		resources = append(resources, name+".yaml")
	}
	files["kustomization.yaml"] = "namespace: hook\nresources: [" + strings.Join(resources, ", ") + "]\n"
	for name, content := range files {
		os.WriteFile(filepath.Join(app, name), []byte(content), 0o644)
	}
	git(e.t, e.repo, "add", "-A")
	git(e.t, e.repo, "commit", "-qm", "merge "+strings.Join(configMaps, ","))
	return git(e.t, e.repo, "rev-parse", "HEAD")
}

// start runs the webhook binary, as it runs in production.
func (e *hookEnv) start() {
	e.t.Helper()
	cmd := exec.Command(e.bin, "--config", e.config, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	ownGroup(cmd)
	cmd.Env = append(append(os.Environ(), "KPLAN_WEBHOOK_SECRET="+hookSecret, "KPLAN_GITHUB_TOKEN="+hookToken), e.env...)
	stdout, _ := cmd.StdoutPipe()
	logs, _ := os.Create(filepath.Join(e.t.TempDir(), "webhook.log"))
	e.log = logs.Name()
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.proc = cmd
	e.t.Cleanup(func() {
		killGroup(cmd)
		cmd.Wait()
		if e.t.Failed() {
			data, _ := os.ReadFile(logs.Name())
			e.t.Logf("webhook log:\n%s", tailLines(string(data), 40))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		e.t.Fatalf("webhook did not start: %v", err)
	}
	e.url, e.metricsURL = listenerURLs(e.t, line)
}

// ownGroup gives the webhook a process group of its own, which
// killGroup kills whole, as a pod dies: a git command outliving a killed
// webhook wrote into the test's directories while they were removed
// ("unlinkat …/mirrors/…/objects: directory not empty").
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group (SIGKILL).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// listenerURLs reads the public and the metrics listener's URLs from the
// line kplan-webhook prints when it listens.
func listenerURLs(t *testing.T, line string) (public, metrics string) {
	t.Helper()
	rest, ok := strings.CutPrefix(line, "kplan-webhook listening on ")
	_, m, ok2 := strings.Cut(rest, "/metrics and /drift on ")
	if !ok || !ok2 {
		t.Fatalf("kplan-webhook says %q: want the URLs of both listeners", line)
	}
	return strings.Fields(rest)[0], strings.TrimSpace(m)
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// send posts a delivery as GitHub does; sign false sends a wrong signature.
func (e *hookEnv) send(event string, payload []byte, delivery string, sign bool) int {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	if delivery == "" {
		delivery = fmt.Sprintf("delivery-%d", e.delivery.Add(1))
	}
	req.Header.Set("X-GitHub-Delivery", delivery)
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(payload)
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !sign {
		sig = "sha256=" + strings.Repeat("0", 64)
	}
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func fixture(t *testing.T, path string, edit func(map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, path))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	edit(ev)
	out, _ := json.Marshal(ev)
	return out
}

func pushPayload(t *testing.T, repo, before, after string) []byte {
	return fixture(t, "push/payload.json", func(ev map[string]any) {
		ev["ref"], ev["before"], ev["after"], ev["created"], ev["deleted"] = "refs/heads/main", before, after, false, false
		ev["repository"].(map[string]any)["full_name"] = repo
	})
}

func mergedPRPayload(t *testing.T, number int, sha string) []byte {
	return fixture(t, "pull_request/closed.payload.json", func(ev map[string]any) {
		ev["number"] = number
		pr := ev["pull_request"].(map[string]any)
		pr["number"], pr["merged"], pr["merge_commit_sha"] = number, true, sha
		pr["base"].(map[string]any)["ref"] = "main"
	})
}

// deployed reads what the inventory says was last deployed.
func (e *hookEnv) deployed() (sha, outcome string) {
	u, err := e.dyn.Resource(rgGVR).Namespace(hookNS).Get(context.Background(), "inventory-00000042", metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	a := u.GetAnnotations()
	return a[deploy.AnnotationSHA], a[deploy.AnnotationOutcome]
}

func (e *hookEnv) waitDeployed(sha string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if s, o := e.deployed(); s == sha && o == "success" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	s, o := e.deployed()
	e.t.Fatalf("the cluster did not reach %s (inventory says %s %s)", sha[:7], s, o)
}

// configMaps lists the ConfigMaps in the namespace, kube-root-ca.crt aside.
func (e *hookEnv) configMaps() []string {
	e.t.Helper()
	l, err := e.dyn.Resource(cmGVR).Namespace(hookNS).List(context.Background(), metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	var out []string
	for _, i := range l.Items {
		if i.GetName() != "kube-root-ca.crt" {
			out = append(out, i.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func (e *hookEnv) inventory() []string {
	u, err := e.dyn.Resource(rgGVR).Namespace(hookNS).Get(context.Background(), "inventory-00000042", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	var out []string
	for _, r := range refs {
		m := r.(map[string]any)
		out = append(out, fmt.Sprint(m["kind"], "/", m["name"]))
	}
	slices.Sort(out)
	return out
}

func (e *hookEnv) deployments() int { return len(e.gh.Deployments("Codertocat", "Hello-World")) }

func newHookEnv(t *testing.T, resync string) *hookEnv {
	return newHookEnvBranch(t, resync, `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s`)
}

// newHookEnvBranch configures branch main of the repository with branch,
// YAML indented for the branch's fields, where KUBECONFIG stands for the
// test cluster's kubeconfig.
func newHookEnvBranch(t *testing.T, resync, branch string) *hookEnv {
	e, root := newHookBase(t, hookRepo)
	gitSrv := githttp.Serve(t, root, hookToken)
	e.gh.AddToken(hookToken, githubapi.Identity{Login: "kplan[bot]"})

	e.config = filepath.Join(t.TempDir(), "webhook.yaml")
	e.state = t.TempDir()
	cfg := fmt.Sprintf(`repositories:
  - name: %s
    cloneURL: %s/%s.git
    branches:
      - name: main%s
gitBaseURL: %s
apiBaseURL: %s/
resyncInterval: %s
stateDir: %s
`, hookRepo, gitSrv.URL, hookRepo, strings.ReplaceAll(branch, "KUBECONFIG", e.cluster.Kubeconfig), gitSrv.URL, e.gh.URL(), resync, e.state)
	os.WriteFile(e.config, []byte(cfg), 0o644)

	e.bin = buildWebhook(t)
	return e
}

// newHookBase is what every webhook test stands on: a test cluster, an
// empty repository named repo in root (for githttp.Serve to serve) and
// the fake GitHub API.
func newHookBase(t *testing.T, repo string) (e *hookEnv, root string) {
	e = &hookEnv{t: t}
	e.cluster = testcluster.Start(t)
	var err error
	if e.dyn, err = dynamic.NewForConfig(e.cluster.Config); err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	e.repo = filepath.Join(root, repo+".git")
	os.MkdirAll(e.repo, 0o755)
	git(t, e.repo, "init", "-q", "-b", "main")
	e.gh = githubapi.New()
	t.Cleanup(e.gh.Close)
	return e, root
}

func buildWebhook(t *testing.T) string {
	return program(t, "../cmd/webhook")
}

func TestWebhookDeploysOnMerge(t *testing.T) {
	t.Parallel()
	// No periodic resync during this test: after the one at start, every
	// deploy comes from a delivery.
	e := newHookEnv(t, "1h")
	sha1 := e.commit("a", "b")
	e.start()

	// Merge 1, a push: the objects appear.
	if code := e.send("push", pushPayload(t, hookRepo, "0000000000000000000000000000000000000000", sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha1)
	eq(t, "ConfigMaps after merge 1", e.configMaps(), []string{"a", "b"})

	// Merge 2, a merged PR: b goes, c comes.
	sha2 := e.commit("a", "c")
	// As GitHub does, the commit's pulls endpoint names the merged PR: a
	// push or an older delivery processed after the merge may deploy sha2
	// first, and the report then finds its PR from the commit.
	merged := time.Now()
	e.gh.SeedPullForCommit("Codertocat", "Hello-World", sha2, githubapi.PullRequest{Number: 2, State: "closed", MergedAt: &merged, Base: githubapi.Branch{Ref: "main"}})
	if code := e.send("pull_request", mergedPRPayload(t, 2, sha2), "merge-2", true); code != http.StatusAccepted {
		t.Fatalf("merged PR: HTTP %d", code)
	}
	e.waitDeployed(sha2)
	eq(t, "ConfigMaps after merge 2", e.configMaps(), []string{"a", "c"})
	eq(t, "ResourceGroup after merge 2", e.inventory(), []string{"ConfigMap/a", "ConfigMap/c", "Namespace/hook"})
	testkit.Eventually(t, "reports of merge 2", time.Minute, func() bool {
		st := e.gh.Statuses("Codertocat", "Hello-World", sha2)
		cs := e.gh.Comments("Codertocat", "Hello-World", 2)
		return len(st) > 0 && st[len(st)-1].State == "success" && st[len(st)-1].Context == "kplan/prod" &&
			len(cs) == 1 && strings.Contains(cs[0].Body, "1 of 1 targets succeeded") && strings.Contains(cs[0].Body, "pruned")
	})
	deps := e.gh.Deployments("Codertocat", "Hello-World")
	last := deps[len(deps)-1]
	if ds := e.gh.DeploymentStatuses(last.ID); last.SHA != sha2 || last.Environment != "production" || len(ds) == 0 || ds[len(ds)-1].State != "success" {
		t.Errorf("deployment of merge 2: %+v %+v", last, ds)
	}

	// Requests that must change nothing.
	before := e.deployments()
	outcomesBefore := e.deliveryOutcomes()
	// A commit that exists but is not on the branch: only the bad
	// requests below name it.
	sha3 := git(t, e.repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "never merged")
	bad := []struct {
		name  string
		event string
		body  []byte
		id    string
		sign  bool
		want  int
	}{
		{"bad signature", "push", pushPayload(t, hookRepo, sha2, sha3), "", false, http.StatusUnauthorized},
		{"replayed delivery", "pull_request", mergedPRPayload(t, 2, sha2), "merge-2", true, http.StatusOK},
		{"foreign repository", "push", pushPayload(t, "someone/else", sha2, sha3), "", true, http.StatusOK},
		{"malformed body", "push", []byte(`{"ref": "refs/heads/main", "after": `), "", true, http.StatusBadRequest},
		{"oversized body", "push", bytes.Repeat([]byte(" "), 26<<20), "", true, http.StatusRequestEntityTooLarge},
	}
	for _, b := range bad {
		if code := e.send(b.event, b.body, b.id, b.sign); code != b.want {
			t.Errorf("%s: HTTP %d, want %d", b.name, code, b.want)
		}
	}
	// The barrier: the webhook has counted each request's outcome, and none
	// was enqueued. Only an enqueued intent deploys (the resync is an hour
	// away), so nothing can still be on its way to the cluster.
	want := map[string]float64{"unauthorized": 1, "duplicate": 1, "ignored": 1, "malformed": 1, "too_large": 1, "enqueued": 0}
	testkit.Eventually(t, "the outcomes of the bad requests in /metrics", time.Minute, func() bool {
		after := e.deliveryOutcomes()
		for o, n := range want {
			if after[o]-outcomesBefore[o] != n {
				return false
			}
		}
		return true
	})
	if s, _ := e.deployed(); s != sha2 || e.deployments() != before {
		t.Errorf("bad requests changed the cluster: deployed %s, %d deployments (was %d)", s, e.deployments(), before)
	}
	eq(t, "ConfigMaps after bad requests", e.configMaps(), []string{"a", "c"})

	// Three quick merges: one or two deploys, ending at the third.
	before = e.deployments()
	var shas []string
	for _, cms := range [][]string{{"a", "q1"}, {"a", "q2"}, {"a", "q3"}} {
		prev := git(t, e.repo, "rev-parse", "HEAD")
		sha := e.commit(cms...)
		shas = append(shas, sha)
		e.send("push", pushPayload(t, hookRepo, prev, sha), "", true)
	}
	e.waitDeployed(shas[2])
	eq(t, "ConfigMaps after three quick merges", e.configMaps(), []string{"a", "q3"})
	if n := e.deployments() - before; n < 1 || n > 2 {
		t.Errorf("three quick merges made %d deploys, want 1 or 2", n)
	}

	// GitHub does not deliver in order: a late event for an older merge
	// must not roll the cluster back.
	if code := e.send("pull_request", mergedPRPayload(t, 2, sha2), "late-merge-2", true); code != http.StatusAccepted {
		t.Fatalf("late delivery: HTTP %d", code)
	}
	// The barrier: the deployer says it handled that delivery and had
	// nothing to deploy (the branch's tip already runs).
	e.waitLog(`"msg":"nothing to deploy: the target already runs the branch's tip"`, `"delivery":"late-merge-2"`)
	if s, _ := e.deployed(); s != shas[2] {
		t.Errorf("a late delivery of merge 2 moved the cluster to %s", s)
	}
	eq(t, "ConfigMaps after a late delivery", e.configMaps(), []string{"a", "q3"})
}

// deliveryOutcomes sums kplan_webhook_deliveries_total by outcome.
func (e *hookEnv) deliveryOutcomes() map[string]float64 {
	e.t.Helper()
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^kplan_webhook_deliveries_total\{event="[^"]*",outcome="([^"]*)"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(e.metrics(), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			e.t.Fatalf("%s: %v", m[0], err)
		}
		out[m[1]] += v
	}
	return out
}

// waitLog waits for a line of the webhook's log holding every part.
func (e *hookEnv) waitLog(parts ...string) {
	e.t.Helper()
	testkit.Eventually(e.t, fmt.Sprintf("a log line with %q", parts), time.Minute, func() bool {
		data, err := os.ReadFile(e.log)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				return true
			}
		}
		return false
	})
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// A webhook killed in the middle of a deploy converges, once restarted, on
// the newest commit; an unreachable API server fails a deploy with a
// reported error, and the next resync succeeds once it is back.
func TestWebhookRecovers(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, "2s")
	sha1 := e.commit("a")
	e.start()
	e.send("push", pushPayload(t, hookRepo, "0000000000000000000000000000000000000000", sha1), "", true)
	e.waitDeployed(sha1)

	// A big merge, and the webhook dies while it is being applied.
	var many []string
	for i := range 150 {
		many = append(many, fmt.Sprintf("m%03d", i))
	}
	sha2 := e.commit(many...)
	e.send("push", pushPayload(t, hookRepo, sha1, sha2), "", true)
	testkit.Eventually(t, "the deploy of the big merge to start", time.Minute, func() bool {
		for _, d := range e.gh.Deployments("Codertocat", "Hello-World") {
			if d.SHA == sha2 {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond)
	killGroup(e.proc) // SIGKILL: no cleanup runs
	e.proc.Wait()
	if s, _ := e.deployed(); s == sha2 {
		t.Log("the deploy finished before the kill; the restart still has to converge")
	}
	// While it is down the branch moves on.
	sha3 := e.commit(append(many[:10], "late")...)
	e.start() // resyncs every target at once
	e.waitDeployed(sha3)
	want := append(append([]string{"a"}[:0], "late"), many[:10]...)
	slices.Sort(want)
	eq(t, "ConfigMaps after the restart", e.configMaps(), want)

	// The API server goes away: the deploy fails and says why.
	if err := e.cluster.StopAPIServer(); err != nil {
		t.Logf("stop apiserver: %v", err)
	}
	sha4 := e.commit("after-outage")
	e.send("push", pushPayload(t, hookRepo, sha3, sha4), "", true)
	testkit.Eventually(t, "a failure status for the deploy during the outage", time.Minute, func() bool {
		for _, s := range e.gh.Statuses("Codertocat", "Hello-World", sha4) {
			if s.State == "failure" && s.Context == "kplan/prod" {
				return s.Description != ""
			}
		}
		return false
	})
	if err := e.cluster.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitDeployed(sha4) // the resync (every 2s here) retries it
	eq(t, "ConfigMaps after the outage", e.configMaps(), []string{"after-outage"})
	st := e.gh.Statuses("Codertocat", "Hello-World", sha4)
	if st[len(st)-1].State != "success" {
		t.Errorf("last status of %s: %+v", sha4[:7], st[len(st)-1])
	}
}

// write replaces the repository's files (content "" deletes one) and
// commits them.
func (e *hookEnv) write(msg string, files map[string]string) string {
	e.t.Helper()
	for name, content := range files {
		p := filepath.Join(e.repo, name)
		if content == "" {
			os.Remove(p)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	git(e.t, e.repo, "add", "-A")
	git(e.t, e.repo, "commit", "-qm", msg)
	return git(e.t, e.repo, "rev-parse", "HEAD")
}

// overlay is an overlay of one ConfigMap in namespace ns (rendered without
// a namespace when ns is ""), with inventory rg beside it.
func overlay(dir, ns, cm, rg string) map[string]string {
	k := "resources: [cm.yaml]\n"
	if ns != "" {
		k = "namespace: " + ns + "\n" + k
	}
	return map[string]string{
		dir + "/kustomization.yaml": k,
		dir + "/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + cm + "}\ndata: {v: " + cm + "}\n",
		dir + "/resourcegroup.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: " + rg + ", namespace: default}\n",
	}
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// status waits for the last commit status of context on sha to be want
// and returns it; on a timeout it fails with the statuses seen.
func (e *hookEnv) status(sha, context, want string) githubapi.Status {
	e.t.Helper()
	var last githubapi.Status
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, s := range e.gh.Statuses("Codertocat", "Hello-World", sha) {
			if s.Context == context {
				last = s
			}
		}
		if last.State == want {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("status %s on %s is %+v, want %s", context, sha[:7], last, want)
	return last
}

func (e *hookEnv) configMap(ns, name string) bool {
	e.t.Helper()
	_, err := e.dyn.Resource(cmGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	return err == nil
}

// Two targets of one cluster with the same explicit inventory: the
// webhook does not start, and says which targets.
func TestWebhookRefusesSharedInventoryAtStart(t *testing.T) {
	t.Parallel()
	bin := buildWebhook(t)
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	os.WriteFile(cfg, []byte(`repositories:
  - name: o/r
    branches:
      - name: main
        targets:
          - {name: staging, overlay: staging, kubeconfig: /k, inventory: {name: inventory-1, namespace: default}}
          - {name: prod, overlay: prod, kubeconfig: /k, inventory: {name: inventory-1, namespace: default}}
`), 0o644)
	cmd := exec.Command(bin, "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KPLAN_WEBHOOK_SECRET="+hookSecret, "KPLAN_GITHUB_TOKEN="+hookToken)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the webhook started:\n%s", out)
	}
	for _, want := range []string{`webhook.yaml:7: targets "staging" (line 6) and "prod" use the same inventory (ResourceGroup default/inventory-1)`, "would prune the other's objects"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error lacks %q:\n%s", want, out)
		}
	}
}

// Two targets whose overlays render the same inventory (prod copied from
// staging with its resourcegroup.yaml): neither is applied, and both
// commit statuses say which targets and why.
func TestWebhookRefusesTargetsRenderingOneInventory(t *testing.T) {
	t.Parallel()
	e := newHookEnvBranch(t, "1h", `
        targets:
          - {name: staging, overlay: staging, kubeconfig: KUBECONFIG, reconcileTimeout: 20s}
          - {name: prod, overlay: prod, kubeconfig: KUBECONFIG, reconcileTimeout: 20s}`)
	sha := e.write("prod copied from staging", merge(overlay("staging", "default", "staging-cm", "inventory-shared"), overlay("prod", "default", "prod-cm", "inventory-shared")))
	e.start() // the resync at start renders both
	for _, target := range []string{"staging", "prod"} {
		st := e.status(sha, "kplan/"+target, "failure")
		if !strings.Contains(st.Description, "targets prod and staging share an inventory in one cluster, so applying one would prune the other's objects") {
			t.Errorf("status of %s: %+v", target, st)
		}
	}
	if e.configMap("default", "staging-cm") || e.configMap("default", "prod-cm") {
		t.Error("a target sharing an inventory was applied")
	}
	// prod gets its own inventory: both deploy (the refusal of staging is
	// lifted when prod's inventory changes).
	sha2 := e.write("prod gets its own inventory", overlay("prod", "default", "prod-cm", "inventory-prod"))
	e.send("push", pushPayload(t, hookRepo, sha, sha2), "", true)
	for _, target := range []string{"staging", "prod"} {
		e.status(sha2, "kplan/"+target, "success")
	}
	if !e.configMap("default", "staging-cm") || !e.configMap("default", "prod-cm") {
		t.Error("the targets were not deployed after the fix")
	}
}

// A branch that takes its targets from .kplan.yaml: a merged PR that adds
// a target deploys it, into the namespace it names; a target whose
// environment the webhook does not map is reported and not deployed.
func TestWebhookTargetsFromRepository(t *testing.T) {
	t.Parallel()
	e := newHookEnvBranch(t, "1h", `
        targetsFrom: .kplan.yaml
        environments:
          staging: {kubeconfig: KUBECONFIG, reconcileTimeout: 20s}
          production: {kubeconfig: KUBECONFIG, reconcileTimeout: 20s}`)
	kplanYAML := "targets:\n  - {name: staging, overlay: staging, environment: staging}\n  - {name: dev, overlay: dev, environment: development}\n"
	sha1 := e.write("staging", merge(overlay("staging", "default", "staging-cm", "inventory-staging"), overlay("dev", "default", "dev-cm", "inventory-dev"),
		map[string]string{".kplan.yaml": kplanYAML}))
	e.start()
	if code := e.send("push", pushPayload(t, hookRepo, "0000000000000000000000000000000000000000", sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.status(sha1, "kplan/staging", "success")
	if st := e.status(sha1, "kplan/dev", "failure"); !strings.Contains(st.Description, `environment "development", which the webhook's configuration does not map`) {
		t.Errorf("dev: %+v", st)
	}
	if !e.configMap("default", "staging-cm") || e.configMap("default", "dev-cm") {
		t.Error("staging must be deployed and dev not")
	}

	// PR 7 adds prod, whose objects render without a namespace and go to
	// the namespace .kplan.yaml gives it.
	prod := overlay("prod", "", "prod-cm", "inventory-prod")
	prod["prod/ns.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"
	prod["prod/kustomization.yaml"] = "resources: [ns.yaml, cm.yaml]\n"
	sha2 := e.write("add prod", merge(prod, map[string]string{".kplan.yaml": kplanYAML + "  - {name: prod, overlay: prod, environment: production, namespace: shop}\n"}))
	if code := e.send("pull_request", mergedPRPayload(t, 7, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("merged PR: HTTP %d", code)
	}
	e.status(sha2, "kplan/prod", "success")
	if !e.configMap("shop", "prod-cm") {
		t.Error("prod's ConfigMap is not in namespace shop")
	}
	testkit.Eventually(t, "the comment on PR 7", time.Minute, func() bool {
		cs := e.gh.Comments("Codertocat", "Hello-World", 7)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "`prod`") && strings.Contains(cs[0].Body, "production")
	})

	// PR 8 makes prod render none of what its inventory holds while adding
	// other objects — what a copied inventory looks like: refused, nothing
	// pruned.
	sha3 := e.write("prod replaced", map[string]string{"prod/kustomization.yaml": "resources: [other.yaml]\n",
		"prod/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: shop}\n"})
	e.send("pull_request", mergedPRPayload(t, 8, sha3), "", true)
	if st := e.status(sha3, "kplan/prod", "failure"); !strings.Contains(st.Description, "refusing to apply: it would prune all 2 objects ResourceGroup default/inventory-prod") {
		t.Errorf("prod replaced: %+v", st)
	}
	testkit.Eventually(t, "the comment on PR 8", time.Minute, func() bool {
		cs := e.gh.Comments("Codertocat", "Hello-World", 8)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "copied with its inventory")
	})
	if !e.configMap("shop", "prod-cm") || e.configMap("shop", "other") {
		t.Error("the refused deploy changed the cluster")
	}

	// PR 9 leaves only ignore rules in .kplan.yaml: an error, not a branch
	// that silently stops deploying.
	sha4 := e.write("only ignore rules", map[string]string{".kplan.yaml": "ignore:\n  kinds: [HorizontalPodAutoscaler]\n"})
	e.send("pull_request", mergedPRPayload(t, 9, sha4), "", true)
	if st := e.status(sha4, "kplan/"+hookRepo+"@main", "failure"); !strings.Contains(st.Description, "declares none (only plan settings)") {
		t.Errorf("only ignore rules: %+v", st)
	}
}
