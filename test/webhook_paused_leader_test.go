package test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplan-dev/kplan/internal/testkit"
)

// cmWatch records every change to the ConfigMaps of a namespace, with
// the time the test saw it.
type cmWatch struct {
	mu     sync.Mutex
	events []cmEvent
	seen   chan struct{} // a token per event
}

type cmEvent struct {
	typ  watch.EventType
	name string
	at   time.Time
}

func (e *hookEnv) watchConfigMaps(ctx context.Context) *cmWatch {
	e.t.Helper()
	w, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cw := &cmWatch{seen: make(chan struct{}, 1<<16)}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			cw.mu.Lock()
			cw.events = append(cw.events, cmEvent{typ: ev.Type, name: u.GetName(), at: time.Now()})
			cw.mu.Unlock()
			cw.seen <- struct{}{}
		}
	}()
	return cw
}

// count counts the events of type typ of names with prefix, seen after since.
func (cw *cmWatch) count(typ watch.EventType, prefix string, since time.Time) int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	n := 0
	for _, ev := range cw.events {
		if (typ == "" || ev.typ == typ) && strings.HasPrefix(ev.name, prefix) && !ev.at.Before(since) {
			n++
		}
	}
	return n
}

// since lists the events seen after t, but the test's own marker.
func (cw *cmWatch) since(t time.Time, marker string) []string {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	var out []string
	for _, ev := range cw.events {
		if !ev.at.Before(t) && ev.name != marker {
			out = append(out, string(ev.typ)+" "+ev.name)
		}
	}
	return out
}

// span is how long after t the last change but the marker was seen.
func (cw *cmWatch) span(t time.Time, marker string) time.Duration {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	var last time.Duration
	for _, ev := range cw.events {
		if ev.name != marker && ev.at.After(t) {
			last = max(last, ev.at.Sub(t))
		}
	}
	return last
}

// waitUntil waits for the watch to see what ok says.
func (cw *cmWatch) waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for !ok() {
		select {
		case <-cw.seen:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The paused leader of issue 22: two replicas elect a leader on a Lease;
// the leader is stopped (SIGSTOP) in the middle of applying hundreds of
// ConfigMaps; the other takes over and deploys a newer merge; then the
// paused one is resumed (SIGCONT). It must write nothing more: its last
// renewal is older than the renew deadline by its own clock, so its fence
// refuses every write and ends its deploy. Before the fence it went on
// creating ConfigMaps for seconds, in no inventory, which no later deploy
// pruned. Afterwards every ConfigMap in the namespace is in the
// inventory, and the inventory still records the newer merge.
func TestWebhookPausedLeaderWritesNothingAfterResume(t *testing.T) {
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 2m`)
	gh, _ := url.Parse(e.gh.URL())
	tap := &ghTap{t: t, target: gh}
	sha0 := e.commit("a")
	// a starts alone, so it leads.
	a := startReplica(e, tap, "replica-a")
	testkit.Eventually(t, "replica-a to lead", time.Minute, func() bool { return e.holder() == a.identity })
	e.waitDeployed(sha0)
	b := startReplica(e, tap, "replica-b")
	testkit.Eventually(t, "replica-b to know the leader", time.Minute, func() bool {
		resp, err := http.Get(b.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cw := e.watchConfigMaps(ctx)

	// A merge of 600 ConfigMaps, to a: it is stopped once 20 exist.
	var big []string
	for i := range 600 {
		big = append(big, fmt.Sprintf("big-%03d", i))
	}
	sha1 := e.commit(append([]string{"a"}, big...)...)
	if code, body := sendTo(t, a, "push", pushPayload(t, hookRepo, sha0, sha1), "merge-big"); code != http.StatusAccepted {
		t.Fatalf("push to the leader: HTTP %d %q", code, body)
	}
	cw.waitUntil(t, "the leader to create 20 ConfigMaps of the big merge", func() bool { return cw.count(watch.Added, "big-", time.Time{}) >= 20 })
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			a.cmd.Process.Signal(syscall.SIGCONT) // so that the cleanup's kill ends it
		}
	}()

	// A newer merge while a is stopped: b takes over when the Lease
	// expires, and its term's resync deploys the branch tip, pruning what
	// a had created (it is in the inventory: cli-utils adds the objects
	// before applying them).
	sha2 := e.commit("a", "new")
	testkit.Eventually(t, "replica-b to take over", time.Minute, func() bool { return e.holder() == b.identity })
	e.waitDeployed(sha2)
	eq(t, "ConfigMaps after replica-b deployed the newer merge", e.configMaps(), []string{"a", "new"})
	createdBeforeStop := cw.count(watch.Added, "big-", time.Time{})
	invBefore := e.inventoryObject()
	t.Logf("replica-a created %d ConfigMaps of the big merge before SIGSTOP; replica-b took over and deployed %s %s after it",
		createdBeforeStop, short(sha2), time.Since(stopped).Round(time.Millisecond))

	// The watch has seen every change so far once it sees the test's own
	// marker come and go.
	e.syncWatch(cw)

	// Resume a; it stops leading (its log says so), its deployer has
	// returned by then.
	resume := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	testkit.Eventually(t, "replica-a to say it stopped leading", time.Minute, func() bool {
		data, _ := os.ReadFile(a.log)
		return strings.Contains(string(data), `"msg":"stopped leading"`)
	})
	e.syncWatch(cw)
	after := cw.since(resume, markerName)
	t.Logf("objects written by the paused leader after SIGCONT: %d ConfigMaps created, %d changes in all over %s (%s)",
		cw.count(watch.Added, "big-", resume), len(after), cw.span(resume, markerName).Round(time.Millisecond), strings.Join(first(after, 10), ", "))
	if len(after) > 0 {
		t.Errorf("the paused leader wrote after it resumed, with the Lease lost: %d changes: %s", len(after), strings.Join(first(after, 10), ", "))
	}
	eq(t, "ConfigMaps after the paused leader resumed", e.configMaps(), []string{"a", "new"})
	inv := e.inventory()
	var stray []string
	for _, cm := range e.configMaps() {
		if !slices.Contains(inv, "ConfigMap/"+cm) {
			stray = append(stray, cm)
		}
	}
	if len(stray) > 0 {
		t.Errorf("%d ConfigMaps are in no inventory, so no deploy will prune them: %s", len(stray), strings.Join(first(stray, 10), ", "))
	}
	if got := e.inventoryObject(); got.GetResourceVersion() != invBefore.GetResourceVersion() {
		t.Errorf("the paused leader changed the inventory after it resumed: %v", got.GetAnnotations())
	}
	if s, o := e.deployed(); s != sha2 || o != "success" {
		t.Errorf("the inventory records %s %s, want %s success", short(s), o, short(sha2))
	}
	data, _ := os.ReadFile(a.log)
	if !strings.Contains(string(data), "no longer holds the Lease by its own clock") {
		t.Errorf("replica-a's log does not say why it stopped writing:\n%s", tailLines(string(data), 15))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// inventoryObject reads the target's ResourceGroup.
func (e *hookEnv) inventoryObject() *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(rgGVR).Namespace(hookNS).Get(context.Background(), "inventory-00000042", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// markerName is the test's own ConfigMap that syncWatch creates and
// deletes.
const markerName = "zz-test-marker"

// syncWatch creates and deletes a ConfigMap of the test's own and waits
// for the watch to see both: the apiserver sends a watch's events in
// order, so it has then seen every change made before.
func (e *hookEnv) syncWatch(cw *cmWatch) {
	e.t.Helper()
	start := time.Now()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": markerName, "namespace": hookNS}}}
	cms := e.dyn.Resource(cmGVR).Namespace(hookNS)
	if _, err := cms.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := cms.Delete(context.Background(), markerName, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	cw.waitUntil(e.t, "the test's marker to come and go", func() bool { return cw.count(watch.Deleted, markerName, start) == 1 })
}
