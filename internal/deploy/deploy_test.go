package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// One cluster for the package: starting one takes a few seconds.
var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	c, err := testcluster.StartContext(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test cluster:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// runs numbers the names the tests give what they create in the cluster.
// The cluster outlives a test: `go test -count=N` runs every test N times
// against the one TestMain starts, and a Namespace is never deleted
// (there is no controller-manager to finish it). So a test names its
// Namespace, and whatever it creates outside it (in default, or
// cluster-scoped: ClusterRoles, CRDs and their groups), with unique.
var runs atomic.Int64

// unique returns base with a number no other call in this process gave,
// "base-7": a DNS-1123 label for a base that is one of 60 characters or
// fewer.
func unique(t testing.TB, base string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", base, runs.Add(1))
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Fatalf("unique(%q) = %q: %s", base, name, strings.Join(errs, "; "))
	}
	return name
}

func obj(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func cm(ns, name, value string, annotations ...string) string {
	ann := ""
	if len(annotations) == 2 {
		ann = fmt.Sprintf(", annotations: {%q: %q}", annotations[0], annotations[1])
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s%s}\ndata: {v: %q}", name, ns, ann, value)
}

func nsObj(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}"
}

func rg(ns, name string) string {
	return fmt.Sprintf("apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: %s, namespace: %s}", name, ns)
}

func objs(t testing.TB, docs ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range docs {
		out = append(out, obj(t, d))
	}
	return out
}

func run(t testing.TB, c *testcluster.Cluster, inv string, docs []string, opts Options) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return New(NewGetter(c.Kubeconfig, "")).Apply(ctx, obj(t, inv), objs(t, docs...), opts)
}

func mustRun(t *testing.T, inv string, docs []string, opts Options) *Result {
	t.Helper()
	res, err := run(t, cluster, inv, docs, opts)
	if err != nil {
		t.Fatalf("apply: %v\n%+v", err, res)
	}
	return res
}

func dyn(t *testing.T, c *testcluster.Cluster) dynamic.Interface {
	d, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	rgGVR = schema.GroupVersionResource{Group: "kpt.dev", Version: "v1alpha1", Resource: "resourcegroups"}
)

func exists(t *testing.T, c *testcluster.Cluster, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := dyn(t, c).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return err == nil
}

// rgResources lists the names a ResourceGroup records, sorted.
func rgResources(t *testing.T, c *testcluster.Cluster, ns, name string) []string {
	t.Helper()
	u, err := dyn(t, c).Resource(rgGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ResourceGroup: %v", err)
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	var out []string
	for _, r := range refs {
		m := r.(map[string]any)
		out = append(out, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
	}
	slices.Sort(out)
	return out
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func TestApplyPruneAndKeep(t *testing.T) {
	ns := unique(t, "apply-prune")
	inv := rg(ns, "inventory-00000001")
	key := func(kind, name string) string { return "~G_v1_" + kind + "|" + ns + "|" + name }
	nsKey := "~G_v1_Namespace||" + ns
	first := []string{nsObj(ns), cm(ns, "a", "1"), cm(ns, "b", "1"), cm(ns, "kept", "1", "client.lifecycle.config.k8s.io/deletion", "detach")}
	res := mustRun(t, inv, first, Options{ReconcileTimeout: 30 * time.Second})
	eq(t, "created", res.Keys(Created), []string{key("ConfigMap", "a"), key("ConfigMap", "b"), key("ConfigMap", "kept"), nsKey})
	for _, o := range res.Objects {
		if o.Status != "Current" {
			t.Errorf("%s reconcile status %q, want Current", o.Key, o.Status)
		}
	}
	eq(t, "ResourceGroup", rgResources(t, cluster, ns, "inventory-00000001"), []string{"ConfigMap/a", "ConfigMap/b", "ConfigMap/kept", "Namespace/" + ns})

	// b and kept leave the overlay; a changes.
	second := []string{nsObj(ns), cm(ns, "a", "2")}
	res = mustRun(t, inv, second, Options{})
	eq(t, "pruned", res.Keys(Pruned), []string{key("ConfigMap", "b")})
	eq(t, "left in the cluster", res.Keys(Kept), []string{key("ConfigMap", "kept")})
	eq(t, "configured", res.Keys(Configured), []string{key("ConfigMap", "a")})
	eq(t, "unchanged", res.Keys(Unchanged), []string{nsKey})
	if exists(t, cluster, cmGVR, ns, "b") || !exists(t, cluster, cmGVR, ns, "kept") {
		t.Error("b must be deleted and kept must stay")
	}
	eq(t, "ResourceGroup", rgResources(t, cluster, ns, "inventory-00000001"), []string{"ConfigMap/a", "Namespace/" + ns})

	// The same render again changes nothing.
	res = mustRun(t, inv, second, Options{})
	eq(t, "unchanged", res.Keys(Unchanged), []string{key("ConfigMap", "a"), nsKey})
}

func TestDryRunChangesNothing(t *testing.T) {
	ns := unique(t, "dry-run")
	inv := rg(ns, "inventory-00000002")
	mustRun(t, inv, []string{nsObj(ns), cm(ns, "a", "1")}, Options{})
	res := mustRun(t, inv, []string{nsObj(ns), cm(ns, "new", "1")}, Options{DryRun: true})
	eq(t, "would create", res.Keys(Created), []string{"~G_v1_ConfigMap|" + ns + "|new"})
	eq(t, "would prune", res.Keys(Pruned), []string{"~G_v1_ConfigMap|" + ns + "|a"})
	if !res.DryRun || exists(t, cluster, cmGVR, ns, "new") || !exists(t, cluster, cmGVR, ns, "a") {
		t.Error("a dry run changed the cluster")
	}
	eq(t, "ResourceGroup", rgResources(t, cluster, ns, "inventory-00000002"), []string{"ConfigMap/a", "Namespace/" + ns})
}

func TestSecondInventoryCannotSteal(t *testing.T) {
	ns := unique(t, "steal")
	mustRun(t, rg(ns, "owner"), []string{nsObj(ns), cm(ns, "x", "owner")}, Options{})
	res, err := run(t, cluster, rg(ns, "thief"), []string{cm(ns, "x", "thief")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got *ObjectResult
	for i := range res.Objects {
		if res.Objects[i].Key == "~G_v1_ConfigMap|"+ns+"|x" {
			got = &res.Objects[i]
		}
	}
	if got == nil || got.Action != Skipped || !strings.Contains(got.Reason, "inventory") {
		t.Fatalf("the thief's apply of x: %+v, want skipped because another inventory owns it", got)
	}
	u, _ := dyn(t, cluster).Resource(cmGVR).Namespace(ns).Get(context.Background(), "x", metav1.GetOptions{})
	if v, _, _ := unstructured.NestedString(u.Object, "data", "v"); v != "owner" {
		t.Errorf("x was overwritten: %q", v)
	}
	// adopt-all hands it over.
	res = mustRun(t, rg(ns, "thief"), []string{cm(ns, "x", "thief")}, Options{InventoryPolicy: "adopt-all"})
	if k := res.Keys(Configured); !slices.Equal(k, []string{"~G_v1_ConfigMap|" + ns + "|x"}) {
		t.Errorf("adopt-all: configured %q", k)
	}
}

func TestEmptyRenderIsRefused(t *testing.T) {
	ns := unique(t, "empty")
	inv := rg(ns, "inventory-00000003")
	mustRun(t, inv, []string{nsObj(ns), cm(ns, "a", "1")}, Options{})
	_, err := run(t, cluster, inv, nil, Options{})
	var empty *EmptyError
	if !errors.As(err, &empty) || !strings.Contains(err.Error(), "--allow-empty") {
		t.Fatalf("empty apply: %v", err)
	}
	if !exists(t, cluster, cmGVR, ns, "a") {
		t.Fatal("a refused apply deleted objects")
	}
}

func TestCRDAndCustomResourceInOneApply(t *testing.T) {
	ns := unique(t, "crd")
	// A CRD is cluster-scoped: its group is this run's too.
	group := unique(t, "crd") + ".example.com"
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + group + `}
spec:
  group: ` + group + `
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`
	widget := "apiVersion: " + group + "/v1\nkind: Widget\nmetadata: {name: w, namespace: " + ns + "}\nspec: {size: 3}"
	// The custom resource comes first on purpose: ordering is kplan's job.
	res := mustRun(t, rg(ns, "inventory-00000004"), []string{widget, crd, nsObj(ns)}, Options{ReconcileTimeout: time.Minute})
	eq(t, "created", res.Keys(Created), []string{"apiextensions.k8s.io_v1_CustomResourceDefinition||widgets." + group, group + "_v1_Widget|" + ns + "|w", "~G_v1_Namespace||" + ns})
	if !exists(t, cluster, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, ns, "w") {
		t.Error("the Widget is not in the cluster")
	}
}

func TestConfigMapInventory(t *testing.T) {
	ns := unique(t, "cm-inventory")
	inv := declared.ConfigMapInventory("root-cm", ns, "")
	ctx := context.Background()
	eng := New(NewGetter(cluster.Kubeconfig, ""))
	if _, err := eng.Apply(ctx, inv, objs(t, nsObj(ns), cm(ns, "a", "1"), cm(ns, "b", "1")), Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(ctx, declared.ConfigMapInventory("root-cm", ns, ""), objs(t, nsObj(ns), cm(ns, "a", "1")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "pruned", res.Keys(Pruned), []string{"~G_v1_ConfigMap|" + ns + "|b"})
	u, err := dyn(t, cluster).Resource(cmGVR).Namespace(ns).Get(ctx, "root-cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetLabels()["cli-utils.sigs.k8s.io/inventory-id"] != "root-cm-"+ns {
		t.Errorf("inventory labels %v", u.GetLabels())
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	if len(data) != 2 {
		t.Errorf("inventory data %v, want the Namespace and a", data)
	}
}

// The namespace holding the inventory is never pruned with it.
func TestInventoryNamespaceIsKept(t *testing.T) {
	ns := unique(t, "holds-inventory")
	inv := rg(ns, "inventory-00000005")
	mustRun(t, inv, []string{nsObj(ns), cm(ns, "a", "1")}, Options{})
	res := mustRun(t, inv, []string{cm(ns, "a", "1")}, Options{})
	eq(t, "left in the cluster", res.Keys(Kept), []string{"~G_v1_Namespace||" + ns})
	if !exists(t, cluster, rgGVR, ns, "inventory-00000005") {
		t.Error("the inventory is gone")
	}
	u, err := dyn(t, cluster).Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil || u.GetDeletionTimestamp() != nil {
		t.Errorf("namespace %s is being deleted (%v)", ns, err)
	}
}

// An API server that goes away mid-apply gives a clear error; once it is
// back, the next apply converges.
func TestServerGoesAwayMidApply(t *testing.T) {
	c := testcluster.Start(t)
	const ns = "flaky"
	docs := []string{nsObj(ns)}
	for i := range 40 {
		docs = append(docs, cm(ns, fmt.Sprintf("cm-%02d", i), "1"))
	}
	inv := rg(ns, "inventory-00000006")
	applied := 0
	stopped := false
	res, err := run(t, c, inv, docs, Options{OnEvent: func(e event.Event) {
		if e.Type == event.ApplyType && e.ApplyEvent.Status == event.ApplySuccessful {
			applied++
		}
		if applied == 5 && !stopped {
			stopped = true
			// Open watches can keep it from a graceful exit; then it is killed.
			if err := c.StopAPIServer(); err != nil {
				t.Logf("stop apiserver: %v", err)
			}
		}
	}})
	if err == nil && (res == nil || !res.Failed()) {
		t.Fatalf("apply against a stopped server succeeded: %+v", res)
	}
	msg := fmt.Sprint(err)
	if res != nil {
		for _, o := range res.Objects {
			if o.Error != "" {
				msg += " " + o.Error
			}
		}
	}
	if !strings.Contains(msg, "connection refused") && !strings.Contains(msg, "connect") {
		t.Errorf("error does not say the server is unreachable: %s", msg)
	}
	if err := c.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err = run(t, c, inv, docs, Options{})
	if err != nil || res.Failed() {
		t.Fatalf("apply after the server came back: %v %+v", err, res)
	}
	if got := rgResources(t, c, ns, "inventory-00000006"); len(got) != 41 {
		t.Errorf("ResourceGroup lists %d objects, want 41", len(got))
	}
}

// config.kubernetes.io/depends-on orders the apply, whatever the render's
// order.
func TestDependsOnOrdersTheApply(t *testing.T) {
	ns := unique(t, "depends")
	first := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first, namespace: %s}\ndata: {v: '1'}", ns)
	second := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second, namespace: %s, annotations: {config.kubernetes.io/depends-on: /namespaces/%s/ConfigMap/first}}\ndata: {v: '1'}", ns, ns)
	var order []string
	res, err := run(t, cluster, rg(ns, "inventory-00000007"), []string{second, first, nsObj(ns)}, Options{OnEvent: func(e event.Event) {
		if e.Type == event.ApplyType && e.ApplyEvent.Status == event.ApplySuccessful {
			order = append(order, e.ApplyEvent.Identifier.Name)
		}
	}})
	if err != nil || res.Failed() {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if !slices.Equal(order, []string{ns, "first", "second"}) {
		t.Errorf("apply order %q, want the namespace, then first, then second", order)
	}
}
