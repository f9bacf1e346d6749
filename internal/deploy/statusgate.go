package deploy

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	pollevent "sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	"sigs.k8s.io/cli-utils/pkg/object"
)

// statusGate holds the status watcher's resource updates back from
// cli-utils' task runner until the apply's first task, the inventory-add
// task, has finished.
//
// Why: that task annotates the inventory's Namespace object with the
// inventory's ID, in place and in a goroutine of its own
// (task.inventoryNamespaceInSet), when the Namespace is among the applied
// objects. Meanwhile the runner, on each status update, reads every
// object of the current task (InvAddTask.Identifiers), that Namespace's
// metadata included: a data race inside cli-utils
// (sigs.k8s.io/cli-utils v0.37.3-0.20251021150641-5895ad6c17dd,
// pkg/apply/taskrunner/runner.go "currentTask.Identifiers().Contains(id)"
// against pkg/apply/task/inv_add_task.go "AddInventoryIDAnnotation").
// Status updates arrive during that task whenever the objects already
// exist (every deploy after the first), so under -race a test could fail
// and in production the maps could be corrupted. Holding the updates
// until the task has finished removes the overlap; they are delivered in
// their order right after, so the runner's cache and wait tasks see every
// one of them. The watcher's sync and error events pass at once: the
// runner waits for the sync to start the first task.
type statusGate struct {
	once sync.Once
	open chan struct{}
}

func newStatusGate() *statusGate { return &statusGate{open: make(chan struct{})} }

// seen opens the gate on the first task group the apply reports finished:
// the inventory-add task, which cli-utils' solver always queues first
// for an apply. The runner sends that event after the task's goroutine
// has reported its end, so its write happens before any read the held
// updates cause.
func (g *statusGate) seen(ev event.Event) {
	if ev.Type == event.ActionGroupType && ev.ActionGroupEvent.Status == event.Finished {
		g.once.Do(func() { close(g.open) })
	}
}

// watcher wraps inner, the status watcher cli-utils would use.
func (g *statusGate) watcher(inner watcher.StatusWatcher) watcher.StatusWatcher {
	return gatedWatcher{inner: inner, open: g.open}
}

type gatedWatcher struct {
	inner watcher.StatusWatcher
	open  <-chan struct{}
}

// Watch implements watcher.StatusWatcher.
func (w gatedWatcher) Watch(ctx context.Context, ids object.ObjMetadataSet, opts watcher.Options) <-chan pollevent.Event {
	in := w.inner.Watch(ctx, ids, opts)
	out := make(chan pollevent.Event)
	go func() {
		defer close(out)
		var held []pollevent.Event
		open := w.open
		send := func(ev pollevent.Event) {
			select {
			case out <- ev:
			case <-ctx.Done():
				// The runner has stopped reading updates; it drains
				// until the channel closes, which follows the inner
				// watcher's close.
			}
		}
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				if open != nil && ev.Type == pollevent.ResourceUpdateEvent {
					held = append(held, ev)
					continue
				}
				send(ev)
			case <-open:
				open = nil // a nil channel: this case never fires again
				for _, ev := range held {
					send(ev)
				}
				held = nil
			}
		}
	}()
	return out
}

// defaultWatcher is the status watcher cli-utils' applier builder makes
// when given none.
func defaultWatcher(dyn dynamic.Interface, mapper meta.RESTMapper) watcher.StatusWatcher {
	return watcher.NewDefaultStatusWatcher(dyn, mapper)
}
