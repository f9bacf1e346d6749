package test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/declared"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/testcluster"
)

// The overlays docs/webhook.md's install section applies, in the order
// this test applies them to one cluster; the page must name exactly these.
const (
	installDefault = "deploy"
	installNarrow  = "deploy/examples/narrow-rbac"
	installMonitor = "deploy/examples/servicemonitor"
)

// TestDeployManifests runs docs/webhook.md's install commands (the
// README's are their first lines) against a fresh
// kube-apiserver: the kubectl lines (namespace, Secret) through client-go,
// each `kplan apply PATH` through kplan's own render and apply engine from
// the repository root, as the CLI does. Then, as the webhook's
// ServiceAccount (impersonated), it applies an overlay carrying its own
// RBAC — a ClusterRole with verbs ["*"] and a RoleBinding to it — and
// takes and renews the leader-election Lease: with the default
// cluster-admin binding and with the narrow example. The rules deploy/
// shipped before, and the narrow ClusterRole without escalate and bind,
// are Forbidden. The Deployment runs two replicas with leader election,
// the PodDisruptionBudget and NetworkPolicy select its pods and the
// NetworkPolicy admits the port the Service sends to.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cmds := installCommands(t, "../docs/webhook.md", "## Install in a cluster")
	short := installCommands(t, "../README.md", "## A minimal webhook")
	if len(short) > len(cmds) || !slices.EqualFunc(short, cmds[:len(short)], func(a, b installCmd) bool { return a.line == b.line }) {
		t.Fatalf("the README's install commands must be the first of docs/webhook.md's")
	}
	var applied []string
	for _, c := range cmds {
		if c.applyPath != "" {
			applied = append(applied, c.applyPath)
		}
	}
	if want := []string{installDefault, installNarrow, installMonitor}; !slices.Equal(applied, want) {
		t.Fatalf("docs/webhook.md's install section applies %q; this test applies %q (update both together)", applied, want)
	}

	targets := map[string]*deploy.Target{}
	for _, p := range applied {
		targets[p] = renderInstall(t, ctx, p)
	}
	def := checkDefault(t, targets[installDefault], cmds)
	narrow := checkNarrow(t, targets[installNarrow], def)
	checkServiceMonitor(t, targets[installMonitor], def)
	if _, err := config.Load("../deploy/base/webhook.yaml"); err != nil {
		t.Errorf("the shipped config: %v", err)
	}

	c := testcluster.Start(t)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	admin := deploy.New(deploy.NewGetter(c.Kubeconfig, ""))
	sa := def.serviceAccount
	asSA := impersonated(t, c, sa)
	saCS, err := kubernetes.NewForConfig(asSA.config)
	if err != nil {
		t.Fatal(err)
	}

	// The README's kubectl lines, on the fresh cluster.
	for _, cmd := range cmds {
		switch {
		case cmd.namespace != "":
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cmd.namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", cmd.line, err)
			}
		case cmd.secret != nil:
			if _, err := cs.CoreV1().Secrets(cmd.secret.Namespace).Create(ctx, cmd.secret, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", cmd.line, err)
			}
		}
	}

	// 1. deploy/ as it is: everything created; the webhook, bound to
	// cluster-admin, applies RBAC overlays and holds the Lease.
	res := applyInstall(t, ctx, admin, installDefault, targets[installDefault])
	for _, o := range res.Objects {
		if o.Action != deploy.Created {
			t.Errorf("%s: %s: %s %s %s", installDefault, o.Key, o.Action, o.Reason, o.Error)
		}
	}
	waitAccess(t, ctx, cs, sa, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"}, true)
	applyAsWebhook(t, ctx, asSA.getter, "team-a", rbacOverlay("team-a", "configmap", ""), nil)
	leaseAsWebhook(t, ctx, saCS, sa.Namespace)

	// The rules deploy/rbac.yaml shipped before this change: every verb
	// but escalate and bind on everything. A ClusterRole with verbs ["*"]
	// is Forbidden to them.
	oldRules := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
	forbiddenWith(t, ctx, c, cs, "old-rules", oldRules)

	// 2. The narrow example: the cluster-admin binding is pruned (same
	// inventory), the narrow ClusterRole bound; the webhook still applies
	// and prunes RBAC overlays and holds the Lease, and no longer
	// impersonates or mints tokens.
	res = applyInstall(t, ctx, admin, installNarrow, targets[installNarrow])
	wantActions(t, installNarrow, res, map[string]deploy.Action{
		"rbac.authorization.k8s.io_v1_ClusterRoleBinding||kplan-webhook-cluster-admin": deploy.Pruned,
		"rbac.authorization.k8s.io_v1_ClusterRoleBinding||kplan-webhook":               deploy.Created,
		"rbac.authorization.k8s.io_v1_ClusterRole||kplan-webhook":                      deploy.Created,
	})
	waitAccess(t, ctx, cs, sa, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"}, false)
	// The narrow binding is in force (whatever it grants beyond this, the
	// apply below shows).
	waitAccess(t, ctx, cs, sa, authorizationv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, true)
	for _, denied := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "team-a"},
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "team-a"},
		{Verb: "get", Resource: "nodes"},
	} {
		if allowed(t, ctx, cs, sa, denied) {
			t.Errorf("the narrow ClusterRole allows %s %s/%s", denied.Verb, denied.Resource, denied.Subresource)
		}
	}
	// The overlay changes: the ClusterRole grows, a second RoleBinding
	// comes and the ConfigMap leaves, so the webhook applies and prunes.
	applyAsWebhook(t, ctx, asSA.getter, "team-a", rbacOverlay("team-a", "rolebinding2", ""), map[string]deploy.Action{
		"~G_v1_ConfigMap|team-a|settings":                                deploy.Pruned,
		"rbac.authorization.k8s.io_v1_RoleBinding|team-a|team-a-viewers": deploy.Created,
		"rbac.authorization.k8s.io_v1_ClusterRole||team-a-edit":          deploy.Configured,
	})
	leaseAsWebhook(t, ctx, saCS, sa.Namespace)

	// Escalate and bind are what the narrow role needs: without them the
	// same overlay is Forbidden.
	var narrowRules []rbacv1.PolicyRule
	for _, r := range narrow {
		if !slices.Contains(r.Verbs, "escalate") {
			narrowRules = append(narrowRules, r)
		}
	}
	if len(narrowRules) != len(narrow)-1 {
		t.Fatalf("narrow ClusterRole: want one escalate/bind rule, rules %+v", narrow)
	}
	forbiddenWith(t, ctx, c, cs, "narrow-without-escalate", narrowRules)

	// 3. The ServiceMonitor example on a cluster with the Prometheus
	// Operator's CRD: back to cluster-admin, plus the ServiceMonitor.
	installServiceMonitorCRD(t, ctx, c)
	res = applyInstall(t, ctx, admin, installMonitor, targets[installMonitor])
	wantActions(t, installMonitor, res, map[string]deploy.Action{
		"monitoring.coreos.com_v1_ServiceMonitor|kplan-system|kplan-webhook":           deploy.Created,
		"rbac.authorization.k8s.io_v1_ClusterRoleBinding||kplan-webhook-cluster-admin": deploy.Created,
		"rbac.authorization.k8s.io_v1_ClusterRoleBinding||kplan-webhook":               deploy.Pruned,
		"rbac.authorization.k8s.io_v1_ClusterRole||kplan-webhook":                      deploy.Pruned,
	})
}

// installCmd is one command of the install section's install section.
type installCmd struct {
	line      string
	namespace string         // kubectl create namespace NAME
	secret    *corev1.Secret // kubectl -n NS create secret generic NAME --from-literal=K=V...
	applyPath string         // kplan apply PATH
}

// installCommands reads the shell blocks of a page's section under
// heading. Every command there must be one this test runs, so the docs
// cannot drift from what is tested.
func installCommands(t *testing.T, page, heading string) []installCmd {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		in, fenced, sh bool
		lines          []string
		cont           string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
			sh = fenced && in && strings.TrimPrefix(l, "```") == "sh"
		case !fenced && strings.HasPrefix(l, "#"):
			in = l == heading
		case sh:
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			l = strings.TrimSpace(l)
			if strings.HasSuffix(l, `\`) {
				cont += strings.TrimSuffix(l, `\`) + " "
				continue
			}
			if l = strings.TrimSpace(cont + l); l != "" {
				lines = append(lines, l)
			}
			cont = ""
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: no sh block under %q", page, heading)
	}
	var cmds []installCmd
	for _, l := range lines {
		c := installCmd{line: l}
		w := strings.Fields(l)
		switch {
		case len(w) == 4 && w[0] == "kubectl" && w[1] == "create" && w[2] == "namespace":
			c.namespace = w[3]
		case len(w) >= 7 && w[0] == "kubectl" && w[1] == "-n" && w[3] == "create" && w[4] == "secret" && w[5] == "generic":
			c.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w[2], Name: w[6]}, StringData: map[string]string{}}
			for _, a := range w[7:] {
				k, v, ok := strings.Cut(strings.TrimPrefix(a, "--from-literal="), "=")
				if !ok || !strings.HasPrefix(a, "--from-literal=") {
					t.Fatalf("%s install: %q: this test knows only --from-literal=KEY=VALUE", page, l)
				}
				c.secret.StringData[k] = v
			}
		case len(w) == 3 && w[0] == "kplan" && w[1] == "apply":
			c.applyPath = w[2]
		default:
			t.Fatalf("%s install: %q is not a command this test runs (kubectl create namespace, kubectl -n NS create secret generic, kplan apply PATH)", page, l)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// renderInstall renders an install overlay the way `kplan apply PATH` does
// from the repository root: the work tree as it is on disk, the overlay's
// resourcegroup.yaml if it has one, the namespace "default" for objects
// without one.
func renderInstall(t *testing.T, ctx context.Context, p string) *deploy.Target {
	t.Helper()
	dir := filepath.Join("..", filepath.FromSlash(p))
	rs, err := plan.RenderWorkingTree(ctx, dir, []string{"."}, render.Options{})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("render %s: %v %v", p, err, rs[0].Err)
	}
	files := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	tg, err := deploy.NewTarget(rs[0], files, deploy.TargetOptions{Namespace: deploy.DefaultNamespace})
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return tg
}

// installed is what the default overlay's checks learnt.
type installed struct {
	serviceAccount saRef
	podLabels      map[string]string
	service        *corev1.Service
	// The container's ports: --listen's and --metrics-listen's.
	webhookPort, metricsPort corev1.ContainerPort
}

// saRef names a ServiceAccount.
type saRef struct{ Namespace, Name string }

// user and groups are what the API server authenticates the
// ServiceAccount's token as.
func (s saRef) user() string { return "system:serviceaccount:" + s.Namespace + ":" + s.Name }

func (s saRef) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
}

// convert decodes an unstructured object into a typed one, refusing
// unknown fields, so a misspelt field fails here rather than being dropped
// by the API server.
func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

func byKind(tg *deploy.Target, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range tg.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, tg *deploy.Target, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := byKind(tg, kind)
	if len(objs) != 1 {
		t.Fatalf("want one %s, got %d", kind, len(objs))
	}
	return objs[0]
}

func selects(t *testing.T, what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(podLabels)) {
		t.Errorf("%s selector %v does not select the webhook's pods %v (%v)", what, sel, podLabels, err)
	}
}

// checkDefault checks what deploy/ renders: two replicas with leader
// election, hardened pods, a PDB and NetworkPolicy over them, the Secret
// the install section creates, cluster-admin for the ServiceAccount and the Lease
// Role.
func checkDefault(t *testing.T, tg *deploy.Target, cmds []installCmd) installed {
	t.Helper()
	var in installed
	if tg.Inventory.GetKind() != "ResourceGroup" {
		t.Errorf("inventory %s", tg.Inventory.GetKind())
	}
	for _, o := range tg.Objects {
		if o.GetKind() == "Namespace" {
			t.Errorf("deploy/ renders Namespace %s: the install section creates it before the Secret", o.GetName())
		}
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			t.Errorf("deploy/ renders %s: a cluster without the Prometheus Operator could not apply it", o.GetKind())
		}
	}

	d := convert[appsv1.Deployment](t, one(t, tg, "Deployment"))
	spec := d.Spec.Template.Spec
	in.podLabels = d.Spec.Template.Labels
	in.serviceAccount = saRef{Namespace: d.Namespace, Name: spec.ServiceAccountName}
	selects(t, "Deployment", d.Spec.Selector, in.podLabels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("strategy %s, want RollingUpdate", d.Spec.Strategy.Type)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the pod may run as root")
	}
	spread := false
	for _, c := range spec.TopologySpreadConstraints {
		if c.TopologyKey == "kubernetes.io/hostname" && c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			selects(t, "topologySpreadConstraints", c.LabelSelector, in.podLabels)
			spread = true
		}
	}
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, p := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			selects(t, "podAntiAffinity", p.PodAffinityTerm.LabelSelector, in.podLabels)
			spread = true
		}
	}
	if !spread {
		t.Error("the replicas are not spread over nodes (preferred)")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("containers %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v", c.SecurityContext)
	}
	if !strings.Contains(c.Image, "kplan") {
		t.Errorf("image %s", c.Image)
	}
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %q lack --leader-elect", c.Args)
	}
	fieldRefs := map[string]string{}
	files := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldRefs[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
		if strings.HasSuffix(e.Name, "_FILE") {
			files[e.Name] = e.Value
		}
	}
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IP": "status.podIP"} {
		if fieldRefs[name] != path {
			t.Errorf("env %s from %q, want the downward API's %s", name, fieldRefs[name], path)
		}
	}
	// Two ports: --listen's (GitHub, probes, the other replica) and
	// --metrics-listen's (/metrics, /drift), never the same.
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	port, metricsPort := ports["http"], ports["metrics"]
	if port.ContainerPort == 0 || metricsPort.ContainerPort == 0 || len(ports) != 2 {
		t.Fatalf("the container's ports %+v: want http and metrics", c.Ports)
	}
	for flag, p := range map[string]corev1.ContainerPort{"--listen": port, "--metrics-listen": metricsPort} {
		if want := fmt.Sprintf("%s=:%d", flag, p.ContainerPort); !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s (port %s)", c.Args, want, p.Name)
		}
	}
	if port.ContainerPort == metricsPort.ContainerPort {
		t.Errorf("/metrics shares the webhook's port %d", port.ContainerPort)
	}
	in.webhookPort, in.metricsPort = port, metricsPort
	// The Secret the install section creates is the one the pods mount, with every
	// file the webhook is told to read.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var secret *corev1.Secret
	for _, cmd := range cmds {
		if cmd.secret != nil {
			secret = cmd.secret
		}
	}
	if secret == nil || secret.Namespace != d.Namespace {
		t.Fatalf("the install section creates no Secret in %s", d.Namespace)
	}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.SecretName != secret.Name {
			t.Errorf("the pods mount Secret %s, the install section creates %s", v.Secret.SecretName, secret.Name)
		}
		for env, file := range files {
			if dir, key := filepath.Split(file); filepath.Clean(dir) == mounts[v.Name] {
				if _, ok := secret.StringData[key]; !ok {
					t.Errorf("%s=%s: the install section's Secret has no key %s", env, file, key)
				}
			}
		}
	}
	var ns bool
	for _, cmd := range cmds {
		ns = ns || cmd.namespace == d.Namespace
	}
	if !ns {
		t.Errorf("the install section does not create namespace %s", d.Namespace)
	}

	pdb := convert[policyv1.PodDisruptionBudget](t, one(t, tg, "PodDisruptionBudget"))
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	selects(t, "PodDisruptionBudget", pdb.Spec.Selector, in.podLabels)

	in.service = convert[corev1.Service](t, one(t, tg, "Service"))
	selects(t, "Service", &metav1.LabelSelector{MatchLabels: in.service.Spec.Selector}, in.podLabels)
	targets := func(p intstr.IntOrString, cp corev1.ContainerPort) bool {
		return (p.Type == intstr.String && p.StrVal == cp.Name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort)
	}
	admitted := func(p intstr.IntOrString) bool { return targets(p, port) || targets(p, metricsPort) }
	for _, sp := range in.service.Spec.Ports {
		if !admitted(sp.TargetPort) {
			t.Errorf("Service port %s targets %s, not one of the container's ports %s/%d and %s/%d", sp.Name, sp.TargetPort.String(), port.Name, port.ContainerPort, metricsPort.Name, metricsPort.ContainerPort)
		}
	}

	np := convert[networkingv1.NetworkPolicy](t, one(t, tg, "NetworkPolicy"))
	selects(t, "NetworkPolicy", &np.Spec.PodSelector, in.podLabels)
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy policyTypes %v lack Ingress", np.Spec.PolicyTypes)
	}
	admits := map[string]bool{}
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 {
			t.Error("NetworkPolicy admits every port")
		}
		for _, p := range r.Ports {
			switch {
			case p.Port == nil || !admitted(*p.Port) || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP):
				t.Errorf("NetworkPolicy admits %v, not only the webhook's ports", p.Port)
			case targets(*p.Port, port):
				if len(r.From) > 0 {
					t.Errorf("NetworkPolicy admits the webhook's port only from %v: GitHub's deliveries come from outside the cluster", r.From)
				}
				admits[port.Name] = true
			default:
				admits[metricsPort.Name] = true
			}
		}
	}
	if !admits[port.Name] || !admits[metricsPort.Name] {
		t.Errorf("NetworkPolicy admits %v, want the webhook's port %s/%d and the metrics port %s/%d", admits, port.Name, port.ContainerPort, metricsPort.Name, metricsPort.ContainerPort)
	}

	// cluster-admin by default, and the Lease through a Role of its own
	// (list and delete: the Leases of --shards).
	crb := convert[rbacv1.ClusterRoleBinding](t, one(t, tg, "ClusterRoleBinding"))
	if crb.RoleRef.Name != "cluster-admin" || !boundTo(crb.Subjects, in.serviceAccount) {
		t.Errorf("ClusterRoleBinding %s: %s for %v, want cluster-admin for %v", crb.Name, crb.RoleRef.Name, crb.Subjects, in.serviceAccount)
	}
	role := convert[rbacv1.Role](t, one(t, tg, "Role"))
	rb := convert[rbacv1.RoleBinding](t, one(t, tg, "RoleBinding"))
	if role.Namespace != d.Namespace || rb.RoleRef.Name != role.Name || !boundTo(rb.Subjects, in.serviceAccount) || !grants(role.Rules, "coordination.k8s.io", "leases", "get", "list", "create", "update", "delete") {
		t.Errorf("leader election: Role %s/%s %+v, bound by %s to %v", role.Namespace, role.Name, role.Rules, rb.Name, rb.Subjects)
	}
	return in
}

// checkNarrow checks the narrow example: no cluster-admin binding, a
// ClusterRole with escalate and bind on roles and clusterroles and nothing
// cluster-admin-like, bound to the webhook. It returns the ClusterRole's
// rules.
func checkNarrow(t *testing.T, tg *deploy.Target, in installed) []rbacv1.PolicyRule {
	t.Helper()
	cr := convert[rbacv1.ClusterRole](t, one(t, tg, "ClusterRole"))
	crb := convert[rbacv1.ClusterRoleBinding](t, one(t, tg, "ClusterRoleBinding"))
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != cr.Name || !boundTo(crb.Subjects, in.serviceAccount) {
		t.Errorf("narrow: ClusterRoleBinding %s binds %s to %v", crb.Name, crb.RoleRef.Name, crb.Subjects)
	}
	for _, res := range []string{"roles", "clusterroles"} {
		if !grants(cr.Rules, "rbac.authorization.k8s.io", res, "escalate", "bind") {
			t.Errorf("narrow: ClusterRole %s lacks escalate and bind on %s", cr.Name, res)
		}
	}
	for _, r := range cr.Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Verbs, "impersonate") || len(r.NonResourceURLs) > 0 {
			t.Errorf("narrow: rule %+v is not narrow", r)
		}
	}
	if len(byKind(tg, "Role")) != 1 {
		t.Error("narrow: the leader-election Role is gone")
	}
	return cr.Rules
}

// checkServiceMonitor checks the ServiceMonitor example against the
// Prometheus Operator's own types: it selects the webhook's Service and
// scrapes /metrics on the Service's port.
func checkServiceMonitor(t *testing.T, tg *deploy.Target, in installed) {
	t.Helper()
	sm := convert[monitoringv1.ServiceMonitor](t, one(t, tg, "ServiceMonitor"))
	if sm.Namespace != in.service.Namespace {
		t.Errorf("ServiceMonitor in %s, the Service in %s", sm.Namespace, in.service.Namespace)
	}
	selects(t, "ServiceMonitor", &sm.Spec.Selector, in.service.Labels)
	// /metrics is on the Service's port that targets --metrics-listen.
	var ports []string
	for _, p := range in.service.Spec.Ports {
		if p.TargetPort.String() == in.metricsPort.Name || p.TargetPort.IntValue() == int(in.metricsPort.ContainerPort) {
			ports = append(ports, p.Name)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || !slices.Contains(ports, sm.Spec.Endpoints[0].Port) || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v: want /metrics on the Service's metrics port %v", sm.Spec.Endpoints, ports)
	}
}

func boundTo(subjects []rbacv1.Subject, sa saRef) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == sa.Namespace
	})
}

// grants reports whether one rule grants every verb on the resource.
func grants(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
			!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(r.Verbs, v) })
	})
}

// applyInstall applies an install overlay as the cluster's admin, as
// `kplan apply` does. Nothing runs the pods here (no controller-manager),
// so the Deployment never becomes ready: the reconcile wait is short and
// its outcome ignored; every object must be applied or pruned.
func applyInstall(t *testing.T, ctx context.Context, e *deploy.Engine, p string, tg *deploy.Target) *deploy.Result {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := e.Apply(actx, tg.Inventory.DeepCopy(), deepCopies(tg.Objects), deploy.Options{ReconcileTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("kplan apply %s: %v", p, err)
	}
	for _, o := range res.Objects {
		if o.Action == deploy.Failed || o.Action == deploy.Skipped {
			t.Errorf("kplan apply %s: %s %s: %s%s", p, o.Key, o.Action, o.Reason, o.Error)
		}
	}
	return res
}

func deepCopies(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

// wantActions checks the outcome of the named objects of an apply.
func wantActions(t *testing.T, what string, res *deploy.Result, want map[string]deploy.Action) {
	t.Helper()
	got := map[string]deploy.Action{}
	for _, o := range res.Objects {
		got[o.Key] = o.Action
	}
	for k, a := range want {
		if got[k] != a {
			t.Errorf("%s: %s %q, want %q (all: %v)", what, k, got[k], a, got)
		}
	}
}

// asServiceAccount reaches the test cluster as a ServiceAccount, through
// the admin's credentials and impersonation.
type asServiceAccount struct {
	config *rest.Config
	getter genericclioptions.RESTClientGetter
}

// impersonated writes a kubeconfig that impersonates sa (the getter kplan
// applies through reads it as kubectl would: rest.ImpersonationConfig) and
// a rest.Config that does the same.
func impersonated(t *testing.T, c *testcluster.Cluster, sa saRef) asServiceAccount {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = sa.user(), sa.groups()
	}
	path := filepath.Join(t.TempDir(), "as-"+sa.Name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa.user(), Groups: sa.groups()}
	return asServiceAccount{config: cfg, getter: deploy.NewGetter(path, "")}
}

// rbacOverlay is an overlay that carries its own RBAC, as 32 of
// kubeflow's 240 roles do: a Namespace, a ClusterRole with verbs ["*"], a
// RoleBinding to it (or to bindRole if set), and either a ConfigMap or a
// second RoleBinding, with a ResourceGroup inventory.
func rbacOverlay(name, variant, bindRole string) map[string]string {
	if bindRole == "" {
		bindRole = name + "-edit"
	}
	files := map[string]string{
		"namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n",
		"inventory.yaml": "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: " + name + "}\n",
		"clusterrole.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + name + "-edit}\n" +
			"rules:\n- apiGroups: [\"\", \"apps\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n",
		"rolebinding.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: " + name + "-editors}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + bindRole + "}\n" +
			"subjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: " + name + "}\n",
	}
	resources := []string{"namespace.yaml", "inventory.yaml", "clusterrole.yaml", "rolebinding.yaml"}
	switch variant {
	case "configmap":
		files["configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"
		resources = append(resources, "configmap.yaml")
	case "rolebinding2":
		// The ClusterRole grows a rule, and a second group is bound.
		files["clusterrole.yaml"] += "- apiGroups: [\"batch\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n"
		files["rolebinding2.yaml"] = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: " + name + "-viewers}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + name + "-edit}\n" +
			"subjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: " + name + "-viewers}\n"
		resources = append(resources, "rolebinding2.yaml")
	}
	files["kustomization.yaml"] = "namespace: " + name + "\nresources: [" + strings.Join(resources, ", ") + "]\n"
	return files
}

// renderFiles renders an overlay written to a temporary directory.
func renderFiles(t *testing.T, ctx context.Context, files map[string]string) *deploy.Target {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := plan.RenderWorkingTree(ctx, dir, []string{"."}, render.Options{})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("render: %v %v", err, rs[0].Err)
	}
	tg, err := deploy.NewTarget(rs[0], nil, deploy.TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// applyAsWebhook applies an overlay through getter (as the webhook's
// ServiceAccount) and wants it to succeed: nothing failed or skipped,
// everything reconciled, and the named objects' actions as given.
func applyAsWebhook(t *testing.T, ctx context.Context, getter genericclioptions.RESTClientGetter, name string, files map[string]string, want map[string]deploy.Action) {
	t.Helper()
	tg := renderFiles(t, ctx, files)
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := deploy.New(getter).Apply(actx, tg.Inventory, tg.Objects, deploy.Options{ReconcileTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("apply %s as the webhook: %v", name, err)
	}
	if res.Failed() {
		t.Fatalf("apply %s as the webhook failed: %+v", name, res.Objects)
	}
	wantActions(t, "apply "+name+" as the webhook", res, want)
}

// forbiddenWith binds rules to a ServiceAccount of their own and applies
// an RBAC overlay as it: the ClusterRole with verbs ["*"] and a
// RoleBinding to a role with verbs ["*"] must fail as Forbidden, which is
// what the webhook saw before it could escalate and bind.
func forbiddenWith(t *testing.T, ctx context.Context, c *testcluster.Cluster, cs kubernetes.Interface, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	sa := saRef{Namespace: "kplan-system", Name: name}
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The binding is in force before the apply, so a Forbidden below is
	// the escalation check, not a binding the authorizer has not seen.
	waitAccess(t, ctx, cs, sa, authorizationv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, true)

	// The RoleBinding binds cluster-admin, which exists, so that its
	// failure is the bind check rather than a missing role.
	team := "team-" + name
	tg := renderFiles(t, ctx, rbacOverlay(team, "", "cluster-admin"))
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := deploy.New(impersonated(t, c, sa).getter).Apply(actx, tg.Inventory, tg.Objects, deploy.Options{ReconcileTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%s: apply: %v", name, err)
	}
	for _, k := range []string{
		"rbac.authorization.k8s.io_v1_ClusterRole||" + team + "-edit",
		"rbac.authorization.k8s.io_v1_RoleBinding|" + team + "|" + team + "-editors",
	} {
		i := slices.IndexFunc(res.Objects, func(o deploy.ObjectResult) bool { return o.Key == k })
		if i < 0 || res.Objects[i].Action != deploy.Failed || !strings.Contains(res.Objects[i].Error, "forbidden") {
			t.Errorf("%s: want %s Forbidden; got %+v", name, k, res.Objects)
		}
	}
}

// leaseAsWebhook takes, reads and renews the leader-election Lease as the
// webhook's ServiceAccount, as client-go's LeaseLock does.
func leaseAsWebhook(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) {
	t.Helper()
	leases := cs.CoordinationV1().Leases(ns)
	holder := "kplan-webhook-0@10.0.0.1:8080"
	l, err := leases.Get(ctx, "kplan-webhook", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kplan-webhook"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("Lease as the webhook: %v", err)
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("renew the Lease as the webhook: %v", err)
	}
}

// allowed asks the API server's authorizer whether sa may do attrs.
func allowed(t *testing.T, ctx context.Context, cs kubernetes.Interface, sa saRef, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: sa.user(), Groups: sa.groups(), ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// waitAccess waits until the authorizer, which learns of bindings from a
// watch, answers want for sa and attrs.
func waitAccess(t *testing.T, ctx context.Context, cs kubernetes.Interface, sa saRef, attrs authorizationv1.ResourceAttributes, want bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return allowed(t, ctx, cs, sa, attrs) == want, nil
	})
	if err != nil {
		t.Fatalf("%s may %s %s/%s: never %v", sa.user(), attrs.Verb, attrs.Group, attrs.Resource, want)
	}
}

// installServiceMonitorCRD installs a CustomResourceDefinition for
// monitoring.coreos.com/v1 ServiceMonitor, as the Prometheus Operator
// does. Its schema is the subset the example uses, without
// x-kubernetes-preserve-unknown-fields; the full field check is the
// operator's Go types in checkServiceMonitor.
func installServiceMonitorCRD(t *testing.T, ctx context.Context, c *testcluster.Cluster) {
	t.Helper()
	const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [selector, endpoints]
            properties:
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
              endpoints:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: string}
                    path: {type: string}
                    interval: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
`
	var obj unstructured.Unstructured
	if err := sigsyaml.Unmarshal([]byte(crd), &obj.Object); err != nil {
		t.Fatal(err)
	}
	tg := &deploy.Target{Inventory: declared.ConfigMapInventory("prometheus-operator-crds", "default", ""), Objects: []*unstructured.Unstructured{&obj}}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := deploy.New(deploy.NewGetter(c.Kubeconfig, "")).Apply(actx, tg.Inventory, tg.Objects, deploy.Options{ReconcileTimeout: 30 * time.Second})
	if err != nil || res.Failed() {
		t.Fatalf("install the ServiceMonitor CRD: %v %+v", err, res)
	}
}

// The Ingress example routes GitHub to the webhook's /webhook alone: one
// Exact path to the Service port that targets --listen, no default
// backend, so /metrics, /drift, /healthz and /readyz stay inside the
// cluster.
func TestIngressExampleRoutesOnlyWebhook(t *testing.T) {
	t.Parallel()
	tg := renderInstall(t, t.Context(), "deploy/examples/ingress")
	svc := convert[corev1.Service](t, one(t, tg, "Service"))
	ing := convert[networkingv1.Ingress](t, one(t, tg, "Ingress"))
	if ing.Namespace != svc.Namespace {
		t.Errorf("Ingress in %s, the Service in %s", ing.Namespace, svc.Namespace)
	}
	if ing.Spec.DefaultBackend != nil {
		t.Errorf("Ingress has a default backend %+v: every path would reach the webhook", ing.Spec.DefaultBackend)
	}
	var webhookPorts []string // the Service's ports that target --listen's
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() == "http" {
			webhookPorts = append(webhookPorts, p.Name)
		}
	}
	routes := 0
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			t.Errorf("Ingress rule %q routes nothing", r.Host)
			continue
		}
		for _, p := range r.HTTP.Paths {
			routes++
			if p.Path != "/webhook" || p.PathType == nil || *p.PathType != networkingv1.PathTypeExact {
				t.Errorf("Ingress routes path %q (%v): want only /webhook, Exact", p.Path, p.PathType)
			}
			b := p.Backend.Service
			if b == nil || b.Name != svc.Name || !slices.Contains(webhookPorts, b.Port.Name) {
				t.Errorf("Ingress path %s goes to %+v: want Service %s port %v", p.Path, p.Backend, svc.Name, webhookPorts)
			}
		}
	}
	if routes == 0 {
		t.Error("the Ingress routes no path")
	}
}
