package deploy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/cli-utils/pkg/inventory"
	"sigs.k8s.io/cli-utils/pkg/object"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/resourcegroup"
)

// backend is how an apply records its objects in one kind of inventory
// object: a row for each row of kinv.Backends (which says what the kind
// is; this says how the applier reads and writes it). A new backend is a
// row there and a row here.
type backend struct {
	// clients makes the cli-utils inventory client.
	clients inventory.ClientFactory
	// crd, for a custom resource, is its CustomResourceDefinition
	// (named crdName), installed before the first apply through it.
	crd     []byte
	crdName string
}

func backends() map[string]backend {
	return map[string]backend{
		"ResourceGroup": {clients: resourcegroup.ClientFactory{}, crd: resourcegroup.CRD, crdName: resourcegroup.CRDName},
		"ConfigMap":     {clients: inventory.ConfigMapClientFactory{StatusEnabled: true}},
	}
}

// inventoryClient is the cli-utils client of inv's backend. Unless
// dryRun, a backend's CRD the cluster lacks is installed first. Without
// its CRD (in a dry run) nothing can have been applied through the kind
// yet: an empty ConfigMap-backed inventory stands in, and a dry run
// writes no inventory anyway.
func inventoryClient(ctx context.Context, f cmdutil.Factory, dyn dynamic.Interface, mapper meta.RESTMapper, inv kinv.Identity, dryRun bool) (inventory.Client, error) {
	row, ok := kinv.BackendOf(inv.Kind)
	b, known := backends()[row.Kind]
	if !ok || !known {
		return nil, fmt.Errorf("inventory %s: kind %q: want %s", inv, inv.Kind, kinv.BackendKinds())
	}
	clients := b.clients
	if b.crd != nil {
		installed, err := ensureCRD(ctx, dyn, b.crd, b.crdName, dryRun)
		if err != nil {
			return nil, err
		}
		if installed {
			gvk := gvrOf(row).GroupVersion().WithKind(row.Kind)
			if err := awaitMapping(ctx, mapper, gvk); err != nil {
				return nil, err
			}
		} else {
			clients = inventory.ConfigMapClientFactory{StatusEnabled: true}
		}
	}
	c, err := clients.NewClient(f)
	if err != nil {
		return nil, fmt.Errorf("inventory client for %s: %w", inv, err)
	}
	return c, nil
}

// Previous reads the object list the live inventory object holds, as an
// apply would before it prunes; nil when it does not exist yet. Nothing
// is installed or written.
func (e *Engine) Previous(ctx context.Context, invObj *unstructured.Unstructured) ([]object.ObjMetadata, error) {
	inv := inventoryOf(invObj)
	dyn, err := e.factory.DynamicClient()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	mapper, err := e.factory.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	c, err := inventoryClient(ctx, e.factory, dyn, mapper, inv, true)
	if err != nil {
		return nil, err
	}
	prev, _, err := previousObjects(ctx, c, inv)
	return prev, err
}
