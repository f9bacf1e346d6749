package danger

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// obj decodes a YAML object as the plan does (kyaml's RNode.Map).
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	n, err := yaml.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := n.Map()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keyOf(t *testing.T, before, after string) string {
	t.Helper()
	s := after
	if s == "" {
		s = before
	}
	n, err := yaml.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return inventory.IDOf(n).Key()
}

// ruleCase is one change and what a rule must say about it: want lists
// substrings of each finding's reason, in order (none: no finding).
type ruleCase struct {
	name          string
	before, after string
	want          []string
}

// runRule checks one rule's findings on each case, and that Check
// reports them under the rule's id.
func runRule(t *testing.T, id string, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Change{Key: keyOf(t, tc.before, tc.after), Before: obj(t, tc.before), After: obj(t, tc.after)}
			var got []Finding
			for _, f := range Check(c) {
				if f.Rule == id {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%s: %d findings %q, want %d like %q", id, len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Reason, w) || got[i].Object != c.Key {
					t.Errorf("finding %d = %+v, want its reason to say %q and its object %s", i, got[i], w, c.Key)
				}
			}
		})
	}
}

const sts = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: app}
spec:
  serviceName: db
  replicas: %REPLICAS%
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "postgres:%TAG%"}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: %SIZE%}}}
`

func stsWith(replicas, tag, size string) string {
	return strings.NewReplacer("%REPLICAS%", replicas, "%TAG%", tag, "%SIZE%", size).Replace(sts)
}

func TestStatefulSetImmutable(t *testing.T) {
	runRule(t, StatefulSetImmutable, []ruleCase{
		{"template and replicas may change", stsWith("3", "16", "10Gi"), stsWith("5", "17", "10Gi"), nil},
		{"volumeClaimTemplates may not", stsWith("3", "16", "10Gi"), stsWith("3", "16", "20Gi"), []string{"StatefulSet app/db: changes spec.volumeClaimTemplates; the API server refuses"}},
		{"serviceName may not", stsWith("3", "16", "10Gi"), strings.Replace(stsWith("3", "16", "10Gi"), "serviceName: db", "serviceName: db2", 1), []string{"changes spec.serviceName"}},
		{"the default podManagementPolicy written out is no change", stsWith("3", "16", "10Gi"), strings.Replace(stsWith("3", "16", "10Gi"), "serviceName: db", "serviceName: db\n  podManagementPolicy: OrderedReady", 1), nil},
		{"a new StatefulSet", "", stsWith("3", "16", "10Gi"), nil},
	})
}

func deployment(selector, replicas string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: app}\nspec:\n  replicas: " + replicas + "\n  selector: {matchLabels: {app: " + selector + "}}\n  template:\n    metadata: {labels: {app: " + selector + "}}\n    spec: {containers: [{name: web, image: web:1}]}\n"
}

func job(image, selector string) string {
	s := "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate, namespace: app}\nspec:\n"
	if selector != "" {
		s += "  manualSelector: true\n  selector: {matchLabels: {job: " + selector + "}}\n"
	}
	return s + "  template:\n    spec: {restartPolicy: Never, containers: [{name: m, image: " + image + "}]}\n"
}

func TestSelectorImmutable(t *testing.T) {
	runRule(t, SelectorImmutable, []ruleCase{
		{"deployment selector", deployment("web", "2"), deployment("web2", "2"), []string{"Deployment app/web: changes spec.selector, which the API server refuses"}},
		{"deployment replicas only", deployment("web", "2"), deployment("web", "3"), nil},
		{"daemonset selector", strings.Replace(deployment("a", "1"), "kind: Deployment", "kind: DaemonSet", 1), strings.Replace(deployment("b", "1"), "kind: Deployment", "kind: DaemonSet", 1), []string{"DaemonSet app/web"}},
		{"replicaset selector", strings.Replace(deployment("a", "1"), "kind: Deployment", "kind: ReplicaSet", 1), strings.Replace(deployment("b", "1"), "kind: Deployment", "kind: ReplicaSet", 1), []string{"ReplicaSet app/web"}},
		{"job selector", job("m:1", "a"), job("m:1", "b"), []string{"Job app/migrate: changes spec.selector"}},
		{"a Service's selector is not a workload's", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {a: b}}\n", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {a: c}}\n", nil},
	})
}

func TestJobTemplateImmutable(t *testing.T) {
	runRule(t, JobTemplateImmutable, []ruleCase{
		{"image", job("m:1", ""), job("m:2", ""), []string{"Job app/migrate: changes spec.template, which the API server refuses"}},
		{"unchanged template", job("m:1", ""), strings.Replace(job("m:1", ""), "name: migrate", "name: migrate, labels: {a: b}", 1), nil},
		{"a new Job", "", job("m:1", ""), nil},
	})
}

func pvc(size, class string) string {
	s := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: app}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: " + size + "}}\n"
	if class != "" {
		s += "  storageClassName: " + class + "\n"
	}
	return s
}

func TestPVCImmutable(t *testing.T) {
	runRule(t, PVCImmutable, []ruleCase{
		{"grows", pvc("10Gi", "fast"), pvc("20Gi", "fast"), nil},
		{"same size in other units", pvc("1Gi", "fast"), pvc("1024Mi", "fast"), nil},
		{"shrinks", pvc("10Gi", "fast"), pvc("5Gi", "fast"), []string{"PersistentVolumeClaim app/data: shrinks spec.resources.requests.storage from 10Gi to 5Gi"}},
		{"class changes", pvc("10Gi", "fast"), pvc("10Gi", "slow"), []string{`from "fast" to "slow"`}},
		{"class set where the default was", pvc("10Gi", ""), pvc("10Gi", "slow"), []string{`from unset (the cluster's default class) to "slow"`}},
		{"access modes", pvc("10Gi", "fast"), strings.Replace(pvc("10Gi", "fast"), "ReadWriteOnce", "ReadWriteMany", 1), []string{"changes spec.accessModes"}},
		{"shrink and class", pvc("10Gi", "fast"), pvc("1Gi", "slow"), []string{"shrinks", "storageClassName"}},
		{"pruned", pvc("10Gi", "fast"), "", nil},
	})
}

func binding(kind, role, subjects string) string {
	ns := ""
	if kind == "RoleBinding" {
		ns = ", namespace: app"
	}
	return "apiVersion: rbac.authorization.k8s.io/v1\nkind: " + kind + "\nmetadata: {name: b" + ns + "}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\nsubjects: [" + subjects + "]\n"
}

const (
	alice = "{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}"
	bot   = "{kind: ServiceAccount, name: bot, namespace: ci}"
)

func TestRoleRefImmutable(t *testing.T) {
	runRule(t, RoleRefImmutable, []ruleCase{
		{"roleRef", binding("RoleBinding", "view", alice), binding("RoleBinding", "viewer", alice), []string{"RoleBinding app/b: changes roleRef from ClusterRole view to ClusterRole viewer, which the API server refuses"}},
		{"cluster binding", binding("ClusterRoleBinding", "view", alice), binding("ClusterRoleBinding", "viewer", alice), []string{"ClusterRoleBinding b: changes roleRef"}},
		{"subjects only", binding("RoleBinding", "view", alice), binding("RoleBinding", "view", alice+", "+bot), nil},
	})
}

func configMap(immutable bool, data string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf, namespace: app}\ndata: {" + data + "}\n"
	if immutable {
		s += "immutable: true\n"
	}
	return s
}

func TestImmutableData(t *testing.T) {
	secret := func(v string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: app}\nimmutable: true\ndata: {password: " + v + ", user: YWRtaW4=}\n"
	}
	runRule(t, ImmutableData, []ruleCase{
		{"mutable ConfigMap", configMap(false, "a: '1'"), configMap(false, "a: '2'"), nil},
		{"immutable ConfigMap's data", configMap(true, "a: '1', b: x"), configMap(true, "a: '2', b: x, c: y"), []string{"ConfigMap app/conf is immutable (immutable: true): changes its data (a, c), which the API server refuses"}},
		{"immutable dropped", configMap(true, "a: '1'"), configMap(false, "a: '1'"), []string{"drops immutable: true"}},
		{"made immutable", configMap(false, "a: '1'"), configMap(true, "a: '1'"), nil},
		{"immutable Secret: the key, never the value", secret("c2VjcmV0MQ=="), secret("c2VjcmV0Mg=="), []string{"Secret app/creds is immutable (immutable: true): changes its data (password)"}},
	})
	// The reason never holds a value, encoded or not.
	for _, f := range Check(Change{Key: "~G_v1_Secret|app|creds", Before: obj(t, secret("c2VjcmV0MQ==")), After: obj(t, secret("c2VjcmV0Mg=="))}) {
		for _, v := range []string{"c2VjcmV0", "secret1", "secret2", "YWRtaW4", "admin"} {
			if strings.Contains(f.Reason, v) {
				t.Errorf("finding %+v shows a Secret value %q", f, v)
			}
		}
	}
}

func TestBindsPowerfulRole(t *testing.T) {
	runRule(t, BindsPowerfulRole, []ruleCase{
		{"new cluster-admin binding", "", binding("ClusterRoleBinding", "cluster-admin", alice+", "+bot), []string{"ClusterRoleBinding b: grants ClusterRole cluster-admin (every permission on every resource) in the whole cluster to User alice, ServiceAccount ci/bot"}},
		{"a subject added to edit", binding("RoleBinding", "edit", alice), binding("RoleBinding", "edit", alice+", "+bot), []string{"RoleBinding app/b: grants ClusterRole edit (read and write of most objects, Secrets included) in namespace app to ServiceAccount ci/bot"}},
		{"a subject removed", binding("RoleBinding", "admin", alice+", "+bot), binding("RoleBinding", "admin", alice), nil},
		{"view is not powerful", "", binding("ClusterRoleBinding", "view", alice), nil},
		{"rebound from view to admin", binding("RoleBinding", "view", alice), binding("RoleBinding", "admin", alice), []string{"grants ClusterRole admin"}},
		{"a Role named admin is not the built-in", "", strings.Replace(binding("RoleBinding", "admin", alice), "kind: ClusterRole", "kind: Role", 1), nil},
	})
}

func role(rules string) string {
	return "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ops}\nrules:\n" + rules
}

const (
	readPods = "- {apiGroups: [''], resources: [pods], verbs: [get, list]}\n"
	allApps  = "- {apiGroups: [apps], resources: ['*'], verbs: [get]}\n"
	allVerbs = "- {apiGroups: [''], resources: [secrets], verbs: ['*']}\n"
)

func TestWildcardRule(t *testing.T) {
	runRule(t, WildcardRule, []ruleCase{
		{"no wildcard", "", role(readPods), nil},
		{"new role with wildcards", "", role(readPods + allApps + allVerbs), []string{"ClusterRole ops: grants verbs [get] on resources [*] in apiGroups [apps]", "verbs [*] on resources [secrets]"}},
		{"wildcard kept is not new", role(allApps), role(allApps + readPods), nil},
		{"wildcard added to a Role", strings.Replace(role(readPods), "ClusterRole", "Role", 1), strings.Replace(role(readPods+allVerbs), "ClusterRole", "Role", 1), []string{"Role ops: grants verbs [*]"}},
	})
}

// podTemplate is a workload of kind whose pod spec has one container
// (ctr adds to it) and extra; both unindented, as at the pod spec's level.
func podTemplate(kind, extra, ctr string) string {
	spec := "containers:\n- name: app\n  image: app:1\n" + ctr + extra
	indent := func(s string, n int) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.TrimSuffix(strings.ReplaceAll(s, "\n", "\n"+pad), pad)
	}
	head := "metadata: {name: w, namespace: app}\n"
	switch kind {
	case "CronJob":
		return "apiVersion: batch/v1\nkind: CronJob\n" + head + "spec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n" + indent(spec, 10)
	case "Pod":
		return "apiVersion: v1\nkind: Pod\n" + head + "spec:\n" + indent(spec, 2)
	case "Job":
		return "apiVersion: batch/v1\nkind: Job\n" + head + "spec:\n  template:\n    spec:\n" + indent(spec, 6)
	}
	return "apiVersion: apps/v1\nkind: " + kind + "\n" + head + "spec:\n  template:\n    spec:\n" + indent(spec, 6)
}

const privilegedCtr = "  securityContext: {privileged: true}\n"

func TestPrivileged(t *testing.T) {
	var cases []ruleCase
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"} {
		cases = append(cases,
			ruleCase{kind + " becomes privileged", podTemplate(kind, "", ""), podTemplate(kind, "", privilegedCtr), []string{kind + " app/w: container app runs privileged"}},
			ruleCase{kind + " added privileged", "", podTemplate(kind, "", privilegedCtr), []string{"container app runs privileged"}},
			ruleCase{kind + " already privileged", podTemplate(kind, "", privilegedCtr), strings.Replace(podTemplate(kind, "", privilegedCtr), "app:1", "app:2", 1), nil},
		)
	}
	cases = append(cases, ruleCase{"an init container", "", podTemplate("Deployment", "initContainers:\n- name: setup\n  image: s\n  securityContext: {privileged: true}\n", ""), []string{"container setup runs privileged"}})
	runRule(t, Privileged, cases)
}

func TestHostNetworkAndPID(t *testing.T) {
	for _, tc := range []struct{ id, field string }{{HostNetwork, "hostNetwork"}, {HostPID, "hostPID"}} {
		t.Run(tc.id, func(t *testing.T) {
			set := tc.field + ": true\n"
			runRule(t, tc.id, []ruleCase{
				{"set on a DaemonSet", podTemplate("DaemonSet", "", ""), podTemplate("DaemonSet", set, ""), []string{"DaemonSet app/w: sets " + tc.field + ": true"}},
				{"new CronJob with it", "", podTemplate("CronJob", set, ""), []string{"CronJob app/w: sets " + tc.field}},
				{"already set", podTemplate("Deployment", set, ""), strings.Replace(podTemplate("Deployment", set, ""), "app:1", "app:2", 1), nil},
				{"unset", podTemplate("Deployment", set, ""), podTemplate("Deployment", "", ""), nil},
			})
		})
	}
}

func TestHostPath(t *testing.T) {
	vol := func(path string) string {
		return "volumes:\n- name: sock\n  hostPath: {path: " + path + "}\n"
	}
	empty := "volumes:\n- name: scratch\n  emptyDir: {}\n"
	runRule(t, HostPath, []ruleCase{
		{"new hostPath", podTemplate("Deployment", empty, ""), podTemplate("Deployment", vol("/var/run/docker.sock"), ""), []string{"Deployment app/w: mounts the node's /var/run/docker.sock (hostPath volume sock)"}},
		{"path changed", podTemplate("Job", vol("/a"), ""), podTemplate("Job", vol("/b"), ""), []string{"mounts the node's /b"}},
		{"kept", podTemplate("Job", vol("/a"), ""), strings.Replace(podTemplate("Job", vol("/a"), ""), "app:1", "app:2", 1), nil},
		{"emptyDir", "", podTemplate("StatefulSet", empty, ""), nil},
	})
}

func TestScaleToZero(t *testing.T) {
	noReplicas := strings.Replace(deployment("web", "1"), "  replicas: 1\n", "", 1)
	runRule(t, ScaleToZero, []ruleCase{
		{"3 to 0", deployment("web", "3"), deployment("web", "0"), []string{"Deployment app/web: scales to 0 replicas (from 3)"}},
		{"default to 0", noReplicas, deployment("web", "0"), []string{"(from the default of 1)"}},
		{"already 0", deployment("web", "0"), strings.Replace(deployment("web", "0"), "web:1", "web:2", 1), nil},
		{"created at 0", "", deployment("web", "0"), nil},
		{"3 to 1", deployment("web", "3"), deployment("web", "1"), nil},
		{"StatefulSet", stsWith("2", "16", "1Gi"), stsWith("0", "16", "1Gi"), []string{"StatefulSet app/db: scales to 0"}},
	})
}

func TestPruneStateful(t *testing.T) {
	runRule(t, PruneStateful, []ruleCase{
		{"namespace", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", "", []string{"prunes Namespace a: deletes every object in the namespace"}},
		{"crd", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n", "", []string{"prunes CustomResourceDefinition widgets.example.com: deletes every custom resource"}},
		{"pvc", pvc("1Gi", ""), "", []string{"prunes PersistentVolumeClaim app/data: may delete the volume's data"}},
		{"a ConfigMap", configMap(false, "a: b"), "", nil},
		{"a PVC kept", pvc("1Gi", ""), pvc("2Gi", ""), nil},
	})
}

func TestCheckIDs(t *testing.T) {
	if err := CheckIDs([]string{ScaleToZero, HostPath}); err != nil {
		t.Fatal(err)
	}
	err := CheckIDs([]string{ScaleToZero, "scale-to-0"})
	if err == nil || !strings.Contains(err.Error(), `"scale-to-0"`) || !strings.Contains(err.Error(), "scale-to-zero, duplicate-object") {
		t.Fatalf("err = %v, want it to name the unknown id and the valid ones", err)
	}
	// Every rule Check runs is listed, and every listed id is unique.
	seen := map[string]bool{}
	for _, id := range IDs() {
		if seen[id] {
			t.Errorf("rule %s listed twice", id)
		}
		seen[id] = true
	}
	for _, c := range checks() {
		if !seen[c.id] {
			t.Errorf("rule %s runs but is not in Rules", c.id)
		}
	}
}

func TestWithout(t *testing.T) {
	fs := []Finding{{Rule: ScaleToZero}, {Rule: HostPath}, {Rule: ScaleToZero}}
	got := Without(fs, map[string]bool{ScaleToZero: true})
	if len(got) != 1 || got[0].Rule != HostPath {
		t.Fatalf("Without = %+v", got)
	}
}
