package deployer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kplan-dev/kplan/internal/deploy"
)

// How the end of an apply is classified.
func TestApplyReason(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	ok := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Created, Status: "Current"}}}
	stuck := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Created, Status: "InProgress"}}}
	skipped := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "a", Action: deploy.Skipped}}}
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
		{"a copied inventory refused", context.Background(), &deploy.Result{}, fmt.Errorf("x: %w", &deploy.ReplaceInventoryError{}), ReasonRefused},
		{"an empty render refused", context.Background(), &deploy.Result{}, &deploy.EmptyError{}, ReasonRefused},
		{"the cluster unreachable", context.Background(), nil, errors.New("dial tcp: connection refused"), ReasonApplyFailed},
		{"the run ended mid-apply", canceled, &deploy.Result{}, context.Canceled, ReasonInterrupted},
	} {
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
