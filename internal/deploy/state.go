package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The inventory object carries what was last deployed, so that a
// restarted webhook knows where each target stands without a database.
// State is that record, read and written here only: the deployer writes
// it, the deployer, the live plan and the drift check read it.

// Annotations of the deployed state on the inventory object.
const (
	AnnotationSHA     = "kplan.dev/deployed-sha"
	AnnotationOutcome = "kplan.dev/outcome" // OutcomeSuccess or OutcomeFailure
	// AnnotationReason is the reason of the outcome (deployer.Reason).
	AnnotationReason  = "kplan.dev/reason"
	AnnotationMessage = "kplan.dev/message"
	AnnotationTime    = "kplan.dev/deployed-at"
	// AnnotationTarget names the target that last deployed through the
	// inventory, so a second target rendering the same inventory is
	// refused even before the first one renders again.
	AnnotationTarget = "kplan.dev/target"
)

// Outcomes a State records.
const (
	OutcomeSuccess = "success" // applied, every object reconciled
	OutcomeFailure = "failure" // the deploy failed
)

// maxMessage bounds the message a State records (annotations are small).
const maxMessage = 1000

// State is what the last deploy through an inventory recorded on it.
type State struct {
	SHA     string // the commit deployed
	Target  string // the target that deployed it (deployer.Target.Key)
	Outcome string // OutcomeSuccess or OutcomeFailure
	Reason  string
	Message string
	Time    time.Time
}

// Deployed reports whether anything was recorded.
func (s State) Deployed() bool { return s.SHA != "" }

// StateOf reads a State from an inventory object's annotations.
func StateOf(ann map[string]string) State {
	s := State{SHA: ann[AnnotationSHA], Target: ann[AnnotationTarget], Outcome: ann[AnnotationOutcome],
		Reason: ann[AnnotationReason], Message: ann[AnnotationMessage]}
	s.Time, _ = time.Parse(time.RFC3339, ann[AnnotationTime]) // zero when absent or not a time
	return s
}

// Annotations are the annotations that record s.
func (s State) Annotations() map[string]string {
	msg := s.Message
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return map[string]string{AnnotationSHA: s.SHA, AnnotationTarget: s.Target, AnnotationOutcome: s.Outcome,
		AnnotationReason: s.Reason, AnnotationMessage: msg, AnnotationTime: s.Time.UTC().Format(time.RFC3339)}
}

// State reads the State the live inventory object records; the zero
// State when it does not exist yet.
func (e *Engine) State(ctx context.Context, invObj *unstructured.Unstructured) (State, error) {
	ann, err := e.annotations(ctx, invObj)
	return StateOf(ann), err
}

// SetState records s on the live inventory object.
func (e *Engine) SetState(ctx context.Context, invObj *unstructured.Unstructured, s State) error {
	return e.annotate(ctx, invObj, s.Annotations())
}

// inventoryResource is the dynamic client of the inventory object.
func (e *Engine) inventoryResource(invObj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	dyn, err := e.factory.DynamicClient()
	if err != nil {
		return nil, err
	}
	mapper, err := e.factory.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	gvk := invObj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	inv := inventoryOf(invObj)
	return dyn.Resource(m.Resource).Namespace(inv.Namespace), nil
}

// annotations reads the live inventory object's annotations; nil when it
// does not exist yet.
func (e *Engine) annotations(ctx context.Context, invObj *unstructured.Unstructured) (map[string]string, error) {
	r, err := e.inventoryResource(invObj)
	if err != nil {
		if isNoMatch(err) {
			return nil, nil // the ResourceGroup CRD is not installed: nothing deployed yet
		}
		return nil, fmt.Errorf("read %s: %w", inventoryOf(invObj), err)
	}
	u, err := r.Get(ctx, invObj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", inventoryOf(invObj), err)
	}
	return u.GetAnnotations(), nil
}

// annotate merges annotations into the live inventory object.
func (e *Engine) annotate(ctx context.Context, invObj *unstructured.Unstructured, ann map[string]string) error {
	r, err := e.inventoryResource(invObj)
	if err != nil {
		return fmt.Errorf("annotate %s: %w", inventoryOf(invObj), err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, invObj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("annotate %s: %w", inventoryOf(invObj), err)
	}
	return nil
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }
