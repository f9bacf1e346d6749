package deploy

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	pollevent "sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	"sigs.k8s.io/cli-utils/pkg/object"
)

// noisyWatcher is cli-utils' status watcher followed, right after its
// sync, by a burst of updates for one object: what a busy cluster sends
// while the first task of an apply runs, at a rate the test apiserver
// never reaches by itself.
type noisyWatcher struct {
	inner watcher.StatusWatcher
	id    object.ObjMetadata
	burst int
}

func (w noisyWatcher) Watch(ctx context.Context, ids object.ObjMetadataSet, opts watcher.Options) <-chan pollevent.Event {
	in := w.inner.Watch(ctx, ids, opts)
	out := make(chan pollevent.Event)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- ev:
			case <-ctx.Done():
				continue
			}
			if ev.Type != pollevent.SyncEvent {
				continue
			}
			for range w.burst {
				select {
				case out <- pollevent.Event{Type: pollevent.ResourceUpdateEvent, Resource: &pollevent.ResourceStatus{Identifier: w.id, Status: status.CurrentStatus}}:
				case <-ctx.Done():
				}
			}
		}
	}()
	return out
}

// TestStatusUpdatesDuringTheInventoryTaskDoNotRace: an apply whose
// inventory lives in a Namespace it applies, with status updates for that
// Namespace pouring in while cli-utils' inventory-add task annotates it.
// Without statusGate, `go test -race` reports the data race inside
// cli-utils (the task's write of the annotation against the runner's
// read of the task's objects on every update) on most runs; with it,
// none, and the apply does what it did.
func TestStatusUpdatesDuringTheInventoryTaskDoNotRace(t *testing.T) {
	ns := unique(t, "status-gate")
	nsID := object.ObjMetadata{GroupKind: schema.GroupKind{Kind: "Namespace"}, Name: ns}
	e := New(NewGetter(cluster.Kubeconfig, ""))
	e.statusWatcher = func(d dynamic.Interface, m meta.RESTMapper) watcher.StatusWatcher {
		return noisyWatcher{inner: defaultWatcher(d, m), id: nsID, burst: 5000}
	}
	inv := obj(t, rg(ns, "inventory-"+ns))
	docs := []string{nsObj(ns), cm(ns, "a", "1")}
	for i, want := range []Action{Created, Unchanged} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		res, err := e.Apply(ctx, inv, objs(t, docs...), Options{})
		cancel()
		if err != nil {
			t.Fatalf("apply %d: %v\n%+v", i+1, err, res)
		}
		eq(t, "apply "+string(want), res.Keys(want), sorted("~G_v1_ConfigMap|"+ns+"|a", "~G_v1_Namespace||"+ns))
	}
}
