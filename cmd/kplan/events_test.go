package main

import (
	"bytes"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	"sigs.k8s.io/cli-utils/pkg/object"
)

func TestApplyEventsPrintEachObject(t *testing.T) {
	web := object.ObjMetadata{GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}, Name: "web", Namespace: "prod"}
	ns := object.ObjMetadata{GroupKind: schema.GroupKind{Kind: "Namespace"}, Name: "old"}
	for _, tc := range []struct {
		name string
		e    event.Event
		want string
	}{
		{"applied", event.Event{Type: event.ApplyType, ApplyEvent: event.ApplyEvent{Identifier: web, Status: event.ApplySuccessful}}, "kplan apply: Deployment web (prod) applied\n"},
		{"apply failed", event.Event{Type: event.ApplyType, ApplyEvent: event.ApplyEvent{Identifier: web, Status: event.ApplyFailed, Error: errors.New("forbidden")}}, "kplan apply: Deployment web (prod) failed: forbidden\n"},
		{"pending is not news", event.Event{Type: event.ApplyType, ApplyEvent: event.ApplyEvent{Identifier: web, Status: event.ApplyPending}}, ""},
		{"pruned", event.Event{Type: event.PruneType, PruneEvent: event.PruneEvent{Identifier: ns, Status: event.PruneSuccessful}}, "kplan apply: Namespace old pruned\n"},
		{"reconciled", event.Event{Type: event.WaitType, WaitEvent: event.WaitEvent{Identifier: web, Status: event.ReconcileSuccessful}}, "kplan apply: Deployment web (prod) reconciled\n"},
		{"timeout", event.Event{Type: event.WaitType, WaitEvent: event.WaitEvent{Identifier: web, Status: event.ReconcileTimeout}}, "kplan apply: Deployment web (prod) not reconciled in time\n"},
		{"error", event.Event{Type: event.ErrorType, ErrorEvent: event.ErrorEvent{Err: errors.New("boom")}}, "kplan apply: error: boom\n"},
	} {
		var b bytes.Buffer
		applyEvents(&b)(tc.e)
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}
