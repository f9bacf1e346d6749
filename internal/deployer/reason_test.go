package deployer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/object"

	"github.com/kplan-dev/kplan/internal/deploy"
)

// How the end of an apply is classified.
func TestApplyReason(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	ok := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Created, Status: "Current"}}}
	stuck := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Created, Status: "InProgress"}}}
	skipped := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Skipped}}}
	// The refusals as the pre-apply checks return them.
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("default")
		u.SetName(name)
		return u
	}
	copied := deploy.RunChecks(deploy.CheckInput{Previous: []object.ObjMetadata{object.UnstructuredToObjMetadata(cm("staging"))},
		Objects: []*unstructured.Unstructured{cm("prod")}})
	empty := deploy.RunChecks(deploy.CheckInput{Previous: []object.ObjMetadata{object.UnstructuredToObjMetadata(cm("staging"))}})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		res  *deploy.Result
		err  error
		want Reason
	}{
		{"applied and reconciled", context.Background(), ok, nil, ReasonDeployed},
		{"an object did not reconcile in time", context.Background(), stuck, nil, ReasonObjectsFailed},
		{"an object was skipped", context.Background(), skipped, nil, ReasonObjectsFailed},
		{"a copied inventory refused", context.Background(), &deploy.Result{}, fmt.Errorf("apply: %w", copied), ReasonRefused},
		{"an empty render refused", context.Background(), &deploy.Result{}, empty, ReasonRefused},
		// A check added later needs no entry here.
		{"any other check's refusal", context.Background(), &deploy.Result{}, &deploy.Refusal{Check: "new", Err: errors.New("no")}, ReasonRefused},
		{"the cluster unreachable", context.Background(), nil, errors.New("dial tcp: connection refused"), ReasonApplyFailed},
		{"the run ended mid-apply", canceled, &deploy.Result{}, context.Canceled, ReasonInterrupted},
	} {
		if tc.want == ReasonRefused && tc.err == nil {
			t.Fatalf("%s: the checks let it go on", tc.name)
		}
		if got := applyReason(tc.ctx, tc.res, tc.err); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	for _, r := range Reasons() {
		if r.Describe() == string(r) {
			t.Errorf("%s has no words", r)
		}
	}
}
