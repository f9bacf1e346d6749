package argocd

import (
	"fmt"
	"slices"
	"strings"
)

// Annotations Argo CD reads on the objects it syncs.
const (
	// SyncOptionsAnnotation holds per-object sync options, comma-separated
	// ("Prune=false,ServerSideApply=true").
	SyncOptionsAnnotation = "argocd.argoproj.io/sync-options"
	// CompareOptionsAnnotation holds per-object compare options
	// ("IgnoreExtraneous").
	CompareOptionsAnnotation = "argocd.argoproj.io/compare-options"
)

// options parses a comma-separated option list ("Prune=false, Delete=false")
// into name → value; Argo CD trims white space around each option.
func options(list ...string) map[string]string {
	out := map[string]string{}
	for _, l := range list {
		for _, o := range strings.Split(l, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(o), "=")
			if name != "" {
				out[name] = value
			}
		}
	}
	return out
}

// Kept says why Argo CD leaves an object that leaves the Application in
// the cluster at the sync after the merge ("" when it deletes it), from
// the object's sync-options annotation as the cluster holds it (base's
// render) and the Application after the merge: head's, or nil when the
// merge deletes the Application.
//
// A prune honours Prune=false or Prune=confirm on the object, else the
// Application's syncOptions (the object's option wins); deleting the
// Application (its resources finalizer deletes what it synced) honours
// the object's Delete=false or Delete=confirm only.
func Kept(annotations map[string]string, head *Application) string {
	obj := options(annotations[SyncOptionsAnnotation])
	if head == nil {
		switch obj["Delete"] {
		case "false":
			return "its " + SyncOptionsAnnotation + " says Delete=false: Argo CD leaves it in the cluster when the Application is deleted"
		case "confirm":
			return "its " + SyncOptionsAnnotation + " says Delete=confirm: Argo CD deletes it only once someone confirms"
		}
		return ""
	}
	prune, from := obj["Prune"], "its "+SyncOptionsAnnotation
	if prune == "" {
		prune, from = head.pruneOption(), "the Application's spec.syncPolicy.syncOptions"
	}
	switch prune {
	case "false":
		return from + " says Prune=false: Argo CD does not prune it (the Application stays OutOfSync until it is deleted by hand)"
	case "confirm":
		return from + " says Prune=confirm: Argo CD prunes it only once someone confirms"
	}
	return ""
}

// pruneOption is the Application's Prune sync option ("" unset).
func (a *Application) pruneOption() string {
	if a == nil || a.Spec().SyncPolicy == nil {
		return ""
	}
	return options(a.Spec().SyncPolicy.SyncOptions...)["Prune"]
}

// Protection says which of Argo CD's prune and delete protections an
// object's annotations set ("Prune=false", "Delete=confirm", …), for
// telling when a change removes one.
func Protection(annotations map[string]string) []string {
	obj := options(annotations[SyncOptionsAnnotation])
	var out []string
	for _, name := range []string{"Prune", "Delete"} {
		if v := obj[name]; v == "false" || v == "confirm" {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// ProtectionRemoved says which of base's protections (Protection's or
// AppProtection's) head's drop, comma-separated; "" when none.
func ProtectionRemoved(base, head []string) string {
	var gone []string
	for _, p := range base {
		if !slices.Contains(head, p) {
			gone = append(gone, p)
		}
	}
	if len(gone) == 0 {
		return ""
	}
	return strings.Join(gone, ", ")
}

// AppProtection is the Application's own Prune protection, as
// Protection names an object's.
func (a *Application) AppProtection() []string {
	if v := a.pruneOption(); v == "false" || v == "confirm" {
		return []string{"Prune=" + v}
	}
	return nil
}

// IgnoresExtraneous says whether an object's compare options make Argo
// CD leave it out of the Application's sync status once it is extraneous
// (removed from git).
func IgnoresExtraneous(annotations map[string]string) bool {
	_, ok := options(annotations[CompareOptionsAnnotation])["IgnoreExtraneous"]
	return ok
}

// ExtraneousNote is the note of an object the plan prunes that carries
// IgnoreExtraneous: Argo CD does not count it OutOfSync, so no automated
// sync starts for it alone.
func ExtraneousNote(object string) string {
	return fmt.Sprintf("%s carries %s: IgnoreExtraneous: Argo CD does not count it OutOfSync once removed, so it is pruned only by a sync something else starts (or by hand)", object, CompareOptionsAnnotation)
}

// RespectsIgnoreDifferences says whether a sync leaves the fields of
// spec.ignoreDifferences as the cluster has them (sync option
// RespectIgnoreDifferences=true); without it a sync applies them.
func (a *Application) RespectsIgnoreDifferences() bool {
	return a.Spec().SyncPolicy != nil && options(a.Spec().SyncPolicy.SyncOptions...)["RespectIgnoreDifferences"] == "true"
}
