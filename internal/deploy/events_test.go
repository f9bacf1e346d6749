package deploy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	"sigs.k8s.io/cli-utils/pkg/common"
	"sigs.k8s.io/cli-utils/pkg/object"
)

// The outcomes of one apply, from cli-utils' events alone.
func TestCollectEvents(t *testing.T) {
	obj := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	withRV := func(u *unstructured.Unstructured, rv string) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.SetResourceVersion(rv)
		return u
	}
	id := object.UnstructuredToObjMetadata
	ns := obj("v1", "Namespace", "", "app")
	cm := obj("v1", "ConfigMap", "app", "settings")
	deploy := obj("apps/v1", "Deployment", "app", "web")
	hpa := obj("autoscaling/v2", "HorizontalPodAutoscaler", "app", "web")
	gone := obj("batch/v1", "Job", "app", "migrate") // in the inventory, no longer rendered
	kept := withRV(obj("v1", "Secret", "app", "keep"), "1")
	kept.SetAnnotations(map[string]string{common.OnRemoveAnnotation: common.OnRemoveKeep})
	rendered := []*unstructured.Unstructured{ns, cm, deploy, hpa}
	before := map[object.ObjMetadata]existing{id(cm): {rv: "7"}, id(deploy): {rv: "3"}}
	nsID := id(ns)

	apply := func(u *unstructured.Unstructured, st event.ApplyEventStatus, err error) event.Event {
		return event.Event{Type: event.ApplyType, ApplyEvent: event.ApplyEvent{Identifier: id(u), Resource: u, Status: st, Error: err}}
	}
	prune := func(u *unstructured.Unstructured, st event.PruneEventStatus, err error) event.Event {
		return event.Event{Type: event.PruneType, PruneEvent: event.PruneEvent{Identifier: id(u), Object: u, Status: st, Error: err}}
	}
	wait := func(u *unstructured.Unstructured, st event.WaitEventStatus) event.Event {
		return event.Event{Type: event.WaitType, WaitEvent: event.WaitEvent{Identifier: id(u), Status: st}}
	}
	skippedDep := errors.New("dependency apply actuation skipped")
	nsMissing := errors.New(`namespaces "app" not found`)

	for _, tc := range []struct {
		name      string
		dryRun    bool
		takenBack bool
		events    []event.Event
		want      []ObjectResult
		wantErr   string
		failed    bool // Result.Failed
	}{
		{
			name: "created, configured, unchanged, pruned, kept, reconciled",
			events: []event.Event{
				apply(ns, event.ApplyPending, nil), // pending says nothing yet
				apply(ns, event.ApplySuccessful, nil),
				apply(withRV(cm, "7"), event.ApplySuccessful, nil),
				apply(withRV(deploy, "4"), event.ApplySuccessful, nil),
				prune(gone, event.PrunePending, nil),
				prune(gone, event.PruneSuccessful, nil),
				prune(kept, event.PruneSkipped, errors.New("annotated")),
				wait(ns, event.ReconcilePending),
				wait(ns, event.ReconcileSuccessful),
				wait(cm, event.ReconcileSuccessful),
				wait(deploy, event.ReconcileSuccessful),
				wait(obj("v1", "Pod", "app", "never-applied"), event.ReconcileSuccessful), // not one of ours
			},
			want: []ObjectResult{
				{Key: "apps_v1_Deployment|app|web", Action: Configured, Status: "Current"},
				{Key: "batch_v1_Job|app|migrate", Action: Pruned},
				{Key: "~G_v1_ConfigMap|app|settings", Action: Unchanged, Status: "Current"},
				{Key: "~G_v1_Namespace||app", Action: Created, Status: "Current"},
				{Key: "~G_v1_Secret|app|keep", Action: Kept, Reason: "annotated to be kept on removal"},
			},
		},
		{
			name: "a failure, a skip, a prune that failed and a wait that timed out",
			events: []event.Event{
				apply(cm, event.ApplyFailed, errors.New("admission webhook denied")),
				apply(deploy, event.ApplySkipped, errors.New("inventory policy prevented actuation")),
				apply(hpa, event.ApplySuccessful, nil),
				wait(hpa, event.ReconcileTimeout),
				prune(gone, event.PruneFailed, errors.New("forbidden")),
				prune(withRV(obj("v1", "Service", "app", "old"), "2"), event.PruneSkipped, errors.New("object has dependents")),
			},
			want: []ObjectResult{
				{Key: "apps_v1_Deployment|app|web", Action: Skipped, Reason: "inventory policy prevented actuation"},
				{Key: "autoscaling_v2_HorizontalPodAutoscaler|app|web", Action: Created, Status: "InProgress"},
				{Key: "batch_v1_Job|app|migrate", Action: Failed, Error: "forbidden"},
				{Key: "~G_v1_ConfigMap|app|settings", Action: Failed, Error: "admission webhook denied"},
				{Key: "~G_v1_Service|app|old", Action: Skipped, Reason: "object has dependents"},
			},
			failed: true,
		},
		{
			name: "a reconcile that failed, then the status kept through a later event",
			events: []event.Event{
				apply(hpa, event.ApplySuccessful, nil),
				wait(hpa, event.ReconcileFailed),
				apply(hpa, event.ApplySuccessful, nil),
			},
			want:   []ObjectResult{{Key: "autoscaling_v2_HorizontalPodAutoscaler|app|web", Action: Created, Status: "Failed"}},
			failed: true,
		},
		{
			name: "validation errors and an error that stops the apply",
			events: []event.Event{
				{Type: event.ValidationType, ValidationEvent: event.ValidationEvent{Identifiers: object.ObjMetadataSet{id(cm), id(deploy)}, Error: errors.New("invalid object")}},
				{Type: event.ErrorType, ErrorEvent: event.ErrorEvent{Err: errors.New("connection refused")}},
				{Type: event.ErrorType, ErrorEvent: event.ErrorEvent{Err: errors.New("context canceled")}},
			},
			want: []ObjectResult{
				{Key: "apps_v1_Deployment|app|web", Action: Failed, Error: "invalid object"},
				{Key: "~G_v1_ConfigMap|app|settings", Action: Failed, Error: "invalid object"},
			},
			wantErr: "connection refused\ncontext canceled",
			failed:  true,
		},
		{
			name:   "dry run: objects in a namespace the apply creates",
			dryRun: true,
			events: []event.Event{
				apply(ns, event.ApplySuccessful, nil),
				apply(deploy, event.ApplySuccessful, nil),
				apply(hpa, event.ApplyFailed, nsMissing),
				apply(obj("v1", "ConfigMap", "elsewhere", "x"), event.ApplyFailed, errors.New(`namespaces "elsewhere" not found`)),
			},
			want: []ObjectResult{
				{Key: "apps_v1_Deployment|app|web", Action: Configured},
				{Key: "autoscaling_v2_HorizontalPodAutoscaler|app|web", Action: Created, Reason: "in a namespace this apply creates; not checked by the server"},
				{Key: "~G_v1_ConfigMap|elsewhere|x", Action: Failed, Error: `namespaces "elsewhere" not found`},
				{Key: "~G_v1_Namespace||app", Action: Created},
			},
			failed: true,
		},
		{
			name:      "dry run: the inventory's Namespace returns, with what is in it",
			dryRun:    true,
			takenBack: true,
			events: []event.Event{
				apply(ns, event.ApplySkipped, errors.New("inventory policy prevented actuation")),
				apply(cm, event.ApplySkipped, skippedDep),
				apply(hpa, event.ApplySkipped, skippedDep),
			},
			want: []ObjectResult{
				{Key: "autoscaling_v2_HorizontalPodAutoscaler|app|web", Action: Created, Reason: "in a namespace the apply returns to the inventory; not checked by the server"},
				{Key: "~G_v1_ConfigMap|app|settings", Action: Configured, Reason: "in a namespace the apply returns to the inventory; not checked by the server"},
				{Key: "~G_v1_Namespace||app", Action: Configured, Reason: "kept for the inventory when it left the overlay; the apply returns it to the inventory"},
			},
		},
		{
			name: "without the return, the same skips are skips",
			events: []event.Event{
				apply(ns, event.ApplySkipped, errors.New("inventory policy prevented actuation")),
				apply(cm, event.ApplySkipped, skippedDep),
			},
			want: []ObjectResult{
				{Key: "~G_v1_ConfigMap|app|settings", Action: Skipped, Reason: skippedDep.Error()},
				{Key: "~G_v1_Namespace||app", Action: Skipped, Reason: "inventory policy prevented actuation"},
			},
			failed: true,
		},
		{name: "no events", want: []ObjectResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := make(chan event.Event, len(tc.events))
			for _, ev := range tc.events {
				events <- ev
			}
			close(events)
			var seen int
			c := collector{objs: rendered, before: before, dryRun: tc.dryRun, onEvent: func(event.Event) { seen++ }}
			if tc.takenBack {
				c.takenBack = &nsID
			}
			got, err := c.collect(events)
			if !slices.Equal(got, tc.want) {
				t.Errorf("objects:\n got %+v\nwant %+v", got, tc.want)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if seen != len(tc.events) {
				t.Errorf("OnEvent saw %d of %d events", seen, len(tc.events))
			}
			if f := (&Result{Objects: got}).Failed(); f != tc.failed {
				t.Errorf("Failed() = %v", f)
			}
		})
	}
}

// A key names the version the object was rendered in; a pruned object's
// comes from the cluster's copy.
func TestCollectorKey(t *testing.T) {
	hpa := &unstructured.Unstructured{}
	hpa.SetAPIVersion("autoscaling/v2")
	hpa.SetKind("HorizontalPodAutoscaler")
	hpa.SetNamespace("app")
	hpa.SetName("web")
	c := collector{objs: []*unstructured.Unstructured{hpa}}
	v1 := hpa.DeepCopy()
	v1.SetAPIVersion("autoscaling/v1")
	if k := c.key(object.UnstructuredToObjMetadata(hpa), v1); k != "autoscaling_v2_HorizontalPodAutoscaler|app|web" {
		t.Errorf("rendered: %s", k)
	}
	job := object.ObjMetadata{GroupKind: schema.GroupKind{Group: "batch", Kind: "Job"}, Namespace: "app", Name: "old"}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("batch/v1")
	if k := c.key(job, cluster); k != "batch_v1_Job|app|old" {
		t.Errorf("pruned: %s", k)
	}
	if k := c.key(job, nil); !strings.HasPrefix(k, "batch_~V_Job") {
		t.Errorf("unknown version: %s", k)
	}
}
