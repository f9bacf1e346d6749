package deploy

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The inventory object carries what was last deployed, so that a
// restarted webhook knows where each target stands without a database.

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

// Annotations reads the live inventory object's annotations; nil when it
// does not exist yet.
func (e *Engine) Annotations(ctx context.Context, invObj *unstructured.Unstructured) (map[string]string, error) {
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

// Annotate merges annotations into the live inventory object.
func (e *Engine) Annotate(ctx context.Context, invObj *unstructured.Unstructured, ann map[string]string) error {
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
