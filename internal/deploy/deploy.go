// Package deploy applies a rendered overlay to a cluster and prunes what
// left it, through an inventory, on sigs.k8s.io/cli-utils' applier:
// server-side apply, dependency ordering (Namespaces and CRDs first,
// config.kubernetes.io/depends-on), prune with keep/detach annotations
// honoured, and a kstatus wait for reconciliation.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/cli-utils/pkg/apply"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	"sigs.k8s.io/cli-utils/pkg/common"
	"sigs.k8s.io/cli-utils/pkg/inventory"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	"sigs.k8s.io/cli-utils/pkg/object"
	sigsyaml "sigs.k8s.io/yaml"

	kinv "github.com/kplan-dev/kplan/internal/inventory"
)

// FieldManager is the server-side apply field manager kplan applies with.
const FieldManager = "kplan"

// Options control one apply.
type Options struct {
	DryRun bool
	// InventoryPolicy: "must-match" (default), "adopt-if-no-inventory" or
	// "adopt-all", as cli-utils' policies.
	InventoryPolicy string
	// PrunePropagation: "Background" (default), "Foreground" or "Orphan".
	PrunePropagation string
	// ReconcileTimeout bounds the wait for applied objects to become
	// Current (kstatus); 0 waits without a limit. cli-utils always waits
	// between dependency groups (a CRD before its resources), so there is
	// no "do not wait".
	ReconcileTimeout time.Duration
	// AllowEmpty permits an apply of zero objects, which prunes everything
	// the inventory holds.
	AllowEmpty bool
	// NoPrune applies without deleting anything.
	NoPrune bool
	// Namespace receives the namespaced objects (and the inventory)
	// rendered without a namespace; "" is DefaultNamespace.
	Namespace string
	// AllowReplaceInventory permits an apply that prunes every object the
	// inventory held while it adds others (see ReplaceInventoryError).
	AllowReplaceInventory bool
	// OnEvent, if set, sees every cli-utils event as it happens.
	OnEvent func(event.Event)
}

// Action is what happened to one object.
type Action string

const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Pruned     Action = "pruned"
	Kept       Action = "left in the cluster"
	Skipped    Action = "skipped"
	Failed     Action = "failed"
)

// ObjectResult is the outcome for one object.
type ObjectResult struct {
	Key    string `json:"key"` // seed format, as in the plan
	Action Action `json:"action"`
	Reason string `json:"reason,omitempty"` // why skipped or kept
	Error  string `json:"error,omitempty"`
	// Status is the reconcile outcome: Current, InProgress (timed out),
	// Failed, Skipped, or "" when not waited for.
	Status string `json:"status,omitempty"`
}

// Result is the outcome of an apply.
type Result struct {
	Inventory kinv.Identity  `json:"inventory"`
	DryRun    bool           `json:"dryRun"`
	Objects   []ObjectResult `json:"objects"`
	// Warnings explain what the objects alone do not, such as objects
	// another inventory owns after this overlay's inventory was renamed.
	Warnings []string `json:"warnings,omitempty"`
}

// Keys lists the objects that met an action, sorted.
func (r *Result) Keys(a Action) []string {
	var out []string
	for _, o := range r.Objects {
		if o.Action == a {
			out = append(out, o.Key)
		}
	}
	slices.Sort(out)
	return out
}

// Failed reports whether any object failed, was skipped (an inventory
// policy or a failed dependency stopped it) or did not reconcile.
func (r *Result) Failed() bool {
	for _, o := range r.Objects {
		if o.Action == Failed || o.Action == Skipped || o.Status == "Failed" || o.Status == "InProgress" {
			return true
		}
	}
	return false
}

// Engine applies to one cluster.
type Engine struct {
	factory cmdutil.Factory
	// statusWatcher makes the status watcher an apply reads, behind its
	// statusGate: cli-utils' default; a test gives a noisier one.
	statusWatcher func(dynamic.Interface, meta.RESTMapper) watcher.StatusWatcher
	// Checks are the pre-apply checks Apply and the live plan's dry run
	// (RunChecks) run; nil is Checks(). A test sets checks that record
	// what they are given.
	Checks []Check
}

// New makes an Engine for the cluster getter points at (a kubeconfig and
// context, or in-cluster config).
func New(getter genericclioptions.RESTClientGetter) *Engine {
	return &Engine{factory: cmdutil.NewFactory(getter), statusWatcher: defaultWatcher}
}

// Apply applies objs and prunes what the inventory object invObj recorded
// before and objs no longer hold.
//
// Namespaced objects in objs rendered without a namespace are given
// opts.Namespace in place. Before anything is applied, the inventory's
// object list in the cluster is read and an apply that would prune all of
// it while adding others is refused (ReplaceInventoryError) unless
// opts.AllowReplaceInventory; a dry run reports the refusal too.
func (e *Engine) Apply(ctx context.Context, invObj *unstructured.Unstructured, objs []*unstructured.Unstructured, opts Options) (*Result, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	if invObj.GetNamespace() == "" {
		invObj.SetNamespace(ns)
	}
	inv := inventoryOf(invObj)
	res := &Result{Inventory: inv, DryRun: opts.DryRun, Objects: []ObjectResult{}}
	policy, err := parsePolicy(opts.InventoryPolicy)
	if err != nil {
		return res, err
	}
	propagation, err := parsePropagation(opts.PrunePropagation)
	if err != nil {
		return res, err
	}
	dyn, err := e.factory.DynamicClient()
	if err != nil {
		return res, fmt.Errorf("connect to the cluster: %w", err)
	}
	mapper, err := e.factory.ToRESTMapper()
	if err != nil {
		return res, fmt.Errorf("connect to the cluster: %w", err)
	}

	invClient, err := inventoryClient(ctx, e.factory, dyn, mapper, inv, opts.DryRun)
	if err != nil {
		return res, err
	}

	if err := defaultNamespaces(mapper, objs, ns); err != nil {
		return res, err
	}
	prev, isNew, err := previousObjects(ctx, invClient, inv)
	if err != nil {
		return res, err
	}
	if err := e.RunChecks(CheckInput{Inventory: inv, Previous: prev, Objects: objs, Options: opts}); err != nil {
		return res, err
	}
	before, err := existingVersions(ctx, dyn, mapper, objs)
	if err != nil {
		return res, err
	}
	if err := protectInventoryNamespace(ctx, dyn, inv, prev, objs, opts.DryRun); err != nil {
		return res, err
	}
	takenBack, err := takeBackNamespace(ctx, dyn, inv, objs, opts.DryRun)
	if err != nil {
		return res, err
	}

	gate := newStatusGate()
	applier, err := apply.NewApplierBuilder().WithFactory(e.factory).WithDynamicClient(tolerantDynamic{dyn}).WithInventoryClient(invClient).
		WithStatusWatcher(gate.watcher(e.statusWatcher(tolerantDynamic{dyn}, mapper))).Build()
	if err != nil {
		return res, fmt.Errorf("build applier: %w", err)
	}
	aopts := apply.ApplierOptions{
		ServerSideOptions:      common.ServerSideOptions{ServerSideApply: true, ForceConflicts: true, FieldManager: FieldManager},
		ReconcileTimeout:       opts.ReconcileTimeout,
		NoPrune:                opts.NoPrune,
		PrunePropagationPolicy: propagation,
		InventoryPolicy:        policy,
		PruneTimeout:           time.Minute,
	}
	if opts.DryRun {
		aopts.DryRunStrategy = common.DryRunServer
	}
	c := collector{objs: objs, before: before, dryRun: opts.DryRun, onEvent: opts.OnEvent, gate: gate}
	if takenBack {
		ns := inventoryNamespaceID(inv)
		c.takenBack = &ns
	}
	objects, fatal := c.collect(applier.Run(ctx, objectInfo(inv), objs, aopts))
	res.Objects = objects
	owners := map[string]string{}
	for id, ex := range before {
		owners[c.key(id, nil)] = ex.owner
	}
	res.Warnings = foreignWarnings(ctx, dyn, inv, isNew, res, owners)
	if fatal != nil {
		return res, fmt.Errorf("apply with %s: %w", inv, fatal)
	}
	return res, nil
}

// collector turns the events of one cli-utils apply into its objects'
// outcomes.
type collector struct {
	objs   []*unstructured.Unstructured // what was applied
	before map[object.ObjMetadata]existing
	dryRun bool
	// takenBack is the inventory's Namespace when the apply returns it to
	// the inventory (takeBackNamespace); nil otherwise.
	takenBack *object.ObjMetadata
	onEvent   func(event.Event) // sees every event, if set
	gate      *statusGate       // opened by the events that say the inventory task ended

	versions map[object.ObjMetadata]string // the rendered apiVersion of each object
}

// collect reads events until the channel closes and returns every
// object's outcome, sorted by key, and the errors that stopped the apply
// (nil for none). An object met by several events keeps the last action
// and its reconcile status.
func (c *collector) collect(events <-chan event.Event) ([]ObjectResult, error) {
	out := []ObjectResult{}
	byKey := map[string]int{}
	record := func(r ObjectResult) {
		if i, ok := byKey[r.Key]; ok {
			if r.Status == "" {
				r.Status = out[i].Status
			}
			out[i] = r
			return
		}
		byKey[r.Key] = len(out)
		out = append(out, r)
	}
	var fatal []error
	for ev := range events {
		if c.gate != nil {
			c.gate.seen(ev)
		}
		if c.onEvent != nil {
			c.onEvent(ev)
		}
		switch ev.Type {
		case event.ErrorType:
			fatal = append(fatal, ev.ErrorEvent.Err)
		case event.ValidationType:
			for _, id := range ev.ValidationEvent.Identifiers {
				record(ObjectResult{Key: c.key(id, nil), Action: Failed, Error: errString(ev.ValidationEvent.Error)})
			}
		case event.ApplyType:
			if r, ok := c.applied(ev.ApplyEvent); ok {
				record(r)
			}
		case event.PruneType:
			if r, ok := c.pruned(ev.PruneEvent); ok {
				record(r)
			}
		case event.WaitType:
			we := ev.WaitEvent
			if i, ok := byKey[c.key(we.Identifier, nil)]; ok && waitStatus[we.Status] != "" {
				out[i].Status = waitStatus[we.Status]
			}
		}
	}
	slices.SortFunc(out, func(a, b ObjectResult) int { return strings.Compare(a.Key, b.Key) })
	return out, errors.Join(fatal...)
}

// waitStatus is the reconcile status a wait event reports.
var waitStatus = map[event.WaitEventStatus]string{
	event.ReconcileSuccessful: "Current", event.ReconcileTimeout: "InProgress",
	event.ReconcileFailed: "Failed", event.ReconcileSkipped: "Skipped",
}

// applied is the outcome an apply event reports; ok is false for one that
// reports none (pending).
func (c *collector) applied(ae event.ApplyEvent) (r ObjectResult, ok bool) {
	k := c.key(ae.Identifier, ae.Resource)
	switch ae.Status {
	case event.ApplySuccessful:
		return ObjectResult{Key: k, Action: applied(ae.Identifier, ae.Resource, c.before, c.dryRun)}, true
	case event.ApplySkipped:
		if c.takenBack != nil && c.dryRun {
			// The real apply returns the Namespace first, so it and
			// what is in it are not skipped.
			if r, ok := takenBackResult(ae.Identifier, ae.Error, *c.takenBack, c.before); ok {
				r.Key = k
				return r, true
			}
		}
		return ObjectResult{Key: k, Action: Skipped, Reason: errString(ae.Error)}, true
	case event.ApplyFailed:
		if c.dryRun && inNewNamespace(ae.Identifier, ae.Error, c.objs) {
			// A server dry run cannot create the namespace this
			// apply creates, so the server refuses what goes in it.
			return ObjectResult{Key: k, Action: Created, Reason: "in a namespace this apply creates; not checked by the server"}, true
		}
		return ObjectResult{Key: k, Action: Failed, Error: errString(ae.Error)}, true
	}
	return ObjectResult{}, false
}

// pruned is the outcome a prune event reports; ok is false for one that
// reports none (pending).
func (c *collector) pruned(pe event.PruneEvent) (r ObjectResult, ok bool) {
	k := c.key(pe.Identifier, pe.Object)
	switch pe.Status {
	case event.PruneSuccessful:
		return ObjectResult{Key: k, Action: Pruned}, true
	case event.PruneSkipped:
		if keptByAnnotation(pe.Object) {
			return ObjectResult{Key: k, Action: Kept, Reason: "annotated to be kept on removal"}, true
		}
		return ObjectResult{Key: k, Action: Skipped, Reason: errString(pe.Error)}, true
	case event.PruneFailed:
		return ObjectResult{Key: k, Action: Failed, Error: errString(pe.Error)}, true
	}
	return ObjectResult{}, false
}

// key is an object's seed key, with the version it was rendered in (the
// event's object's, for objects the render no longer has).
func (c *collector) key(id object.ObjMetadata, obj *unstructured.Unstructured) string {
	if c.versions == nil {
		c.versions = map[object.ObjMetadata]string{}
		for _, o := range c.objs {
			c.versions[object.UnstructuredToObjMetadata(o)] = o.GetAPIVersion()
		}
	}
	v := c.versions[id]
	if v == "" && obj != nil {
		v = obj.GetAPIVersion()
	}
	if i := strings.LastIndex(v, "/"); i >= 0 {
		v = v[i+1:]
	}
	return kinv.ID{Group: id.GroupKind.Group, Version: v, Kind: id.GroupKind.Kind, Namespace: id.Namespace, Name: id.Name}.Key()
}

// inNewNamespace reports whether a dry-run apply failed only because the
// object's namespace does not exist yet while the apply set creates it.
func inNewNamespace(id object.ObjMetadata, err error, objs []*unstructured.Unstructured) bool {
	if err == nil || id.Namespace == "" || !strings.Contains(err.Error(), fmt.Sprintf("namespaces %q not found", id.Namespace)) {
		return false
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == id.Namespace {
			return true
		}
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func keptByAnnotation(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return false
	}
	a := obj.GetAnnotations()
	return a[common.OnRemoveAnnotation] == common.OnRemoveKeep || a[common.LifecycleDeleteAnnotation] == common.PreventDeletion
}

func parsePolicy(s string) (inventory.Policy, error) {
	switch s {
	case "", "must-match":
		return inventory.PolicyMustMatch, nil
	case "adopt-if-no-inventory":
		return inventory.PolicyAdoptIfNoInventory, nil
	case "adopt-all":
		return inventory.PolicyAdoptAll, nil
	}
	return 0, fmt.Errorf("inventory policy %q: want must-match, adopt-if-no-inventory or adopt-all", s)
}

func parsePropagation(s string) (metav1.DeletionPropagation, error) {
	switch s {
	case "", "Background":
		return metav1.DeletePropagationBackground, nil
	case "Foreground":
		return metav1.DeletePropagationForeground, nil
	case "Orphan":
		return metav1.DeletePropagationOrphan, nil
	}
	return "", fmt.Errorf("prune propagation %q: want Background, Foreground or Orphan", s)
}

// existingVersions records the resourceVersion of every object about to be
// applied that already exists, with one metadata LIST per kind and
// namespace, so the result can tell created, configured and unchanged.
func existingVersions(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured) (map[object.ObjMetadata]existing, error) {
	type scope struct {
		gvk schema.GroupVersionKind
		ns  string
	}
	scopes := map[scope]bool{}
	for _, o := range objs {
		scopes[scope{o.GroupVersionKind(), o.GetNamespace()}] = true
	}
	out := map[object.ObjMetadata]existing{}
	for s := range scopes {
		m, err := mapper.RESTMapping(s.gvk.GroupKind(), s.gvk.Version)
		if err != nil {
			continue // a kind this apply defines (a CRD's resources): nothing exists yet
		}
		var list *unstructured.UnstructuredList
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			list, err = dyn.Resource(m.Resource).Namespace(s.ns).List(ctx, metav1.ListOptions{})
		} else {
			list, err = dyn.Resource(m.Resource).List(ctx, metav1.ListOptions{})
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s in the cluster: %w", m.Resource.Resource, err)
		}
		for i := range list.Items {
			it := &list.Items[i]
			out[object.UnstructuredToObjMetadata(it)] = existing{rv: it.GetResourceVersion(), owner: it.GetAnnotations()[inventory.OwningInventoryKey]}
		}
	}
	return out, nil
}

// existing is what an object in the cluster was before the apply.
type existing struct {
	rv    string // resourceVersion
	owner string // the inventory-id that owns it, "" for none
}

func applied(id object.ObjMetadata, after *unstructured.Unstructured, before map[object.ObjMetadata]existing, dryRun bool) Action {
	ex, existed := before[id]
	rv := ex.rv
	switch {
	case !existed:
		return Created
	case after == nil || dryRun:
		return Configured
	case after.GetResourceVersion() == rv:
		return Unchanged
	default:
		return Configured
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ensureCRD installs an inventory backend's CRD (data, named name) when
// the cluster lacks it and waits until it is established. In a dry run it
// only reports whether the CRD is there.
func ensureCRD(ctx context.Context, dyn dynamic.Interface, data []byte, name string, dryRun bool) (bool, error) {
	crds := dyn.Resource(crdGVR)
	got, err := crds.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && established(got):
		return true, nil
	case err == nil:
		// Another deploy (a target beside this one) has just created it:
		// wait, as for our own, until it is served.
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("look up the CRD %s: %w", name, err)
	case dryRun:
		return false, nil
	default:
		var crd unstructured.Unstructured
		if err := sigsyaml.Unmarshal(data, &crd.Object); err != nil {
			return false, fmt.Errorf("the CRD %s: %w", name, err)
		}
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("install the CRD %s (kplan needs permission to create CustomResourceDefinitions once): %w", name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err == nil && established(got) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false, fmt.Errorf("the CRD %s was created but is not established after 30s", name)
}

// awaitMapping resets mapper until it maps gvk: discovery may lag a CRD
// that has just become established (the inventory client needs its
// mapping), up to 30 s.
func awaitMapping(ctx context.Context, mapper meta.RESTMapper, gvk schema.GroupVersionKind) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		meta.MaybeResetRESTMapper(mapper)
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not serve %s yet: %w", gvk.Kind, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// previousObjects reads, through cli-utils' inventory client, the object
// list the inventory holds in the cluster; isNew says the inventory object
// does not exist yet (or its kind is not installed).
func previousObjects(ctx context.Context, invClient inventory.Client, inv kinv.Identity) (prev []object.ObjMetadata, isNew bool, err error) {
	got, err := invClient.Get(ctx, objectInfo(inv), inventory.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s in the cluster: %w", inv, err)
	}
	return got.GetObjectRefs(), false, nil
}

// tolerantDynamic works around cli-utils at the pinned master commit:
// its inventory task creates the inventory's Namespace with Create and
// fails when the Namespace exists, so every re-apply of an overlay that
// renders its own inventory namespace would fail. cli-utils v0.37.2 and
// kubectl accept an existing namespace; so does this wrapper.
type tolerantDynamic struct{ dynamic.Interface }

func (d tolerantDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := d.Interface.Resource(gvr)
	if gvr.Group == "" && gvr.Resource == "namespaces" {
		return tolerantNamespaces{r}
	}
	return r
}

type tolerantNamespaces struct {
	dynamic.NamespaceableResourceInterface
}

func (n tolerantNamespaces) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	u, err := n.NamespaceableResourceInterface.Create(ctx, obj, opts, sub...)
	if apierrors.IsAlreadyExists(err) && len(sub) == 0 {
		return n.Get(ctx, obj.GetName(), metav1.GetOptions{})
	}
	return u, err
}
