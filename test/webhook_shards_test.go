package test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/leader"
	"github.com/kplan-dev/kplan/internal/testkit"
)

const fleetShards = 6

// fleetTarget is one target of the fleet test: its own "cluster" (a
// context of one kubeconfig, all reaching the test cluster), namespace
// and inventory.
type fleetTarget struct {
	n       int
	context string
	shard   int
}

func (f fleetTarget) name() string { return "t" + strconv.Itoa(f.n) }
func (f fleetTarget) env() string  { return "env" + strconv.Itoa(f.n) }
func (f fleetTarget) ns() string   { return "fleet-" + strconv.Itoa(f.n) }

// fleetTargets picks perShard contexts for each shard, as the webhook
// hashes the clusters of kubeconfig, so that every shard has targets.
func fleetTargets(kubeconfig string, perShard int) []fleetTarget {
	var out []fleetTarget
	count := map[int]int{}
	for i := 0; len(out) < fleetShards*perShard; i++ {
		ctx := "ctx-" + strconv.Itoa(i)
		s := leader.ShardOf(config.Settings{Kubeconfig: kubeconfig, Context: ctx}.Cluster(), fleetShards)
		if count[s] < perShard {
			count[s]++
			out = append(out, fleetTarget{n: len(out), context: ctx, shard: s})
		}
	}
	return out
}

// fleetKubeconfig writes to path the test cluster's kubeconfig with a
// context per target.
func fleetKubeconfig(t *testing.T, from, path string, targets []fleetTarget) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(from)
	if err != nil {
		t.Fatal(err)
	}
	base := kc.Contexts[kc.CurrentContext]
	for _, f := range targets {
		c := *base
		kc.Contexts[f.context] = &c
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// commitFleet writes every target's overlay, fleet/t<n>, with the
// ConfigMaps cms(target) and, where slow(target), a Deployment that never
// becomes available (the test cluster runs no controllers), and commits.
func (e *hookEnv) commitFleet(targets []fleetTarget, cms func(fleetTarget) []string, slow func(fleetTarget) bool) string {
	e.t.Helper()
	for _, f := range targets {
		dir := filepath.Join(e.repo, "fleet", f.name())
		os.RemoveAll(dir)
		os.MkdirAll(dir, 0o755)
		files := map[string]string{
			"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + f.ns() + "}\n",
			"rg.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-" + f.ns() + "}\n",
		}
		resources := []string{"ns.yaml", "rg.yaml"}
		for _, name := range cms(f) {
			files[name+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {v: " + name + "}\n"
			resources = append(resources, name+".yaml")
		}
		if slow != nil && slow(f) {
			files["slow.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: slow}\nspec:\n  selector: {matchLabels: {app: slow}}\n" +
				"  template:\n    metadata: {labels: {app: slow}}\n    spec: {containers: [{name: app, image: registry.example/slow:1}]}\n"
			resources = append(resources, "slow.yaml")
		}
		files["kustomization.yaml"] = "namespace: " + f.ns() + "\nresources: [" + strings.Join(resources, ", ") + "]\n"
		for name, content := range files {
			os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
		}
	}
	git(e.t, e.repo, "add", "-A")
	git(e.t, e.repo, "commit", "-qm", "fleet")
	return git(e.t, e.repo, "rev-parse", "HEAD")
}

// fleetInventory reads a target's inventory: what it records as deployed,
// and the objects it holds (kind/name).
func (e *hookEnv) fleetInventory(f fleetTarget) (sha, outcome string, objects []string) {
	u, err := e.dyn.Resource(rgGVR).Namespace(f.ns()).Get(context.Background(), "inventory-"+f.ns(), metav1.GetOptions{})
	if err != nil {
		return "", "", nil
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	for _, r := range refs {
		m := r.(map[string]any)
		objects = append(objects, fmt.Sprint(m["kind"], "/", m["name"]))
	}
	slices.Sort(objects)
	a := u.GetAnnotations()
	return a[deploy.AnnotationSHA], a[deploy.AnnotationOutcome], objects
}

// fleetObjects lists the ConfigMaps and Deployments in a target's
// namespace (kind/name), kube-root-ca.crt aside.
func (e *hookEnv) fleetObjects(f fleetTarget) []string {
	e.t.Helper()
	var out []string
	for _, k := range []struct {
		kind string
		gvr  schema.GroupVersionResource
	}{{"ConfigMap", cmGVR}, {"Deployment", deploymentGVR}} {
		l, err := e.dyn.Resource(k.gvr).Namespace(f.ns()).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, i := range l.Items {
			if i.GetName() != "kube-root-ca.crt" {
				out = append(out, k.kind+"/"+i.GetName())
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitFleet waits until every target's inventory records sha deployed.
func (e *hookEnv) waitFleet(targets []fleetTarget, sha string) {
	e.t.Helper()
	testkit.Eventually(e.t, "every target to run "+short(sha), 2*time.Minute, func() bool {
		for _, f := range targets {
			if s, o, _ := e.fleetInventory(f); s != sha || o != "success" {
				return false
			}
		}
		return true
	})
}

// shardHolders reads each shard's Lease holder, as the replica holding
// it (nil: none of replicas).
func (e *hookEnv) shardHolders(replicas []*webhookReplica) []*webhookReplica {
	out := make([]*webhookReplica, fleetShards)
	for i := range out {
		u, err := e.dyn.Resource(leaseGVR).Namespace("default").Get(context.Background(), leader.ShardLease("kplan-webhook", i), metav1.GetOptions{})
		if err != nil {
			continue
		}
		h, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
		for _, r := range replicas {
			if r.identity == h {
				out[i] = r
			}
		}
	}
	return out
}

// held counts the shards each replica holds.
func held(holders []*webhookReplica) map[*webhookReplica]int {
	n := map[*webhookReplica]int{}
	for _, r := range holders {
		n[r]++
	}
	return n
}

// startsOf lists the replicas that opened a GitHub Deployment of sha for
// environment env.
func startsOf(tap *ghTap, env, sha string) []string {
	var out []string
	for _, ev := range tap.list() {
		if ev.kind == "start" && ev.env == env && ev.sha == sha {
			out = append(out, ev.replica)
		}
	}
	return out
}

// Three replicas with --shards 6 share twelve targets (two per shard,
// each its own cluster) through the shards' Leases: each holds two
// shards; a merge delivered to one replica deploys every target once, by
// the holder of its shard; one replica is killed (SIGKILL, its Leases
// not released) while its targets' deploys wait on a Deployment, and a
// newer merge is delivered meanwhile: its shards move to the survivors
// within the lease time, nothing is lost (every object in the cluster is
// in its target's inventory), and every target ends on the newest commit,
// deployed once, never two deploys of one target at a time.
func TestWebhookShardsShareTargetsAndSurviveAKill(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	targets := fleetTargets(kubeconfig, 2)
	var branch strings.Builder
	branch.WriteString("\n        targets:")
	for _, f := range targets {
		fmt.Fprintf(&branch, "\n          - {name: %s, overlay: fleet/%s, environment: %s, kubeconfig: %s, context: %s, reconcileTimeout: 2m}",
			f.name(), f.name(), f.env(), kubeconfig, f.context)
	}
	e := newHookEnvBranch(t, "1h", branch.String())
	fleetKubeconfig(t, e.cluster.Kubeconfig, kubeconfig, targets)
	gh, _ := url.Parse(e.gh.URL())
	tap := &ghTap{t: t, target: gh}
	cms := func(names ...string) func(fleetTarget) []string { return func(fleetTarget) []string { return names } }
	sha0 := e.commitFleet(targets, cms("a"), nil)

	var replicas []*webhookReplica
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		replicas = append(replicas, startReplica(e, tap, name, "--shards", strconv.Itoa(fleetShards)))
	}
	var holders []*webhookReplica
	testkit.Eventually(t, "two shards held by each replica", time.Minute, func() bool {
		holders = e.shardHolders(replicas)
		n := held(holders)
		return n[replicas[0]] == 2 && n[replicas[1]] == 2 && n[replicas[2]] == 2
	})
	holderOf := func(f fleetTarget) *webhookReplica { return holders[f.shard] }
	for i, r := range holders {
		t.Logf("shard %d: %s", i, r.name)
	}
	// Each term starts by deploying its shard's targets' branch tip.
	e.waitFleet(targets, sha0)

	// A merge touching every shard, delivered to one replica: each target
	// is deployed once, by the replica holding its shard.
	via := replicas[0]
	sha1 := e.commitFleet(targets, cms("a", "b"), nil)
	if code, body := sendTo(t, via, "push", pushPayload(t, hookRepo, sha0, sha1), "merge-1"); code != http.StatusAccepted {
		t.Fatalf("merge 1: HTTP %d %q", code, body)
	}
	e.waitFleet(targets, sha1)
	for _, f := range targets {
		if got := startsOf(tap, f.env(), sha1); !slices.Equal(got, []string{holderOf(f).name}) {
			t.Errorf("%s (shard %d, held by %s): merge 1 deployed by %q, want once by the shard's holder", f.name(), f.shard, holderOf(f).name, got)
		}
		_, _, inv := e.fleetInventory(f)
		eq(t, f.name()+" inventory after merge 1", inv, []string{"ConfigMap/a", "ConfigMap/b", "Namespace/" + f.ns()})
		eq(t, f.name()+" objects after merge 1", e.fleetObjects(f), []string{"ConfigMap/a", "ConfigMap/b"})
	}

	// A merge whose deploys wait on a Deployment in the targets of the
	// replica about to be killed, delivered to another.
	victim := replicas[2]
	var victims []fleetTarget
	for _, f := range targets {
		if holderOf(f) == victim {
			victims = append(victims, f)
		}
	}
	sha2 := e.commitFleet(targets, cms("a", "c"), func(f fleetTarget) bool { return holderOf(f) == victim })
	if code, body := sendTo(t, via, "push", pushPayload(t, hookRepo, sha1, sha2), "merge-2"); code != http.StatusAccepted {
		t.Fatalf("merge 2: HTTP %d %q", code, body)
	}
	testkit.Eventually(t, "the victim's deploys to be applied and waiting", time.Minute, func() bool {
		for _, f := range victims {
			if _, err := e.dyn.Resource(deploymentGVR).Namespace(f.ns()).Get(context.Background(), "slow", metav1.GetOptions{}); err != nil || len(startsOf(tap, f.env(), sha2)) == 0 {
				return false
			}
		}
		return true
	})
	victim.kill() // SIGKILL: its Leases are not released
	killed := time.Now()
	victim.cmd.Wait()
	tap.killed(victim.name)
	for _, f := range victims {
		if s, _, _ := e.fleetInventory(f); s == sha2 {
			t.Fatalf("%s finished deploying merge 2 before the kill", f.name())
		}
	}

	// The branch moves on while the victim's shards have no holder: the
	// delivery is accepted, and its part for them waits for their next
	// holder.
	sha3 := e.commitFleet(targets, cms("a", "late"), nil)
	if code, body := sendTo(t, via, "push", pushPayload(t, hookRepo, sha2, sha3), "merge-3"); code != http.StatusAccepted {
		t.Fatalf("merge 3: HTTP %d %q", code, body)
	}
	survivors := replicas[:2]
	testkit.Eventually(t, "the survivors to hold every shard", time.Minute, func() bool {
		n := held(e.shardHolders(survivors))
		return n[survivors[0]] == 3 && n[survivors[1]] == 3
	})
	moved := time.Since(killed)
	t.Logf("the victim's shards moved %s after the SIGKILL (lease duration %s, retry period %s)", moved.Round(time.Millisecond), testLeaseDuration, testRetryPeriod)
	if moved > testLeaseDuration+4*testRetryPeriod+5*time.Second {
		t.Errorf("the shards took %s to move", moved)
	}
	e.waitFleet(targets, sha3)
	t.Logf("every target runs the newest commit %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))

	events := tap.list()
	for _, f := range targets {
		// Nothing lost: every object of the target's namespace is in
		// its inventory, and the interrupted merge's are pruned.
		_, _, inv := e.fleetInventory(f)
		eq(t, f.name()+" inventory after the kill", inv, []string{"ConfigMap/a", "ConfigMap/late", "Namespace/" + f.ns()})
		eq(t, f.name()+" objects after the kill", e.fleetObjects(f), []string{"ConfigMap/a", "ConfigMap/late"})
		if got := startsOf(tap, f.env(), sha3); len(got) != 1 || got[0] == victim.name {
			t.Errorf("%s: the newest commit deployed by %q, want once by a survivor", f.name(), got)
		}
		for _, bad := range overlaps(ofEnv(events, f.env())) {
			t.Errorf("%s: %s", f.name(), bad)
		}
	}
	if v := metric(t, via, `kplan_webhook_forwards_total{outcome="forwarded"}`); v == "" || v == "0" {
		t.Errorf("the replica that received the merges handed on none of them: forwarded = %q", v)
	}
}

// ofEnv keeps the events of one environment's Deployments, and the
// deaths.
func ofEnv(events []ghEvent, env string) []ghEvent {
	ids := map[int64]bool{}
	var out []ghEvent
	for _, ev := range events {
		if ev.kind == "start" && ev.env == env {
			ids[ev.id] = true
		}
		if ev.kind == "killed" || ids[ev.id] {
			out = append(out, ev)
		}
	}
	return out
}
