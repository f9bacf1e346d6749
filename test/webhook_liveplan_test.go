package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/liveplan"
	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/internal/testkit"
)

var (
	deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	vapGVR    = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	vapbGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// liveApp is the overlay app/ of the live plan test; edit changes its
// files before they are written.
func liveApp(edit func(files map[string]string)) map[string]string {
	cm := func(name, data string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {" + data + "}\n"
	}
	files := map[string]string{
		"app/ns.yaml":       "apiVersion: v1\nkind: Namespace\nmetadata: {name: hook}\n",
		"app/rg.yaml":       "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000042}\n",
		"app/settings.yaml": cm("settings", "mode: calm"),
		"app/steady.yaml":   cm("steady", "v: '1'"),
		"app/tuned.yaml":    cm("tuned", "level: '1'"),
		"app/retired.yaml":  cm("retired", "v: '1'"),
		"app/secret.yaml":   "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: hunter2-deployed}\n",
		"app/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1}]}
`,
	}
	edit(files)
	var resources []string
	for name, content := range files {
		if content != "" { // "" deletes the file (hookEnv.write)
			resources = append(resources, strings.TrimPrefix(name, "app/"))
		}
	}
	slices.Sort(resources)
	files["app/kustomization.yaml"] = "namespace: hook\nresources: [" + strings.Join(resources, ", ") + "]\n"
	return files
}

// actAsDeploymentController marks the Deployments of namespace hook
// available, as kube-controller-manager would (this API server runs no
// controllers), so that their deploys reconcile.
func (e *hookEnv) actAsDeploymentController(ctx context.Context) {
	go func() {
		for ctx.Err() == nil {
			l, err := e.dyn.Resource(deployGVR).Namespace(hookNS).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, d := range l.Items {
					if g, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration"); g == d.GetGeneration() {
						continue
					}
					replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
					d.Object["status"] = map[string]any{
						"observedGeneration": d.GetGeneration(), "replicas": replicas, "updatedReplicas": replicas,
						"readyReplicas": replicas, "availableReplicas": replicas,
						"conditions": []any{
							map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
							map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
						},
					}
					e.dyn.Resource(deployGVR).Namespace(hookNS).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// denyBadConfigMaps installs a ValidatingAdmissionPolicy refusing
// ConfigMaps with a key "bad", and waits until the API server enforces it.
func (e *hookEnv) denyBadConfigMaps(ctx context.Context) {
	e.t.Helper()
	for gvr, y := range map[schema.GroupVersionResource]string{
		vapGVR: `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-bad-configmaps}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "!has(object.data) || !('bad' in object.data)"
    message: ConfigMaps may not carry the key bad
`,
		vapbGVR: `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-bad-configmaps}
spec: {policyName: no-bad-configmaps, validationActions: [Deny]}
`,
	} {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(y), &u.Object); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("create %s: %v", u.GetKind(), err)
		}
	}
	probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "probe"}, "data": map[string]any{"bad": "1"}}}
	testkit.Eventually(e.t, "the ValidatingAdmissionPolicy to be enforced", time.Minute, func() bool {
		_, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "may not carry the key bad")
	})
}

// prPayload is a pull_request delivery of action for PR number at head.
func prPayload(t *testing.T, action string, number int, head string) []byte {
	return fixture(t, "pull_request/opened.payload.json", func(ev map[string]any) {
		ev["action"], ev["number"] = action, number
		pr := ev["pull_request"].(map[string]any)
		pr["number"] = number
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["ref"] = "main"
	})
}

// pushPull commits files on branch feature, from commit from, as pull
// request number's head, and returns the commit.
func (e *hookEnv) pushPull(number int, from, msg string, files map[string]string) string {
	e.t.Helper()
	git(e.t, e.repo, "checkout", "-q", "-B", "feature", from)
	sha := e.write(msg, files)
	git(e.t, e.repo, "update-ref", fmt.Sprintf("refs/pull/%d/head", number), sha)
	git(e.t, e.repo, "checkout", "-q", "main")
	return sha
}

// liveComments are the live plan comments of PR number.
func (e *hookEnv) liveComments(number int) []string {
	var out []string
	for _, c := range e.gh.Comments("Codertocat", "Hello-World", number) {
		if strings.Contains(c.Body, liveplan.Marker) {
			out = append(out, c.Body)
		}
	}
	return out
}

// waitLiveComment waits for PR number's live plan comment to be of head.
func (e *hookEnv) waitLiveComment(number int, head string) string {
	e.t.Helper()
	var body string
	testkit.Eventually(e.t, "the live plan comment of "+head[:7], time.Minute, func() bool {
		c := e.liveComments(number)
		if len(c) == 1 && strings.Contains(c[0], "`"+head[:7]+"`") {
			body = c[0]
			return true
		}
		return false
	})
	return body
}

// metric reads a sample of the webhook's /metrics; -1 when absent.
func (e *hookEnv) metric(sample string) float64 {
	e.t.Helper()
	resp, err := http.Get(e.metricsURL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(string(data))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// row finds the table row of an object in a comment.
func row(body, object string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "| ") && strings.Contains(l, "| "+object+" |") && !strings.Contains(l, "`") {
			return l
		}
	}
	return ""
}

// A pull request opened after a merge gets a live plan comment: what apply
// would do to the live cluster now, object by object, a hand edit as
// drift, and the API server's refusals with its own messages; a push to
// the PR edits the same comment; the drift check exports the hand edit.
func TestWebhookLivePlan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := newHookEnv(t, "2s")
	e.actAsDeploymentController(ctx)
	sha1 := e.write("deployed", liveApp(func(map[string]string) {}))
	e.start()
	if code := e.send("push", pushPayload(t, hookRepo, zeroSHA, sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha1)
	// The first drift check after the deploy finds nothing.
	testkit.Eventually(t, "a drift check after the deploy", time.Minute, func() bool { return e.metric(`kplan_drift_objects{target="prod"}`) == 0 })

	e.denyBadConfigMaps(ctx)
	// Hand edits in the cluster: one object the PR leaves alone, and one
	// the PR will add that no inventory owns.
	settings, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settings.Object["data"] = map[string]any{"mode": "hot"}
	if _, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Update(ctx, settings, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	squatter := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "squatter", "namespace": hookNS}, "data": map[string]any{"v": "by hand"}}}
	if _, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Create(ctx, squatter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The drift check exports the hand edit.
	testkit.Eventually(t, "kplan_drift_objects to count the hand edit", time.Minute, func() bool { return e.metric(`kplan_drift_objects{target="prod"}`) == 1 })
	resp, err := http.Get(e.metricsURL + "/drift")
	if err != nil {
		t.Fatal(err)
	}
	var drift struct {
		Targets []liveplan.DriftStatus `json:"targets"`
	}
	json.NewDecoder(resp.Body).Decode(&drift)
	resp.Body.Close()
	if len(drift.Targets) != 1 || drift.Targets[0].DeployedSHA != sha1 || len(drift.Targets[0].Drifted) != 1 ||
		drift.Targets[0].Drifted[0].Key != "~G_v1_ConfigMap|hook|settings" {
		t.Errorf("GET /drift: %+v", drift.Targets)
	} else {
		t.Logf("drift check of %d objects took %.3f s", drift.Targets[0].Objects, drift.Targets[0].Took)
	}

	// The pull request.
	head1 := e.pushPull(5, sha1, "the change", liveApp(func(f map[string]string) {
		f["app/tuned.yaml"] = strings.Replace(f["app/tuned.yaml"], "level: '1'", "level: '2'", 1)
		f["app/retired.yaml"] = ""
		f["app/fresh.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {v: new}\n"
		f["app/forbidden.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: forbidden}\ndata: {bad: 'yes'}\n"
		f["app/squatter.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: squatter}\ndata: {v: by git}\n"
		f["app/secret.yaml"] = strings.Replace(f["app/secret.yaml"], "hunter2-deployed", "hunter2-proposed", 1)
		f["app/web.yaml"] = strings.ReplaceAll(f["app/web.yaml"], "app: web}", "app: web2}")
	}))
	start := time.Now()
	if code := e.send("pull_request", prPayload(t, "opened", 5, head1), "", true); code != http.StatusAccepted {
		t.Fatalf("opened: HTTP %d", code)
	}
	body := e.waitLiveComment(5, head1)
	t.Logf("live plan of PR #5 posted %.2f s after the delivery", time.Since(start).Seconds())
	t.Logf("live plan comment:\n%s", body)

	for _, w := range []struct{ object, want string }{
		{"ConfigMap fresh (hook)", "| create |"},
		{"ConfigMap tuned (hook)", "| configure |"},
		{"ConfigMap steady (hook)", "| unchanged |"},
		{"Namespace hook", "| unchanged |"},
		{"ConfigMap retired (hook)", "| prune |"},
		{"ConfigMap settings (hook)", "| ⚠️ configure (drift) |"},
		{"Deployment web (hook)", "| ⛔ configure |"},
		{"ConfigMap forbidden (hook)", "| ⛔ create |"},
		{"ConfigMap squatter (hook)", "| ⛔ configure |"},
		{"Secret creds (hook)", "| configure |"},
	} {
		if r := row(body, w.object); !strings.HasPrefix(r, w.want) {
			t.Errorf("row of %s = %q, want it to start %q", w.object, r, w.want)
		}
	}
	for _, want := range []string{
		"⚠️ **Drift**", "- ConfigMap settings (hook)", `~ data.mode: "hot" → "calm"`,
		// The API server's own messages.
		"| ConfigMap forbidden (hook) | `admission` |", "ValidatingAdmissionPolicy 'no-bad-configmaps' with binding 'no-bad-configmaps' denied request: ConfigMaps may not carry the key bad",
		"| Deployment web (hook) | `immutable` |", "field is immutable",
		"| ConfigMap squatter (hook) | `ownership` |", "no inventory owns it",
		`~ data.level: "1" → "2"`, "~ data.password (value hidden)",
		"deployed: `" + sha1[:7] + "`",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the live plan lacks %q", want)
		}
	}
	for _, secret := range []string{"hunter2", "aHVudGVyMi"} {
		if strings.Contains(body, secret) {
			t.Errorf("the live plan shows a Secret value (%s)", secret)
		}
	}
	// Nothing was applied: the dry-runs leave the cluster as it was.
	if e.configMap(hookNS, "fresh") || !e.configMap(hookNS, "retired") {
		t.Error("the live plan changed the cluster")
	}
	if s, _ := e.deployed(); s != sha1 {
		t.Errorf("the inventory records %s after a live plan, want %s", s, sha1)
	}

	// A push to the PR edits the same comment.
	first := e.gh.Comments("Codertocat", "Hello-World", 5)
	head2 := e.pushPull(5, head1, "fix the selector", map[string]string{"app/web.yaml": liveApp(func(map[string]string) {})["app/web.yaml"]})
	if code := e.send("pull_request", prPayload(t, "synchronize", 5, head2), "", true); code != http.StatusAccepted {
		t.Fatalf("synchronize: HTTP %d", code)
	}
	body = e.waitLiveComment(5, head2)
	after := e.gh.Comments("Codertocat", "Hello-World", 5)
	if len(after) != len(first) || after[0].ID != first[0].ID {
		t.Errorf("synchronize posted another comment: %d comments before, %d after", len(first), len(after))
	}
	if r := row(body, "Deployment web (hook)"); !strings.HasPrefix(r, "| unchanged |") {
		t.Errorf("after the fix, the Deployment's row is %q", r)
	}
	if strings.Contains(body, "field is immutable") {
		t.Error("the edited comment still shows the immutable selector")
	}
	if _, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Get(ctx, "fresh", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap fresh after two live plans: %v", err)
	}
}

// What a live plan costs on the test cluster: one target of n ConfigMaps
// applied, then planned with a tenth changed, a tenth new and a tenth
// removed, and planned again as a drift check (the deployed render
// against itself).
func TestLivePlanCost(t *testing.T) {
	const n = 300
	cluster := testcluster.Start(t)
	getter := deploy.NewGetter(cluster.Kubeconfig, "")
	ctx := context.Background()
	cms := func(from, to int, value string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for i := from; i < to; i++ {
			v := value
			if i%10 != 0 {
				v = "same"
			}
			out = append(out, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("cm-%04d", i)}, "data": map[string]any{"v": v, "payload": strings.Repeat("x", 512)}}})
		}
		return out
	}
	inv := declared.ConfigMapInventory("inventory", "cost", "")
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cost"}}}
	deployed := append([]*unstructured.Unstructured{ns}, cms(0, n, "old")...)
	start := time.Now()
	if _, err := deploy.New(getter).Apply(ctx, inv.DeepCopy(), cloneAll(deployed), deploy.Options{Namespace: "cost", ReconcileTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	t.Logf("apply of %d objects: %.2f s", len(deployed), time.Since(start).Seconds())

	// A tenth of the objects changed (i%10 == 0), a tenth removed, a tenth
	// new.
	head := append([]*unstructured.Unstructured{ns}, cms(0, n-n/10, "new")...)
	head = append(head, cms(n, n+n/10, "new")...)
	res, err := liveplan.New(getter).Plan(ctx, liveplan.Input{Inventory: inv.DeepCopy(), Objects: head, Options: deploy.Options{Namespace: "cost"}, Deployed: cloneAll(deployed)})
	if err != nil {
		t.Fatal(err)
	}
	changed := (n - n/10 + 9) / 10
	if got := [4]int{res.Count(liveplan.Create), res.Count(liveplan.Configure), res.Count(liveplan.Unchanged), res.Count(liveplan.Prune)}; got != [4]int{n / 10, changed, n - n/10 - changed + 1, n / 10} {
		t.Errorf("create, configure, unchanged, prune = %v", got)
	}
	if d := res.Drifted(); len(d) != 0 || len(res.Findings()) != 0 {
		t.Errorf("drift %v, findings %v", d, res.Findings())
	}
	rows := len(res.Rows)
	t.Logf("live plan of %d objects (%d rows): %.2f s, %.2f ms per object", len(head), rows, res.Took.Seconds(), res.Took.Seconds()*1000/float64(rows))

	res, err = liveplan.New(getter).Plan(ctx, liveplan.Input{Inventory: inv.DeepCopy(), Objects: cloneAll(deployed), Options: deploy.Options{Namespace: "cost", NoPrune: true}, Deployed: cloneAll(deployed)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count(liveplan.Unchanged) != len(deployed) {
		t.Errorf("the deployed render against itself: %d of %d unchanged", res.Count(liveplan.Unchanged), len(deployed))
	}
	t.Logf("drift check of %d objects: %.2f s, %.2f ms per object", len(deployed), res.Took.Seconds(), res.Took.Seconds()*1000/float64(len(deployed)))
}

func cloneAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
