package liveplan

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/inventory"
	"sigs.k8s.io/cli-utils/pkg/object"

	"github.com/kplan-dev/kplan/internal/deploy"
	kinv "github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// FieldManager is the field manager the dry-run applies as: the one the
// webhook's real applies use (internal/deploy.FieldManager), so that the
// dry-run removes what the last apply set and this render no longer does.
const FieldManager = deploy.FieldManager

// Action is what apply would do to one object.
type Action string

const (
	Create    Action = "create"
	Configure Action = "configure"
	Unchanged Action = "unchanged"
	Prune     Action = "prune"
	Keep      Action = "keep" // leaves the inventory, stays in the cluster
)

// FindingKind says why the API server (or the inventory) refuses an
// object.
type FindingKind string

const (
	Admission  FindingKind = "admission"   // a ValidatingAdmissionPolicy or an admission webhook denied it
	Immutable  FindingKind = "immutable"   // it changes a field that cannot change
	MissingCRD FindingKind = "missing-crd" // the cluster does not know its kind
	Ownership  FindingKind = "ownership"   // another inventory (or none) owns the live object
	Invalid    FindingKind = "invalid"     // the API server's validation refused it
	Forbidden  FindingKind = "forbidden"   // the webhook's credentials may not apply it
	Refused    FindingKind = "refused"     // any other refusal
)

// Finding is one refusal, with the API server's own message.
type Finding struct {
	Kind    FindingKind `json:"kind"`
	Key     string      `json:"key"`
	Message string      `json:"message"`
}

// Row is one object of the live plan.
type Row struct {
	Key    string `json:"key"`
	Action Action `json:"action"`
	// Drift says the live object differs from what the deployed commit
	// renders although this render does not change it: apply would undo
	// a change made in the cluster.
	Drift  bool                        `json:"drift,omitempty"`
	Fields []inventorydiff.FieldChange `json:"fields,omitempty"`
	// Note explains what the dry-run could not check (an object in a
	// namespace the same apply creates).
	Note    string   `json:"note,omitempty"`
	Finding *Finding `json:"finding,omitempty"`
}

// Result is the live plan of one render against one cluster.
type Result struct {
	Inventory kinv.Identity `json:"inventory"`
	Rows      []Row         `json:"rows"`
	Took      time.Duration `json:"took"`
	// Refused is why the deploy will refuse this apply before changing
	// anything (a pre-apply check of deploy.Checks); "" when none does.
	Refused string `json:"refused,omitempty"`
}

// Count is how many rows have action a.
func (r *Result) Count(a Action) int {
	n := 0
	for _, row := range r.Rows {
		if row.Action == a {
			n++
		}
	}
	return n
}

// Drifted lists the drifted rows.
func (r *Result) Drifted() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Drift {
			out = append(out, row)
		}
	}
	return out
}

// Findings lists every refusal.
func (r *Result) Findings() []Finding {
	var out []Finding
	for _, row := range r.Rows {
		if row.Finding != nil {
			out = append(out, *row.Finding)
		}
	}
	return out
}

// Input is one render to plan against a cluster.
type Input struct {
	Inventory *unstructured.Unstructured
	Objects   []*unstructured.Unstructured
	// Options are the deploy's (deploy.OptionsOf, or kplan apply's
	// flags): the plan puts namespaced objects rendered without a
	// namespace in their Namespace, follows their InventoryPolicy, lists
	// the objects apply prunes unless NoPrune, and hands them to the
	// deploy's pre-apply checks as they are, as the deploy does.
	Options deploy.Options
	// Deployed is what the deployed commit renders; an object rendered
	// the same there whose live copy apply would change (or create
	// again) has drifted. nil: drift is not looked for.
	Deployed []*unstructured.Unstructured
}

// Cluster is how the engine reaches one cluster (deploy.NewGetter).
type Cluster = genericclioptions.RESTClientGetter

// Engine dry-runs renders against one cluster.
type Engine struct {
	cluster Cluster
	deploy  *deploy.Engine // reads the inventory as the deploy does
}

// New makes an Engine for a cluster.
func New(c Cluster) *Engine { return &Engine{cluster: c, deploy: deploy.New(c)} }

// Plan dry-runs in against the cluster: every object is applied
// server-side with DryRun=All (one request each, so that each refusal is
// the API server's own, for its object), compared with the live object,
// and every object the live inventory lists that in lacks is
// dry-run deleted. Nothing is written.
func (e *Engine) Plan(ctx context.Context, in Input) (*Result, error) {
	start := time.Now()
	ns := cmp.Or(in.Options.Namespace, deploy.DefaultNamespace)
	invObj := in.Inventory.DeepCopy()
	if invObj.GetNamespace() == "" {
		invObj.SetNamespace(ns)
	}
	id := kinv.IdentityOf(invObj.GetKind(), invObj.GetName(), invObj.GetNamespace(), invObj.GetLabels(), ns)
	res := &Result{Inventory: id, Rows: []Row{}}
	cfg, err := e.cluster.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	mapper, err := e.cluster.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	p := &planner{lists: map[string]*liveList{}, dyn: dyn, mapper: mapper, inv: id, policy: cmp.Or(in.Options.InventoryPolicy, "must-match"), deployed: map[string]*unstructured.Unstructured{}}
	objs := p.defaulted(in.Objects, ns)
	for _, o := range p.defaulted(in.Deployed, ns) {
		p.deployed[Key(o)] = o
	}
	p.index(objs)
	rendered := map[string]bool{}
	for _, o := range objs {
		rendered[refOf(o.GroupVersionKind().GroupKind(), o.GetNamespace(), o.GetName())] = true
	}
	// A few dry-runs at once: each waits on the API server, which
	// handles them in parallel; the client's rate limit still holds.
	rows := make([]Row, len(objs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(Workers, max(len(objs), 1)) {
		wg.Go(func() {
			for i := range next {
				rows[i] = p.apply(ctx, objs[i])
			}
		})
	}
	for i := range objs {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	prev, err := e.deploy.Previous(ctx, invObj)
	if err != nil {
		return nil, err
	}
	// What the deploy's own checks say, on what it is about to apply,
	// with the options it applies with.
	err = e.deploy.RunChecks(deploy.CheckInput{Inventory: id, Previous: prev, Objects: objs, Options: in.Options})
	switch {
	case errors.Is(err, deploy.ErrRefused):
		res.Refused = err.Error()
	case err != nil:
		return nil, err
	}
	if !in.Options.NoPrune {
		for _, m := range prev {
			if rendered[refOf(m.GroupKind, m.Namespace, m.Name)] {
				continue
			}
			if row, ok := p.prune(ctx, m); ok {
				res.Rows = append(res.Rows, row)
			}
		}
	}
	slices.SortStableFunc(res.Rows, func(a, b Row) int { return strings.Compare(a.Key, b.Key) })
	res.Took = time.Since(start)
	return res, nil
}

// defaulted copies objs, namespaced ones without a namespace put in ns.
func (p *planner) defaulted(objs []*unstructured.Unstructured, ns string) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetNamespace() == "" && p.namespaced(o) {
			o.SetNamespace(ns)
		}
		out = append(out, o)
	}
	return out
}

// Workers is how many objects one Plan dry-runs at once.
const Workers = 8

// live reads a live object through one List per resource and namespace:
// a request per object would double the requests the client's rate
// limit lets through. Not found is apierrors.IsNotFound.
func (p *planner) live(ctx context.Context, m *meta.RESTMapping, ns, name string) (*unstructured.Unstructured, error) {
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	key := m.Resource.String() + "\x00" + ns
	p.mu.Lock()
	l, ok := p.lists[key]
	if !ok {
		l = &liveList{}
		p.lists[key] = l
	}
	p.mu.Unlock()
	l.once.Do(func() {
		var r dynamic.ResourceInterface = p.dyn.Resource(m.Resource)
		if ns != "" {
			r = p.dyn.Resource(m.Resource).Namespace(ns)
		}
		list, err := r.List(ctx, metav1.ListOptions{})
		if err != nil {
			l.err = err
			return
		}
		l.items = make(map[string]*unstructured.Unstructured, len(list.Items))
		for i := range list.Items {
			l.items[list.Items[i].GetName()] = &list.Items[i]
		}
	})
	if l.err != nil {
		if apierrors.IsNotFound(l.err) {
			// The namespace does not exist: neither does the object.
			return nil, apierrors.NewNotFound(m.Resource.GroupResource(), name)
		}
		return nil, l.err
	}
	if o := l.items[name]; o != nil {
		return o.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(m.Resource.GroupResource(), name)
}

// liveList is one resource's live objects in one namespace.
type liveList struct {
	once  sync.Once
	items map[string]*unstructured.Unstructured
	err   error
}

// planner holds what one Plan shares across its objects.
type planner struct {
	mu       sync.Mutex
	lists    map[string]*liveList
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	inv      kinv.Identity
	policy   string
	deployed map[string]*unstructured.Unstructured
	// newNamespaces and newKinds are what the render creates that the
	// cluster lacks: objects that need them cannot be dry-run before
	// they exist.
	newNamespaces map[string]bool
	renderedCRDs  map[schema.GroupKind]bool
}

func refOf(gk schema.GroupKind, ns, name string) string {
	return gk.Group + "|" + gk.Kind + "|" + ns + "|" + name
}

func (p *planner) namespaced(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	m, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace
}

func (p *planner) index(objs []*unstructured.Unstructured) {
	p.newNamespaces = map[string]bool{}
	p.renderedCRDs = map[schema.GroupKind]bool{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == "" && gvk.Kind == "Namespace":
			p.newNamespaces[o.GetName()] = true
		case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
			g, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			k, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			p.renderedCRDs[schema.GroupKind{Group: g, Kind: k}] = true
		}
	}
}

var nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// apply dry-runs one object.
func (p *planner) apply(ctx context.Context, o *unstructured.Unstructured) Row {
	row := Row{Key: Key(o)}
	gvk := o.GroupVersionKind()
	m, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) && p.renderedCRDs[gvk.GroupKind()] {
			row.Action, row.Note = Create, "its CustomResourceDefinition is created by this apply: the API server cannot check it before"
			return row
		}
		row.Action = Create
		row.Finding = p.finding(row.Key, err, o)
		return row
	}
	var r dynamic.ResourceInterface = p.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = p.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	live, err := p.live(ctx, m, o.GetNamespace(), o.GetName())
	switch {
	case apierrors.IsNotFound(err):
		live = nil
		row.Action = Create
	case err != nil:
		row.Action = Create
		row.Finding = p.finding(row.Key, err, o)
		return row
	default:
		row.Action = Configure
		if f := p.owned(row.Key, live); f != nil {
			row.Finding = f
		}
	}
	// What cli-utils adds to each object it applies: without it the
	// dry-run would remove the annotation the last apply set.
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[inventory.OwningInventoryKey] = p.inv.ID
	o.SetAnnotations(ann)
	data, err := o.MarshalJSON()
	if err != nil {
		row.Finding = &Finding{Kind: Invalid, Key: row.Key, Message: err.Error()}
		return row
	}
	force := true
	got, err := r.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager, Force: &force})
	if err != nil {
		if live == nil && apierrors.IsNotFound(err) && p.newNamespaces[o.GetNamespace()] {
			if _, nerr := p.dyn.Resource(nsGVR).Get(ctx, o.GetNamespace(), metav1.GetOptions{}); apierrors.IsNotFound(nerr) {
				row.Note = "its namespace is created by this apply: the API server cannot check it before"
				return row
			}
		}
		if row.Finding == nil {
			row.Finding = p.finding(row.Key, err, o)
		}
		return row
	}
	if live == nil {
		// Deployed and deleted since: apply creates it again.
		row.Drift = p.drifted(row.Key, o)
		return row
	}
	row.Fields = Diff(live, got)
	if len(row.Fields) == 0 {
		row.Action = Unchanged
		return row
	}
	row.Drift = p.drifted(row.Key, o)
	return row
}

// drifted reports whether the deployed commit rendered o as this render
// does: then what apply would change was changed in the cluster.
func (p *planner) drifted(key string, o *unstructured.Unstructured) bool {
	d := p.deployed[key]
	return d != nil && sameRender(d, o, p.inv.ID)
}

// sameRender reports whether the deployed commit rendered o as this
// render does (the owning-inventory annotation aside, which only apply
// adds).
func sameRender(deployed, o *unstructured.Unstructured, inv string) bool {
	d := deployed.DeepCopy()
	ann := d.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[inventory.OwningInventoryKey] = inv
	d.SetAnnotations(ann)
	if d.GetNamespace() == "" {
		d.SetNamespace(o.GetNamespace())
	}
	return reflect.DeepEqual(d.Object, o.Object)
}

// owned checks the inventory policy as cli-utils' apply will.
func (p *planner) owned(key string, live *unstructured.Unstructured) *Finding {
	owner, found := live.GetAnnotations()[inventory.OwningInventoryKey]
	switch {
	case found && owner == p.inv.ID:
		return nil
	case found && p.policy != "adopt-all":
		return &Finding{Kind: Ownership, Key: key, Message: fmt.Sprintf("the live object belongs to inventory %q, not %q: apply skips it (inventory policy %s; adopt-all takes it over)", owner, p.inv.ID, p.policy)}
	case !found && p.policy == "must-match":
		return &Finding{Kind: Ownership, Key: key, Message: "the live object exists and no inventory owns it: apply skips it (inventory policy must-match; adopt-if-no-inventory takes it over)"}
	}
	return nil
}

// prune dry-runs the deletion of an object the live inventory lists and
// the render lacks; false when it is gone already.
func (p *planner) prune(ctx context.Context, id object.ObjMetadata) (Row, bool) {
	m, err := p.mapper.RESTMapping(id.GroupKind)
	key := kinv.ID{Group: id.GroupKind.Group, Kind: id.GroupKind.Kind, Namespace: id.Namespace, Name: id.Name}.Key()
	row := Row{Key: key, Action: Prune}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return row, false // its kind is gone, so is the object
		}
		row.Finding = p.finding(key, err, nil)
		return row, true
	}
	key = kinv.ID{Group: id.GroupKind.Group, Version: m.GroupVersionKind.Version, Kind: id.GroupKind.Kind, Namespace: id.Namespace, Name: id.Name}.Key()
	row.Key = key
	var r dynamic.ResourceInterface = p.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = p.dyn.Resource(m.Resource).Namespace(id.Namespace)
	}
	live, err := r.Get(ctx, id.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return row, false
	}
	if err != nil {
		row.Finding = p.finding(key, err, nil)
		return row, true
	}
	ann := live.GetAnnotations()
	if ann["cli-utils.sigs.k8s.io/on-remove"] == "keep" || ann["client.lifecycle.config.k8s.io/deletion"] == "detach" {
		row.Action, row.Note = Keep, "a keep/detach annotation leaves it in the cluster"
		return row, true
	}
	if owner, ok := ann[inventory.OwningInventoryKey]; ok && owner != p.inv.ID && p.policy != "adopt-all" {
		row.Action, row.Note = Keep, fmt.Sprintf("inventory %q owns it now: prune leaves it", owner)
		return row, true
	}
	if err := r.Delete(ctx, id.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil && !apierrors.IsNotFound(err) {
		row.Finding = p.finding(key, err, live)
	}
	return row, true
}

// finding types an error of the API server. o, when a Secret, has its
// values hidden from the message.
func (p *planner) finding(key string, err error, o *unstructured.Unstructured) *Finding {
	f := &Finding{Key: key, Kind: Refused, Message: err.Error()}
	if o != nil && isSecret(o) {
		f.Message = redact(f.Message, secretValues(o))
	}
	msg := f.Message
	switch {
	case meta.IsNoMatchError(err):
		f.Kind = MissingCRD
		f.Message = msg + " (install its CustomResourceDefinition first)"
	case strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook") || strings.Contains(msg, "MutatingAdmissionPolicy"):
		f.Kind = Admission
	case immutable(err, msg):
		f.Kind = Immutable
	case apierrors.IsInvalid(err):
		f.Kind = Invalid
	case apierrors.IsForbidden(err):
		f.Kind = Forbidden
	}
	return f
}

// immutable reports an error about a field that cannot change: the API
// server says "field is immutable" in its causes and message.
func immutable(err error, msg string) bool {
	if strings.Contains(msg, "field is immutable") || strings.Contains(msg, "is immutable") {
		return true
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil {
		for _, c := range se.ErrStatus.Details.Causes {
			if strings.Contains(c.Message, "immutable") {
				return true
			}
		}
	}
	return false
}

// secretValues are a Secret's values in the forms an error could quote.
func secretValues(o *unstructured.Unstructured) []string {
	var out []string
	data, _, _ := unstructured.NestedStringMap(o.Object, "data")
	for _, v := range data {
		out = append(out, v)
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			out = append(out, string(b))
		}
	}
	sd, _, _ := unstructured.NestedStringMap(o.Object, "stringData")
	for _, v := range sd {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return out
}

// State reads what the last deploy recorded on the live inventory
// object (deploy.State); the zero State when it does not exist.
func (e *Engine) State(ctx context.Context, inv *unstructured.Unstructured) (deploy.State, error) {
	return e.deploy.State(ctx, inv)
}
