package danger

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// Each rule below reads one change and returns its findings' reasons.

const rbacGroup = "rbac.authorization.k8s.io"

func pruneStateful(c Change) []string {
	if c.After != nil || c.Before == nil {
		return nil
	}
	why := map[string]string{
		"|Namespace":             "deletes every object in the namespace",
		"|PersistentVolumeClaim": "may delete the volume's data",
		"apiextensions.k8s.io|CustomResourceDefinition": "deletes every custom resource of this type",
	}[gk(c.Before)]
	if why == "" {
		return nil
	}
	return []string{fmt.Sprintf("prunes %s: %s", describeKey(c.Key), why)}
}

// statefulSetMutable are the spec fields of a StatefulSet the API server
// lets an update change (apps/validation ValidateStatefulSetUpdate).
var statefulSetMutable = []string{"replicas", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds", "ordinals", "revisionHistoryLimit"}

func statefulSetImmutable(c Change) []string {
	if !both(c) || gk(c.After) != "apps|StatefulSet" {
		return nil
	}
	bs, as := mapAt(c.Before, "spec"), mapAt(c.After, "spec")
	// What the API server defaults is no change when the other side
	// leaves it out.
	defaults := map[string]any{"podManagementPolicy": "OrderedReady"}
	var changed []string
	for _, k := range unionKeys(bs, as) {
		if slices.Contains(statefulSetMutable, k) {
			continue
		}
		b, a := bs[k], as[k]
		if d, ok := defaults[k]; ok {
			b, a = orDefault(b, d), orDefault(a, d)
		}
		if !equal(b, a) {
			changed = append(changed, "spec."+k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: changes %s; the API server refuses changes to a StatefulSet's spec other than %s, so the apply fails: delete the StatefulSet with --cascade=orphan (its pods and volumes stay) and apply again",
		describeKey(c.Key), strings.Join(changed, ", "), strings.Join(statefulSetMutable, ", "))}
}

func selectorImmutable(c Change) []string {
	if !both(c) {
		return nil
	}
	switch gk(c.After) {
	case "apps|Deployment", "apps|DaemonSet", "apps|ReplicaSet", "batch|Job":
	default:
		return nil
	}
	if equal(at(c.Before, "spec", "selector"), at(c.After, "spec", "selector")) {
		return nil
	}
	return []string{fmt.Sprintf("%s: changes spec.selector, which the API server refuses (it is immutable), so the apply fails: deploy the workload under a new name, or delete it and apply again",
		describeKey(c.Key))}
}

func jobTemplateImmutable(c Change) []string {
	if !both(c) || gk(c.After) != "batch|Job" || equal(at(c.Before, "spec", "template"), at(c.After, "spec", "template")) {
		return nil
	}
	return []string{fmt.Sprintf("%s: changes spec.template, which the API server refuses for an existing Job, so the apply fails: give the Job a new name, or delete it first",
		describeKey(c.Key))}
}

// pvcFixed are the spec fields of a PersistentVolumeClaim set at creation
// (besides storageClassName, reported with its values).
var pvcFixed = []string{"accessModes", "selector", "volumeName", "volumeMode", "dataSource", "dataSourceRef"}

func pvcImmutable(c Change) []string {
	if !both(c) || gk(c.After) != "|PersistentVolumeClaim" {
		return nil
	}
	name := describeKey(c.Key)
	var out []string
	bq, bok := quantity(at(c.Before, "spec", "resources", "requests", "storage"))
	aq, aok := quantity(at(c.After, "spec", "resources", "requests", "storage"))
	if bok && aok && aq.Cmp(bq) < 0 {
		out = append(out, fmt.Sprintf("%s: shrinks spec.resources.requests.storage from %s to %s, which the API server refuses (a volume only grows), so the apply fails",
			name, bq.String(), aq.String()))
	}
	bc, ac := at(c.Before, "spec", "storageClassName"), at(c.After, "spec", "storageClassName")
	if !equal(bc, ac) {
		show := func(v any) string {
			if v == nil {
				return "unset (the cluster's default class)"
			}
			return fmt.Sprintf("%q", fmt.Sprint(v))
		}
		out = append(out, fmt.Sprintf("%s: changes spec.storageClassName from %s to %s, which the API server refuses unless it is the class the claim already has: the apply fails; a new class needs a new claim (and a copy of the data)",
			name, show(bc), show(ac)))
	}
	var fixed []string
	for _, k := range pvcFixed {
		if !equal(at(c.Before, "spec", k), at(c.After, "spec", k)) {
			fixed = append(fixed, "spec."+k)
		}
	}
	if len(fixed) > 0 {
		out = append(out, fmt.Sprintf("%s: changes %s, fixed when the claim was created: the API server refuses it unless the claim already has that value, so the apply fails",
			name, strings.Join(fixed, ", ")))
	}
	return out
}

func roleRefImmutable(c Change) []string {
	if !both(c) || !isBinding(c.After) {
		return nil
	}
	b, a := at(c.Before, "roleRef"), at(c.After, "roleRef")
	if equal(b, a) {
		return nil
	}
	return []string{fmt.Sprintf("%s: changes roleRef from %s to %s, which the API server refuses, so the apply fails: bind the new role under a new binding name",
		describeKey(c.Key), roleName(b), roleName(a))}
}

func immutableData(c Change) []string {
	if !both(c) {
		return nil
	}
	if k := gk(c.After); k != "|ConfigMap" && k != "|Secret" {
		return nil
	}
	if at(c.Before, "immutable") != true {
		return nil
	}
	name := describeKey(c.Key)
	var out []string
	if at(c.After, "immutable") != true {
		out = append(out, fmt.Sprintf("%s is immutable: the change drops immutable: true, which the API server refuses, so the apply fails", name))
	}
	// Key names only: a Secret's values never show.
	var keys []string
	for _, section := range []string{"data", "binaryData", "stringData"} {
		bm, am := mapAt(c.Before, section), mapAt(c.After, section)
		for _, k := range unionKeys(bm, am) {
			if !equal(bm[k], am[k]) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		out = append(out, fmt.Sprintf("%s is immutable (immutable: true): changes its data (%s), which the API server refuses, so the apply fails: generate it with a name suffix (configMapGenerator/secretGenerator) or give it a new name",
			name, strings.Join(keys, ", ")))
	}
	return out
}

// powerfulRoles are the built-in ClusterRoles whose grant widens access
// the most.
var powerfulRoles = map[string]string{
	"cluster-admin": "every permission on every resource",
	"admin":         "full control, RBAC and Secrets included",
	"edit":          "read and write of most objects, Secrets included",
}

func bindsPowerfulRole(c Change) []string {
	if c.After == nil || !isBinding(c.After) {
		return nil
	}
	ref := mapAt(c.After, "roleRef")
	role := fmt.Sprint(ref["name"])
	what, ok := powerfulRoles[role]
	if !ok || ref["kind"] != "ClusterRole" {
		return nil
	}
	var had []any
	if c.Before != nil && equal(at(c.Before, "roleRef"), at(c.After, "roleRef")) {
		had, _ = at(c.Before, "subjects").([]any)
	}
	var grantees []string
	after, _ := at(c.After, "subjects").([]any)
	for _, s := range after {
		if slices.ContainsFunc(had, func(h any) bool { return equal(h, s) }) {
			continue
		}
		grantees = append(grantees, subjectName(s))
	}
	if len(grantees) == 0 {
		return nil
	}
	scope := "in the whole cluster"
	if gk(c.After) == rbacGroup+"|RoleBinding" {
		scope = "in namespace " + orString(at(c.After, "metadata", "namespace"), namespaceOf(c.Key))
	}
	return []string{fmt.Sprintf("%s: grants ClusterRole %s (%s) %s to %s",
		describeKey(c.Key), role, what, scope, strings.Join(grantees, ", "))}
}

func wildcardRule(c Change) []string {
	if c.After == nil {
		return nil
	}
	if k := gk(c.After); k != rbacGroup+"|Role" && k != rbacGroup+"|ClusterRole" {
		return nil
	}
	var had []any
	if c.Before != nil {
		had, _ = at(c.Before, "rules").([]any)
	}
	rules, _ := at(c.After, "rules").([]any)
	var out []string
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		wild := false
		for _, f := range []string{"verbs", "resources", "apiGroups"} {
			l, _ := rm[f].([]any)
			wild = wild || slices.ContainsFunc(l, func(v any) bool { return v == "*" })
		}
		if !wild || slices.ContainsFunc(had, func(h any) bool { return equal(h, r) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: grants verbs %s on resources %s in apiGroups %s: a wildcard also grants whatever the cluster adds later",
			describeKey(c.Key), list(rm["verbs"]), list(rm["resources"]), list(rm["apiGroups"])))
	}
	return out
}

func privileged(c Change) []string {
	after := podSpec(c.After)
	if after == nil {
		return nil
	}
	was := map[string]bool{}
	for _, ct := range containers(podSpec(c.Before)) {
		if at(ct, "securityContext", "privileged") == true {
			was[fmt.Sprint(ct["name"])] = true
		}
	}
	var out []string
	for _, ct := range containers(after) {
		name := fmt.Sprint(ct["name"])
		if at(ct, "securityContext", "privileged") == true && !was[name] {
			out = append(out, fmt.Sprintf("%s: container %s runs privileged (securityContext.privileged: true): root on the node, with every device", describeKey(c.Key), name))
		}
	}
	return out
}

func hostNetwork(c Change) []string {
	return hostFlag(c, "hostNetwork", "its pods share the node's network: NetworkPolicies do not apply to them and they can bind the node's ports")
}

func hostPID(c Change) []string {
	return hostFlag(c, "hostPID", "its pods see and can signal every process of the node")
}

func hostFlag(c Change, field, why string) []string {
	after := podSpec(c.After)
	if after == nil || after[field] != true {
		return nil
	}
	if before := podSpec(c.Before); before != nil && before[field] == true {
		return nil
	}
	return []string{fmt.Sprintf("%s: sets %s: true: %s", describeKey(c.Key), field, why)}
}

func hostPath(c Change) []string {
	after := podSpec(c.After)
	if after == nil {
		return nil
	}
	before, _ := at(podSpec(c.Before), "volumes").([]any)
	vols, _ := after["volumes"].([]any)
	var out []string
	for _, v := range vols {
		vm, _ := v.(map[string]any)
		hp, ok := vm["hostPath"].(map[string]any)
		if !ok || slices.ContainsFunc(before, func(b any) bool { return equal(b, v) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: mounts the node's %s (hostPath volume %s): its pods read or write the node's files",
			describeKey(c.Key), fmt.Sprint(hp["path"]), fmt.Sprint(vm["name"])))
	}
	return out
}

func scaleToZero(c Change) []string {
	if !both(c) {
		return nil
	}
	switch gk(c.After) {
	case "apps|Deployment", "apps|StatefulSet", "apps|ReplicaSet", "|ReplicationController":
	default:
		return nil
	}
	if a := at(c.After, "spec", "replicas"); a == nil || fmt.Sprint(a) != "0" {
		return nil
	}
	from := "the default of 1"
	if b := at(c.Before, "spec", "replicas"); b != nil {
		if fmt.Sprint(b) == "0" {
			return nil // already at zero
		}
		from = fmt.Sprint(b)
	}
	return []string{fmt.Sprintf("%s: scales to 0 replicas (from %s): it stops running", describeKey(c.Key), from)}
}

// Helpers reading unstructured objects.

// gk is an object's "group|kind" ("" group for the core API).
func gk(m map[string]any) string {
	av, _ := m["apiVersion"].(string)
	group := ""
	if i := strings.LastIndex(av, "/"); i >= 0 {
		group = av[:i]
	}
	kind, _ := m["kind"].(string)
	return group + "|" + kind
}

func both(c Change) bool { return c.Before != nil && c.After != nil }

func isBinding(m map[string]any) bool {
	k := gk(m)
	return k == rbacGroup+"|RoleBinding" || k == rbacGroup+"|ClusterRoleBinding"
}

// at is the value at path in m (nil when absent).
func at(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func mapAt(m map[string]any, path ...string) map[string]any {
	mm, _ := at(m, path...).(map[string]any)
	return mm
}

func unionKeys(a, b map[string]any) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// equal compares two decoded YAML values; an empty map or list equals an
// absent one, as the API server stores them.
func equal(a, b any) bool {
	if empty(a) && empty(b) {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func orDefault(v, d any) any {
	if v == nil {
		return d
	}
	return v
}

func orString(v any, d string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return d
}

func quantity(v any) (resource.Quantity, bool) {
	if v == nil {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(fmt.Sprint(v))
	return q, err == nil
}

// podSpec is the pod spec an object runs (its pod template's), nil for
// objects that run none.
func podSpec(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	switch gk(m) {
	case "|Pod":
		return mapAt(m, "spec")
	case "|PodTemplate":
		return mapAt(m, "template", "spec")
	case "batch|CronJob":
		return mapAt(m, "spec", "jobTemplate", "spec", "template", "spec")
	}
	// Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
	// ReplicationControllers, and custom workloads shaped as they are.
	if s := mapAt(m, "spec", "template", "spec"); s != nil {
		if _, ok := s["containers"].([]any); ok {
			return s
		}
	}
	return nil
}

func containers(spec map[string]any) []map[string]any {
	var out []map[string]any
	for _, f := range []string{"initContainers", "containers", "ephemeralContainers"} {
		l, _ := spec[f].([]any)
		for _, c := range l {
			if cm, ok := c.(map[string]any); ok {
				out = append(out, cm)
			}
		}
	}
	return out
}

func roleName(v any) string {
	m, _ := v.(map[string]any)
	if m == nil {
		return "(none)"
	}
	return fmt.Sprintf("%v %v", m["kind"], m["name"])
}

func subjectName(v any) string {
	m, _ := v.(map[string]any)
	name := fmt.Sprint(m["name"])
	if ns, ok := m["namespace"].(string); ok && ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%v %s", m["kind"], name)
}

func list(v any) string {
	l, _ := v.([]any)
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprint(x))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// describeKey names an object as reviewers read it: "Kind ns/name".
func describeKey(key string) string {
	id, err := inventory.ParseKey(key)
	if err != nil {
		return key
	}
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Namespace + "/" + id.Name
}

func namespaceOf(key string) string {
	id, _ := inventory.ParseKey(key)
	return id.Namespace
}
