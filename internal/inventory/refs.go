package inventory

import (
	"slices"
	"strings"
)

// krusty drops its own record of name references (the refBy build
// annotation) before it returns, so kplan finds referrers itself from the
// reference fields Kubernetes defines. The table covers the references
// kustomize's name-reference transformer follows for built-in kinds.

// ref is a reference field: the referral's group and kind, and a path of
// map keys, where a list on the way means "every element".
type ref struct {
	group, kind string
	path        string
}

// podSpecRefs are the references inside a pod spec.
var podSpecRefs = []ref{
	{"", "ConfigMap", "volumes/configMap/name"},
	{"", "ConfigMap", "volumes/projected/sources/configMap/name"},
	{"", "ConfigMap", "containers/env/valueFrom/configMapKeyRef/name"},
	{"", "ConfigMap", "initContainers/env/valueFrom/configMapKeyRef/name"},
	{"", "ConfigMap", "containers/envFrom/configMapRef/name"},
	{"", "ConfigMap", "initContainers/envFrom/configMapRef/name"},
	{"", "Secret", "volumes/secret/secretName"},
	{"", "Secret", "volumes/projected/sources/secret/name"},
	{"", "Secret", "containers/env/valueFrom/secretKeyRef/name"},
	{"", "Secret", "initContainers/env/valueFrom/secretKeyRef/name"},
	{"", "Secret", "containers/envFrom/secretRef/name"},
	{"", "Secret", "initContainers/envFrom/secretRef/name"},
	{"", "Secret", "imagePullSecrets/name"},
	{"", "ServiceAccount", "serviceAccountName"},
	{"", "ServiceAccount", "serviceAccount"},
	{"", "PersistentVolumeClaim", "volumes/persistentVolumeClaim/claimName"},
	{"scheduling.k8s.io", "PriorityClass", "priorityClassName"},
}

// podSpecPath is where each workload kind keeps its pod spec.
var podSpecPath = map[string]string{
	"Pod":                   "spec",
	"Deployment":            "spec/template/spec",
	"ReplicaSet":            "spec/template/spec",
	"ReplicationController": "spec/template/spec",
	"StatefulSet":           "spec/template/spec",
	"DaemonSet":             "spec/template/spec",
	"Job":                   "spec/template/spec",
	"CronJob":               "spec/jobTemplate/spec/template/spec",
}

// kindRefs are references held by specific kinds.
var kindRefs = map[string][]ref{
	"Ingress": {
		{"", "Service", "spec/rules/http/paths/backend/service/name"},
		{"", "Service", "spec/defaultBackend/service/name"},
		{"", "Secret", "spec/tls/secretName"},
	},
	"StatefulSet":    {{"", "Service", "spec/serviceName"}},
	"ServiceAccount": {{"", "Secret", "secrets/name"}, {"", "Secret", "imagePullSecrets/name"}},
}

// clusterScoped lists the cluster-scoped kinds a reference can point to.
var clusterScoped = map[string]bool{"ClusterRole": true, "PriorityClass": true}

// referrers maps each key of inv to the objects of inv that refer to it.
func referrers(inv *ObjectSet) map[string][]ID {
	type target struct{ group, kind, namespace, name string }
	byTarget := map[target]string{}
	for _, o := range inv.Objects {
		byTarget[target{o.ID.Group, o.ID.Kind, o.ID.Namespace, o.ID.Name}] = o.Key
	}
	out := map[string][]ID{}
	for _, r := range inv.Refs {
		o := inv.Objects[r]
		k := o.Key
		obj, err := o.Node.Map()
		if err != nil {
			continue
		}
		for _, t := range references(o.ID, obj) {
			if !clusterScoped[t.kind] {
				if t.namespace == "" {
					t.namespace = o.ID.Namespace
				}
			} else {
				t.namespace = ""
			}
			key, ok := byTarget[target{t.group, t.kind, t.namespace, t.name}]
			if !ok || key == k || slices.Contains(out[key], o.ID) {
				continue
			}
			out[key] = append(out[key], o.ID)
		}
	}
	return out
}

type refTarget struct{ group, kind, namespace, name string }

// references lists what one object refers to by name.
func references(id ID, obj map[string]any) []refTarget {
	var out []refTarget
	add := func(r ref, root any) {
		for _, v := range valuesAt(root, strings.Split(r.path, "/")) {
			if s, ok := v.(string); ok && s != "" {
				out = append(out, refTarget{group: r.group, kind: r.kind, name: s})
			}
		}
	}
	if p, ok := podSpecPath[id.Kind]; ok {
		for _, spec := range valuesAt(obj, strings.Split(p, "/")) {
			for _, r := range podSpecRefs {
				add(r, spec)
			}
		}
	}
	for _, r := range kindRefs[id.Kind] {
		add(r, obj)
	}
	switch id.Kind {
	case "RoleBinding", "ClusterRoleBinding":
		if rr, ok := obj["roleRef"].(map[string]any); ok {
			kind, _ := rr["kind"].(string)
			name, _ := rr["name"].(string)
			out = append(out, refTarget{group: "rbac.authorization.k8s.io", kind: kind, name: name})
		}
		for _, s := range valuesAt(obj, []string{"subjects"}) {
			sub, _ := s.(map[string]any)
			if kind, _ := sub["kind"].(string); kind == "ServiceAccount" {
				name, _ := sub["name"].(string)
				ns, _ := sub["namespace"].(string)
				out = append(out, refTarget{kind: kind, name: name, namespace: ns})
			}
		}
	case "HorizontalPodAutoscaler":
		if st, ok := valuesAtOne(obj, "spec", "scaleTargetRef").(map[string]any); ok {
			kind, _ := st["kind"].(string)
			name, _ := st["name"].(string)
			group, _ := st["apiVersion"].(string)
			if i := strings.LastIndex(group, "/"); i >= 0 {
				group = group[:i]
			} else {
				group = ""
			}
			out = append(out, refTarget{group: group, kind: kind, name: name})
		}
	}
	return out
}

// valuesAt follows a path of map keys, fanning out over lists.
func valuesAt(v any, path []string) []any {
	if l, ok := v.([]any); ok {
		var out []any
		for _, e := range l {
			out = append(out, valuesAt(e, path)...)
		}
		return out
	}
	if len(path) == 0 {
		return []any{v}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	next, ok := m[path[0]]
	if !ok {
		return nil
	}
	return valuesAt(next, path[1:])
}

func valuesAtOne(v any, path ...string) any {
	if vs := valuesAt(v, path); len(vs) == 1 {
		return vs[0]
	}
	return nil
}
