package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/yamldocs"
)

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gitGVR  = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	kustGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	helmGVR = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
)

// kube is the harness's client of the test apiserver.
type kube struct {
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
}

func newKube(cfg *rest.Config) (*kube, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kube{dyn: dyn, disc: disc}, nil
}

// installCRDs creates the CRDs of files and waits until they are served.
func (k *kube) installCRDs(ctx context.Context, files []string) error {
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		docs, err := yamldocs.Mappings(data)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		for _, d := range docs {
			j, err := d.MarshalJSON()
			if err != nil {
				return fmt.Errorf("read %s: %w", f, err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				return fmt.Errorf("read %s: %w", f, err)
			}
			if _, err := k.dyn.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s from %s: %w", u.GetName(), f, err)
			}
			names = append(names, u.GetName())
		}
	}
	for _, n := range names {
		if err := poll(ctx, time.Minute, func() (bool, error) {
			u, err := k.dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return condition(u, "Established") == "True", nil
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", n, err)
		}
	}
	return nil
}

// create creates the objects of a YAML text.
func (k *kube) create(ctx context.Context, text string) error {
	docs, err := yamldocs.Mappings([]byte(text))
	if err != nil {
		return err
	}
	for _, d := range docs {
		j, err := d.MarshalJSON()
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return err
		}
		gvr, err := k.resourceOf(u.GroupVersionKind().GroupVersion(), u.GetKind())
		if err != nil {
			return err
		}
		if _, err := k.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

func (k *kube) resourceOf(gv schema.GroupVersion, kind string) (schema.GroupVersionResource, error) {
	list, err := k.disc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	for _, r := range list.APIResources {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return gv.WithResource(r.Name), nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no resource of kind %s in %s", kind, gv)
}

// condition is the status of u's condition typ, "" when absent.
func condition(u *unstructured.Unstructured, typ string) string {
	s, _, _ := conditionOf(u, typ)
	return s
}

func conditionOf(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

func poll(ctx context.Context, limit time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// fluxState is how far the controllers got: one line per Kustomization
// and HelmRelease.
func (k *kube) fluxState(ctx context.Context) (state string, settled bool, err error) {
	var lines []string
	settled = true
	for _, gvr := range []schema.GroupVersionResource{gitGVR, kustGVR, helmGVR} {
		list, err := k.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", false, err
		}
		for _, u := range list.Items {
			st, reason, msg := conditionOf(&u, "Ready")
			obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			rev, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
			// A retry asked for (createNamespaces) that fails the same
			// way still changes the state.
			handled, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
			rev += " " + handled
			if st == "" || st == "Unknown" && reason != "DependencyNotReady" {
				settled = false
			}
			msg = strings.Join(strings.Fields(msg), " ")
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			lines = append(lines, fmt.Sprintf("%s %s/%s %s %s %d %s: %s", u.GetKind(), u.GetNamespace(), u.GetName(), st, reason, obs, rev, msg))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), settled, nil
}

// waitSettled waits until every Flux object has a Ready condition and
// nothing changed for quiet, or limit passes.
func (k *kube) waitSettled(ctx context.Context, quiet, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	last, since := "", time.Now()
	for {
		s, settled, err := k.fluxState(ctx)
		if err != nil {
			return s, err
		}
		if s != last {
			last, since = s, time.Now()
		}
		if settled && time.Since(since) >= quiet || time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// applied are the objects kustomize-controller and helm-controller
// applied, read back from the apiserver, by "ns/name" of the
// Kustomization that applied them (a HelmRelease's objects go to the
// Kustomization that applied the HelmRelease).
func (k *kube) applied(ctx context.Context) (map[string]map[string]map[string]any, error) {
	lists, err := discovery.ServerPreferredResources(k.disc)
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	out := map[string]map[string]map[string]any{}
	helmOwner := map[string]string{} // HelmRelease ns/name → Kustomization ns/name
	var fromHelm []*unstructured.Unstructured
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !verb(r.Verbs, "list") || r.Kind == "Event" {
				continue
			}
			for _, sel := range []string{"kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name"} {
				list, err := k.dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: sel})
				if err != nil {
					continue
				}
				for i := range list.Items {
					u := &list.Items[i]
					labels := u.GetLabels()
					if sel == "helm.toolkit.fluxcd.io/name" {
						if _, both := labels["kustomize.toolkit.fluxcd.io/name"]; !both {
							fromHelm = append(fromHelm, u)
						}
						continue
					}
					owner := labels["kustomize.toolkit.fluxcd.io/namespace"] + "/" + labels["kustomize.toolkit.fluxcd.io/name"]
					if u.GetKind() == "HelmRelease" {
						helmOwner[u.GetNamespace()+"/"+u.GetName()] = owner
					}
					add(out, owner, u)
				}
			}
		}
	}
	for _, u := range fromHelm {
		labels := u.GetLabels()
		owner, ok := helmOwner[labels["helm.toolkit.fluxcd.io/namespace"]+"/"+labels["helm.toolkit.fluxcd.io/name"]]
		if !ok {
			owner = "(HelmRelease " + labels["helm.toolkit.fluxcd.io/namespace"] + "/" + labels["helm.toolkit.fluxcd.io/name"] + ")"
		}
		add(out, owner, u)
	}
	return out, nil
}

func add(out map[string]map[string]map[string]any, owner string, u *unstructured.Unstructured) {
	if out[owner] == nil {
		out[owner] = map[string]map[string]any{}
	}
	obj := u.DeepCopy().Object
	unstructured.RemoveNestedField(obj, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(obj, "metadata", f)
	}
	out[owner][keyOf(u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())] = obj
}

func verb(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// keyOf names an object without its API version: the apiserver answers
// at the preferred version, the plan at the manifest's.
func keyOf(group, kind, ns, name string) string {
	return group + "/" + kind + " " + ns + "/" + name
}

// yamlOf prints obj for the report.
func yamlOf(obj map[string]any) string {
	b, err := sigsyaml.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	return string(bytes.TrimSpace(b))
}

// missingNamespaces are the namespaces the controllers failed to apply
// into (`namespaces "x" not found`).
func missingNamespaces(state string) []string {
	seen := map[string]bool{}
	for _, m := range nsNotFound.FindAllStringSubmatch(state, -1) {
		seen[m[1]] = true
	}
	return sortedKeys(seen)
}

var nsNotFound = regexp.MustCompile(`namespaces \\?"([a-z0-9.-]+)\\?" not found`)

// createNamespaces creates namespaces, as a live cluster may have them,
// and asks every Kustomization and HelmRelease to reconcile again.
func (k *kube) createNamespaces(ctx context.Context, names []string) error {
	for _, n := range names {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": n}}}
		if _, err := k.dyn.Resource(nsGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	now := time.Now().Format(time.RFC3339Nano)
	for _, gvr := range []schema.GroupVersionResource{kustGVR, helmGVR} {
		list, err := k.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, u := range list.Items {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, now)
			if _, err := k.dyn.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// missingKinds are the custom kinds the controllers failed to apply for
// want of their CRD (`no matches for kind "K" in version "g/v"`), as
// "g/v/K", the groups of the controllers run here left out: an API
// version they no longer serve is a finding, not a precondition (the
// notification and image automation kinds are stubbed: their
// controllers are not run).
func missingKinds(state string) []string {
	seen := map[string]bool{}
	for _, m := range kindNotFound.FindAllStringSubmatch(state, -1) {
		if slices.Contains(servedGroups, m[2]) {
			continue
		}
		seen[m[2]+"/"+m[3]+"/"+m[1]] = true
	}
	return sortedKeys(seen)
}

var servedGroups = []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"}

var kindNotFound = regexp.MustCompile(`no matches for kind \\?"([A-Za-z0-9]+)\\?" in version \\?"([a-z0-9.-]+)/([a-z0-9]+)\\?"`)

// createCRDs creates a CRD accepting any object for each "g/v/K" of
// kinds, as a live cluster has the CRDs its charts installed (the charts
// here cannot be fetched). Plural and scope are guessed: a kind starting
// with "Cluster" is cluster-scoped.
func (k *kube) createCRDs(ctx context.Context, kinds []string) error {
	var files []string
	dir, err := os.MkdirTemp("", "fluxconf-crds-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for i, gvk := range kinds {
		parts := strings.Split(gvk, "/")
		group, version, kind := parts[0], parts[1], parts[2]
		plural := strings.ToLower(kind)
		switch {
		case strings.HasSuffix(plural, "y"):
			plural = strings.TrimSuffix(plural, "y") + "ies"
		case strings.HasSuffix(plural, "s"):
			plural += "es"
		default:
			plural += "s"
		}
		scope := "Namespaced"
		if strings.HasPrefix(kind, "Cluster") {
			scope = "Cluster"
		}
		crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
spec:
  group: %[2]s
  scope: %[3]s
  names: {kind: %[4]s, plural: %[1]s, listKind: %[4]sList, singular: %[5]s}
  versions:
  - name: %[6]s
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, group, scope, kind, strings.ToLower(kind), version)
		f := filepath.Join(dir, fmt.Sprintf("crd-%d.yaml", i))
		if err := os.WriteFile(f, []byte(crd), 0o644); err != nil {
			return err
		}
		files = append(files, f)
	}
	return k.installCRDs(ctx, files)
}
