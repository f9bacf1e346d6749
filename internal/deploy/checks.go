package deploy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/common"
	"sigs.k8s.io/cli-utils/pkg/object"

	"github.com/kplan-dev/kplan/internal/declared"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// DefaultNamespace is where namespaced objects rendered without a
// namespace go when the target names none (declared.DefaultNamespace).
const DefaultNamespace = declared.DefaultNamespace

// defaultNamespaces puts every namespaced object rendered without a
// namespace into ns. The scope comes from the API server's RESTMapper,
// else from a CRD in the same render; a kind neither knows is left as
// rendered (the apply then fails on it with the server's reason), and
// cluster-scoped objects are left alone. This is the plan's identity
// rule: an object is its group, kind, namespace and name.
func defaultNamespaces(mapper meta.RESTMapper, objs []*unstructured.Unstructured, ns string) error {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if object.IsCRD(o) {
			crds = append(crds, o)
		}
	}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		scope, err := object.LookupResourceScope(o, crds, mapper)
		if err != nil {
			if _, unknown := err.(*object.UnknownTypeError); unknown || meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("look up whether %s %s is namespaced: %w", o.GetKind(), o.GetName(), err)
		}
		if scope.Name() == meta.RESTScopeNameNamespace {
			o.SetNamespace(ns)
		}
	}
	return nil
}

// foreignWarnings explains objects the inventory policy kept this apply
// from touching because another inventory owns them. When this inventory
// is new in the cluster, the likeliest cause is a renamed inventory (or a
// changed inventory-id): the cluster's objects still belong to the old one.
func foreignWarnings(ctx context.Context, dyn dynamic.Interface, inv kinv.Identity, isNew bool, res *Result, owners map[string]string) []string {
	byOwner := map[string][]string{}
	for _, o := range res.Objects {
		if o.Action != Skipped || !strings.Contains(o.Reason, "inventory policy") {
			continue
		}
		if id := owners[o.Key]; id != "" && id != inv.ID {
			byOwner[id] = append(byOwner[id], o.Key)
		}
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(byOwner)) {
		keys := byOwner[id]
		where := ""
		if holder := findInventory(ctx, dyn, id); holder != "" {
			where = " (" + holder + ")"
		}
		msg := fmt.Sprintf("%d objects this overlay renders belong to another inventory, inventory-id %s%s, and were not applied", len(keys), id, where)
		if isNew {
			msg += fmt.Sprintf(". %s did not exist in the cluster before this apply: if you renamed the overlay's inventory or changed its inventory-id, the objects still belong to the old one — restore its name and namespace, or label the new one %s: %s, and apply again", inv, common.InventoryLabel, id)
		} else {
			msg += ". Two overlays render the same objects, or the objects moved between overlays"
		}
		msg += fmt.Sprintf("; to hand them over, apply with --inventory-policy adopt-all (webhook: inventoryPolicy: adopt-all), then delete the old inventory object%s, which does not delete its objects", where)
		out = append(out, msg)
	}
	return out
}

// findInventory names the inventory object labelled with inventory-id id,
// or "" when none is found (or the lookup fails: it only helps a message).
func findInventory(ctx context.Context, dyn dynamic.Interface, id string) string {
	sel := metav1.ListOptions{LabelSelector: common.InventoryLabel + "=" + id}
	for _, b := range kinv.Backends() {
		l, err := dyn.Resource(gvrOf(b)).List(ctx, sel)
		if err == nil && len(l.Items) > 0 {
			return fmt.Sprintf("%s %s/%s", b.Kind, l.Items[0].GetNamespace(), l.Items[0].GetName())
		}
	}
	return ""
}

func gvrOf(b kinv.Backend) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: b.Group, Version: b.Version, Resource: b.Resource}
}
