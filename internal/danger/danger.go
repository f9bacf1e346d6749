// Package danger finds the changes a reviewer must not miss in a plan:
// changes the API server will refuse, access that widens, pods that reach
// the node, workloads scaled to zero, removals that lose data, and two
// overlays that deploy the same object. Each finding names its rule (an
// id that .kplan.yaml can turn off), the object and why it is dangerous.
//
// The rules (see Rules for each one's reason):
//
//	prune-stateful         prunes a Namespace, CustomResourceDefinition or PersistentVolumeClaim
//	prune-all              prunes every object of an overlay
//	inventory-change       the inventory an overlay records its objects in changes
//	statefulset-immutable  a StatefulSet's spec changes beyond replicas, template, updateStrategy,
//	                       persistentVolumeClaimRetentionPolicy, minReadySeconds, ordinals, revisionHistoryLimit
//	selector-immutable     a Deployment, DaemonSet, ReplicaSet or Job's spec.selector changes
//	job-template-immutable a Job's spec.template changes
//	pvc-immutable          a PersistentVolumeClaim shrinks, changes storageClassName or another fixed field
//	roleref-immutable      a RoleBinding or ClusterRoleBinding's roleRef changes
//	immutable-data         an immutable ConfigMap or Secret changes its data (or immutable)
//	binds-powerful-role    a binding grants cluster-admin, admin or edit to a new subject
//	wildcard-rule          a Role or ClusterRole gains a rule with * in verbs, resources or apiGroups
//	privileged             a container becomes privileged
//	host-network           a pod template sets hostNetwork
//	host-pid               a pod template sets hostPID
//	host-path              a pod template mounts a hostPath volume
//	scale-to-zero          a Deployment, StatefulSet, ReplicaSet or ReplicationController goes to replicas 0
//	duplicate-object       two overlays deploying to one cluster render the same object
//
// Rules look at what the change does: an object that was privileged on
// base and still is raises nothing; one that becomes so (or is added so)
// does. A reason never holds a Secret's value: it names fields and keys.
//
// A repository turns rules off in .kplan.yaml (internal/repoconfig):
//
//	dangerous:
//	  disable: [scale-to-zero, host-path]
//
// A rule is off only when both the base and the head commit turn it off:
// a pull request cannot silence the rules that flag it.
package danger

import (
	"fmt"
	"slices"
	"strings"
)

// Finding is one dangerous change.
type Finding struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// Object is the seed key of the object concerned ("" for the overlay
	// as a whole).
	Object string `json:"object,omitempty"`
	// Reason says what the change does and why that is dangerous, naming
	// the object, as a reviewer reads it.
	Reason string `json:"reason"`
}

// String is the finding as one line: its reason and rule.
func (f Finding) String() string { return f.Reason + " [" + f.Rule + "]" }

// Rule ids.
const (
	PruneStateful        = "prune-stateful"
	PruneAll             = "prune-all"
	InventoryChange      = "inventory-change"
	StatefulSetImmutable = "statefulset-immutable"
	SelectorImmutable    = "selector-immutable"
	JobTemplateImmutable = "job-template-immutable"
	PVCImmutable         = "pvc-immutable"
	RoleRefImmutable     = "roleref-immutable"
	ImmutableData        = "immutable-data"
	BindsPowerfulRole    = "binds-powerful-role"
	WildcardRule         = "wildcard-rule"
	Privileged           = "privileged"
	HostNetwork          = "host-network"
	HostPID              = "host-pid"
	HostPath             = "host-path"
	ScaleToZero          = "scale-to-zero"
	DuplicateObject      = "duplicate-object"
	// ArgoCDProtectionRemoved is an Argo CD object or Application that
	// loses its Prune=false/Delete=false sync option.
	ArgoCDProtectionRemoved = "argocd-protection-removed"
)

// Rule is one rule and what it finds.
type Rule struct {
	ID string
	// Doc says what the rule finds and why it matters.
	Doc string
}

// Rules lists every rule, in the order findings are reported.
func Rules() []Rule {
	return []Rule{
		{PruneStateful, "prunes a Namespace (deletes every object in it), CustomResourceDefinition (deletes every custom resource of the type) or PersistentVolumeClaim (may delete the volume's data)"},
		{PruneAll, "prunes every object of an overlay"},
		{InventoryChange, "changes the inventory an overlay records its objects in: the next apply skips or never prunes the objects of the old one"},
		{StatefulSetImmutable, "changes a StatefulSet's spec beyond replicas, template, updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds, ordinals and revisionHistoryLimit (volumeClaimTemplates included): the API server refuses it"},
		{SelectorImmutable, "changes the spec.selector of a Deployment, DaemonSet, ReplicaSet or Job: the API server refuses it"},
		{JobTemplateImmutable, "changes a Job's spec.template: the API server refuses it"},
		{PVCImmutable, "shrinks a PersistentVolumeClaim, changes its storageClassName or another field fixed at creation: the API server refuses it"},
		{RoleRefImmutable, "changes a RoleBinding's or ClusterRoleBinding's roleRef: the API server refuses it"},
		{ImmutableData, "changes the data of a ConfigMap or Secret marked immutable: true (or unmarks it): the API server refuses it"},
		{BindsPowerfulRole, "grants cluster-admin, admin or edit to a subject that did not have it through the binding"},
		{WildcardRule, "gives a Role or ClusterRole a rule with * in its verbs, resources or apiGroups"},
		{Privileged, "makes a container privileged: root on the node"},
		{HostNetwork, "puts a pod template on the node's network (hostNetwork)"},
		{HostPID, "lets a pod template see the node's processes (hostPID)"},
		{HostPath, "mounts a directory of the node into a pod template (hostPath volume)"},
		{ScaleToZero, "scales a Deployment, StatefulSet, ReplicaSet or ReplicationController to zero replicas"},
		{DuplicateObject, "renders an object another overlay deploying to the same cluster renders too: the two applies overwrite each other, and cli-utils refuses the object owned by the other inventory"},
		{ArgoCDProtectionRemoved, "removes an Argo CD sync option that kept an object from being pruned or deleted (Prune=false, Prune=confirm, Delete=false, Delete=confirm on the object, Prune=false or Prune=confirm in the Application's syncOptions): the next change that removes the object deletes it"},
	}
}

// IDs are the rule ids, in Rules order.
func IDs() []string {
	var out []string
	for _, r := range Rules() {
		out = append(out, r.ID)
	}
	return out
}

// CheckIDs refuses ids that name no rule, naming the valid ones.
func CheckIDs(ids []string) error {
	valid := IDs()
	var bad []string
	for _, id := range ids {
		if !slices.Contains(valid, id) {
			bad = append(bad, fmt.Sprintf("%q", id))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("unknown danger rule %s: the rules are %s", strings.Join(bad, ", "), strings.Join(valid, ", "))
	}
	return nil
}

// Without returns findings without those of the rules in off.
func Without(findings []Finding, off map[string]bool) []Finding {
	if len(off) == 0 || len(findings) == 0 {
		return findings
	}
	return slices.DeleteFunc(findings, func(f Finding) bool { return off[f.Rule] })
}

// Change is one object on both sides of a plan, as maps of its rendered
// YAML: Before is nil for an object the change adds, After nil for one it
// prunes.
type Change struct {
	// Key is the object's seed key (head's, else base's).
	Key           string
	Before, After map[string]any
}

// check is one object rule: the findings' reasons for a change (the rule
// and object are filled in by Check).
type check struct {
	id string
	fn func(c Change) []string
}

func checks() []check {
	return []check{
		{PruneStateful, pruneStateful},
		{StatefulSetImmutable, statefulSetImmutable},
		{SelectorImmutable, selectorImmutable},
		{JobTemplateImmutable, jobTemplateImmutable},
		{PVCImmutable, pvcImmutable},
		{RoleRefImmutable, roleRefImmutable},
		{ImmutableData, immutableData},
		{BindsPowerfulRole, bindsPowerfulRole},
		{WildcardRule, wildcardRule},
		{Privileged, privileged},
		{HostNetwork, hostNetwork},
		{HostPID, hostPID},
		{HostPath, hostPath},
		{ScaleToZero, scaleToZero},
	}
}

// Check runs every object rule on one change.
func Check(c Change) []Finding {
	if c.Before == nil && c.After == nil {
		return nil
	}
	var out []Finding
	for _, ch := range checks() {
		for _, why := range ch.fn(c) {
			out = append(out, Finding{Rule: ch.id, Object: c.Key, Reason: why})
		}
	}
	return out
}

// PruneAllFinding is the finding of an overlay whose change prunes all n of its
// objects.
func PruneAllFinding(n int) Finding {
	return Finding{Rule: PruneAll, Reason: fmt.Sprintf("prunes every object of the overlay (%d)", n)}
}

// VariantNote starts the note VariantNoteText gives: reports show such
// notes apart from kustomize's warnings.
const VariantNote = "Variants: "

// VariantNoteText is the note, not a finding, on an object key the
// change makes an overlay render that the overlays others render too,
// when nothing says they deploy to one cluster (no .kplan.yaml targets,
// no Flux): kustomize variants of one application, alternatives planned
// side by side, are the common case.
func VariantNoteText(key string, others []string) string {
	return fmt.Sprintf("%s%s is also rendered by %s: alternative variants, or one cluster? Only targets of one environment (.kplan.yaml, Flux) are checked for duplicate objects",
		VariantNote, describeKey(key), strings.Join(others, ", "))
}

// DuplicateFinding is the finding of an object key that the overlays
// others render too, for the same cluster.
func DuplicateFinding(key string, others []string) Finding {
	return Finding{Rule: DuplicateObject, Object: key, Reason: fmt.Sprintf(
		"%s is also rendered by %s, deployed to the same cluster: each apply overwrites the other's, and cli-utils refuses to apply an object another inventory owns; render it in one overlay only",
		describeKey(key), strings.Join(others, ", "))}
}
