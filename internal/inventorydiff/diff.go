// Package inventorydiff compares the inventories of each overlay on the
// base and head side of a change: what would be added, changed, pruned
// or left in the cluster, and which of it is dangerous.
package inventorydiff

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/kubeversion"
)

// Annotations that keep an object in the cluster when it leaves the
// inventory (cli-utils and kustomize/kpt spellings).
var keepAnnotations = map[string]string{
	"cli-utils.sigs.k8s.io/on-remove":         "keep",
	"client.lifecycle.config.k8s.io/deletion": "detach",
}

// Side is one overlay rendered on one side of the change.
type Side struct {
	Inventory *inventory.ObjectSet // nil when the overlay failed or is absent
	Err       error                // the render error, if any
	// Skipped says the side was not rendered because the change cannot
	// affect it (Inventory is then empty): it has no digest, and a deploy
	// must never take its emptiness for what was reviewed.
	Skipped bool
	// Keeps, on the base side, says whether the engine that applies the
	// overlay leaves obj in the cluster when it leaves the inventory,
	// beyond the keep annotations every engine honours (Argo CD's
	// Prune=false); nil for none.
	Keeps func(obj *inventory.Object) bool
	// Masked says, for each mask of a hidden value in obj's fields
	// ("(value from Secret ns/name key K, hidden)"), a fingerprint of the
	// value it stands for, kept in memory only; nil when the engine
	// masks nothing. A field masked alike on both sides whose
	// fingerprints differ is planned changed (MarkMaskedChanges).
	Masked func(obj *yaml.RNode) map[string]string
	// Kubernetes is what the render's charts were templated for (the
	// cluster's Capabilities); nil when it templated none.
	Kubernetes *kubeversion.Capabilities
}

// Status of an overlay in the plan.
type Status string

const (
	Unchanged Status = "unchanged"
	Changed   Status = "changed"
	New       Status = "new"     // only on head
	Removed   Status = "removed" // only on base
	Moved     Status = "moved"   // only on head, the same as a removed overlay
	Failed    Status = "error"   // failed to render on either side
)

// Change is one object whose content differs: in place (BaseKey is set
// when its apiVersion changed), or a generated object whose hash-suffixed
// name changed (a replacement).
type Change struct {
	Key     string        `json:"key"`
	BaseKey string        `json:"baseKey,omitempty"`
	Fields  []FieldChange `json:"fields,omitempty"`
	// Unified is the object's YAML as kustomize build prints it, base
	// against head, as a unified diff (Secret values masked).
	Unified string `json:"unified,omitempty"`
}

// Replaced reports whether the change swaps a generated object for a new
// one with another name suffix.
func (c Change) Replaced() bool {
	if c.BaseKey == "" || c.BaseKey == c.Key {
		return false
	}
	b, err1 := inventory.ParseKey(c.BaseKey)
	h, err2 := inventory.ParseKey(c.Key)
	return err1 != nil || err2 != nil || b.Name != h.Name
}

// Overlay is the plan of one overlay.
type Overlay struct {
	Path     string
	Status   Status
	BaseHash string
	HeadHash string
	Added    []string
	Pruned   []string
	// AddedYAML and PrunedYAML are those objects' YAML by key, as
	// kustomize build prints them, in the namespace they land in, Secret
	// values masked.
	AddedYAML, PrunedYAML map[string]string
	// Detached are objects that leave the inventory but stay in the
	// cluster because of a keep/detach annotation.
	Detached  []string
	Changed   []Change
	Unchanged int
	// Dangerous are the change's dangerous findings (internal/danger):
	// what it prunes, refusals, access widening, inventory changes.
	Dangerous []danger.Finding
	BaseErr   string
	HeadErr   string
	// Targets name the .kplan.yaml targets that deploy the overlay.
	Targets []string
	// MovedFrom is the removed overlay a moved one was (Status Moved).
	MovedFrom string
	// BaseInventory and HeadInventory are the inventory the overlay's
	// apply records its objects in, on each side (nil: none, or not
	// rendered).
	BaseInventory, HeadInventory *inventory.Identity
	// HeadDigest is the head render's inventory.ObjectSet.Digest: what
	// the merge's apply of the overlay must be to be the one reviewed
	// ("" when head did not render it).
	HeadDigest string
	// Skipped says neither side was rendered: the change cannot affect
	// the overlay (proven from its closure), so it has no digest.
	Skipped bool
	// SharedWith are the other overlays that render the same inventory-id
	// on head: applying one prunes the other's objects.
	SharedWith []string
	// SharedBefore says the overlays shared it on base too.
	SharedBefore bool
	// File is the overlay's kustomization file, repository-relative (on
	// head, else base): where annotations point.
	File string
	// Notes are what kustomize warns about the overlay's kustomizations
	// on head (deprecated fields), each naming its file, once.
	Notes []string
	// Kubernetes is what its charts were templated for, on head (else
	// base); nil when it templated none.
	Kubernetes *kubeversion.Capabilities `json:",omitempty"`
}

// FailureIntroduced says the overlay fails on head and did not on base:
// the change breaks it. A failure on both sides already exists.
func (o *Overlay) FailureIntroduced() bool {
	return o.HeadErr != "" && o.BaseErr == ""
}

// Problem is what makes the overlay fail on head, introduced by the
// change or not: a render error or an inventory shared with others.
func (o *Overlay) Problem() (msg string, introduced bool) {
	switch {
	case o.HeadErr != "":
		return o.HeadErr, o.FailureIntroduced()
	case len(o.SharedWith) > 0:
		return fmt.Sprintf("inventory-id %s is also the inventory of %s: applying either prunes the other's objects; give each overlay its own inventory (kplan init)",
			o.HeadInventory.ID, strings.Join(o.SharedWith, ", ")), !o.SharedBefore
	}
	return "", false
}

// HasChanges reports whether applying head would change the cluster.
func (o *Overlay) HasChanges() bool {
	return len(o.Added)+len(o.Pruned)+len(o.Detached)+len(o.Changed) > 0
}

// Totals sums a plan.
type Totals struct {
	Added, Changed, Pruned, Detached  int
	Overlays, ChangedOverlays, Failed int
	Dangerous                         int
}

// Plan is the comparison of every overlay.
type Plan struct {
	Base, Head string
	// BaseLabel and HeadLabel name the commits for readers ("main at
	// def5678"); empty means Base and Head say it.
	BaseLabel, HeadLabel string
	Overlays             []Overlay // sorted by path
	Totals               Totals
	// Work is how much the plan rendered and how long it took; nil when
	// not known.
	Work *Work
	// Ignored are the ignore rules applied and what each hid.
	Ignored []IgnoredRule
	// Hidden sums what the rules of each source hid (for "hidden by
	// default: N fields in M objects"); sources that hid nothing are
	// left out.
	Hidden []Hidden
	// NoLongerPlanned are the overlays base planned by discovery that
	// head's .kplan.yaml, new in the change, does not list: kplan never
	// deployed them, so the merge leaves them as they are (no prune).
	NoLongerPlanned []string
	// Unread are the changed files no overlay's build reads, on either
	// side: the plan cannot show what changing them does.
	Unread []UnreadFile
	// NotPlanned are the engines' objects of head that are no target,
	// with why (an ApplicationSet not expanded, an Application of
	// another repository or revision): nothing is dropped unsaid.
	NotPlanned []NotPlanned
	// Settings are the render settings the plan used; a deploy whose
	// target renders otherwise says so.
	Settings Settings
}

// NotPlanned is an engine's object that the plan does not plan.
type NotPlanned struct {
	Engine string `json:"engine"`
	ID     string `json:"id"`
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Settings are what decides how a plan renders besides the commits: a
// render with other settings (helm on, other remote hosts, Flux mode off)
// can differ from the plan's.
type Settings struct {
	RemoteHosts        []string `json:"remoteHosts,omitempty"`
	Helm               bool     `json:"helm,omitempty"`
	LoadRestrictorNone bool     `json:"loadRestrictorNone,omitempty"`
	Flux               bool     `json:"flux,omitempty"`
}

// Differ says, in words, how a deploy's settings o differ from the plan's
// s; "" when they do not. Flux is not compared: a deploy target is one
// overlay either way.
func (s Settings) Differ(o Settings) string {
	var d []string
	if s.Helm != o.Helm {
		d = append(d, fmt.Sprintf("helm %s in the plan, %s here", onOff(s.Helm), onOff(o.Helm)))
	}
	if s.LoadRestrictorNone != o.LoadRestrictorNone {
		d = append(d, fmt.Sprintf("load restrictor %s in the plan, %s here", restrictor(s.LoadRestrictorNone), restrictor(o.LoadRestrictorNone)))
	}
	if !slices.Equal(s.RemoteHosts, o.RemoteHosts) {
		d = append(d, fmt.Sprintf("remote hosts [%s] in the plan, [%s] here", strings.Join(s.RemoteHosts, " "), strings.Join(o.RemoteHosts, " ")))
	}
	return strings.Join(d, "; ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func restrictor(none bool) string {
	if none {
		return "LoadRestrictionsNone"
	}
	return "LoadRestrictionsRootOnly"
}

// UnreadFile is a changed file no planned overlay reads.
type UnreadFile struct {
	Path string `json:"path"`
	// Hint says why the file may still deploy something (e.g. YAML beside
	// the overlays, which a Flux Kustomization may read); "" for none.
	Hint string `json:"hint,omitempty"`
}

// Compare builds the plan from each overlay's base and head sides; an
// overlay missing from a map is absent on that side.
func Compare(baseRev, headRev string, base, head map[string]Side) *Plan {
	p := &Plan{Base: baseRev, Head: headRev}
	paths := map[string]bool{}
	for k := range base {
		paths[k] = true
	}
	for k := range head {
		paths[k] = true
	}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for k := range paths {
			if !yield(k) {
				return
			}
		}
	}) {
		b, inBase := base[path]
		h, inHead := head[path]
		p.Overlays = append(p.Overlays, compareOverlay(path, b, inBase, h, inHead))
	}
	p.Totals = Sum(p.Overlays)
	return p
}

// Sum totals the overlays' plans.
func Sum(overlays []Overlay) Totals {
	var t Totals
	for i := range overlays {
		o := &overlays[i]
		t.Overlays++
		t.Added += len(o.Added)
		t.Changed += len(o.Changed)
		t.Pruned += len(o.Pruned)
		t.Detached += len(o.Detached)
		t.Dangerous += len(o.Dangerous)
		if o.Status == Failed || len(o.SharedWith) > 0 {
			t.Failed++
		}
		if o.HasChanges() || o.Status == New || o.Status == Removed || o.Status == Moved {
			t.ChangedOverlays++
		}
	}
	return t
}

// CompareOne compares one overlay's sides; an absent side has present
// false.
func CompareOne(path string, b Side, inBase bool, h Side, inHead bool) Overlay {
	return compareOverlay(path, b, inBase, h, inHead)
}

func compareOverlay(path string, b Side, inBase bool, h Side, inHead bool) Overlay {
	MarkMaskedChanges(b, h)
	o := Overlay{Path: path, Skipped: b.Skipped && h.Skipped, Kubernetes: cmp.Or(h.Kubernetes, b.Kubernetes)}
	o.BaseInventory, o.HeadInventory = b.Inventory.Identity(), h.Inventory.Identity()
	if b.Err != nil {
		o.BaseErr = b.Err.Error()
	}
	if h.Err != nil {
		o.HeadErr = h.Err.Error()
	}
	if b.Inventory != nil {
		o.BaseHash = b.Inventory.Hash
	}
	if h.Inventory != nil {
		o.HeadHash = h.Inventory.Hash
	}
	if b.Err != nil || h.Err != nil {
		o.Status = Failed
		return o
	}
	empty := &inventory.ObjectSet{Objects: map[string]*inventory.Object{}}
	bi, hi := b.Inventory, h.Inventory
	switch {
	case !inBase || bi == nil:
		o.Status, bi = New, empty
	case !inHead || hi == nil:
		o.Status, hi = Removed, empty
	}
	// Objects are matched by identity (group, kind, namespace, name), as
	// the API server matches them; lists hold seed keys.
	var added, pruned []string
	var changedFindings []danger.Finding
	for _, r := range hi.Refs {
		ho := hi.Objects[r]
		bo, ok := bi.Objects[r]
		if !ok {
			added = append(added, ho.Key)
			continue
		}
		if fields, unified := objectDiff(bo, ho, false); len(fields) > 0 || bo.Key != ho.Key {
			c := Change{Key: ho.Key, Fields: fields, Unified: unified}
			if bo.Key != ho.Key {
				c.BaseKey = bo.Key
			}
			o.Changed = append(o.Changed, c)
			changedFindings = append(changedFindings, objectFindings(ho.Key, bo, ho)...)
		} else {
			o.Unchanged++
		}
	}
	for _, r := range bi.Refs {
		if _, ok := hi.Objects[r]; !ok {
			pruned = append(pruned, bi.Objects[r].Key)
		}
	}
	added, pruned = o.pairReplacements(bi, hi, added, pruned)
	o.Added = added
	o.AddedYAML = objectsYAML(hi, added)
	o.PrunedYAML = objectsYAML(bi, pruned)
	for _, k := range pruned {
		if kept(bi.Object(k)) || (b.Keeps != nil && b.Keeps(bi.Object(k))) {
			o.Detached = append(o.Detached, k)
		} else {
			o.Pruned = append(o.Pruned, k)
		}
	}
	slices.SortFunc(o.Changed, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
	o.Dangerous = dangers(o, bi, len(hi.Keys))
	o.Dangerous = append(o.Dangerous, changedFindings...)
	for _, k := range o.Added {
		o.Dangerous = append(o.Dangerous, objectFindings(k, nil, hi.Object(k))...)
	}
	if inBase && inHead {
		o.Dangerous = append(o.Dangerous, inventoryDanger(o.BaseInventory, o.HeadInventory, len(bi.Keys))...)
	}
	if o.Status == "" {
		o.Status = Unchanged
		if o.HasChanges() {
			o.Status = Changed
		}
	}
	return o
}

// hashSuffix matches the suffix kustomize appends to generated ConfigMaps
// and Secrets: a dash and ten characters of its hash alphabet.
var hashSuffix = regexp.MustCompile(`^(.+)-[2456789bcdfghkmt]{10}$`)

// pairReplacements turns a pruned and an added generated object that share
// kind, namespace and name stem into one replacement.
func (o *Overlay) pairReplacements(bi, hi *inventory.ObjectSet, added, pruned []string) ([]string, []string) {
	stem := func(obj *inventory.Object) (string, bool) {
		if obj.ID.Group != "" || (obj.ID.Kind != "ConfigMap" && obj.ID.Kind != "Secret") {
			return "", false
		}
		m := hashSuffix.FindStringSubmatch(obj.ID.Name)
		if m == nil {
			return "", false
		}
		id := obj.ID
		id.Name = m[1]
		return id.Key(), true
	}
	group := func(inv *inventory.ObjectSet, keys []string) map[string][]string {
		g := map[string][]string{}
		for _, k := range keys {
			if s, ok := stem(inv.Object(k)); ok {
				g[s] = append(g[s], k)
			}
		}
		return g
	}
	bs, hs := group(bi, pruned), group(hi, added)
	paired := map[string]bool{}
	for s, bk := range bs {
		hk := hs[s]
		if len(bk) != 1 || len(hk) != 1 {
			continue // ambiguous: leave as add and prune
		}
		fields, unified := objectDiff(bi.Object(bk[0]), hi.Object(hk[0]), true)
		o.Changed = append(o.Changed, Change{Key: hk[0], BaseKey: bk[0], Fields: fields, Unified: unified})
		paired[bk[0]], paired[hk[0]] = true, true
	}
	drop := func(keys []string) []string {
		return slices.DeleteFunc(keys, func(k string) bool { return paired[k] })
	}
	return drop(added), drop(pruned)
}

// objectDiff compares one object's two sides: field by field, and as a
// unified diff of its YAML.
func objectDiff(b, h *inventory.Object, renamed bool) ([]FieldChange, string) {
	bm, err1 := b.Node.Map()
	hm, err2 := h.Node.Map()
	if err1 != nil || err2 != nil {
		return []FieldChange{{Path: "(object)", Op: "~", Old: "unreadable", New: "unreadable"}}, ""
	}
	// A namespace the object gets by default is where it lands either way.
	defaultNamespace(bm, b)
	defaultNamespace(hm, h)
	secret := isSecret(b.ID) || isSecret(h.ID)
	var hide func(string) bool
	if secret {
		hide = secretPath
	}
	var skip func(string) bool
	if renamed {
		skip = func(p string) bool { return p == "metadata.name" }
	}
	fields := diffFields(bm, hm, hide, skip)
	if len(fields) == 0 && b.Key == h.Key {
		return nil, ""
	}
	if secret {
		// Head's masks say which values differ from base's, so the
		// diff shows a changed value without showing it.
		hm = maskSecret(hm, bm)
		bm = maskSecret(bm, nil)
	}
	return fields, Unified("base/"+b.Key, "head/"+h.Key, printYAML(bm), printYAML(hm))
}

func defaultNamespace(m map[string]any, o *inventory.Object) {
	if !o.Defaulted {
		return
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		md["namespace"] = o.ID.Namespace
	}
}

func isSecret(id inventory.ID) bool { return id.Group == "" && id.Kind == "Secret" }

func kept(obj *inventory.Object) bool {
	if obj == nil {
		return false
	}
	ann := obj.Node.GetAnnotations()
	for k, v := range keepAnnotations {
		if ann[k] == v {
			return true
		}
	}
	return false
}

// dangers are the findings of what the change prunes: each object (a
// Namespace, CRD or PVC loses data) and the overlay emptied.
func dangers(o Overlay, bi *inventory.ObjectSet, headCount int) []danger.Finding {
	var out []danger.Finding
	for _, k := range o.Pruned {
		out = append(out, objectFindings(k, bi.Object(k), nil)...)
	}
	if len(bi.Keys) > 0 && headCount == 0 && len(o.Pruned) > 0 {
		out = append(out, danger.PruneAllFinding(len(o.Pruned)))
	}
	return out
}

// objectFindings runs the danger rules on one object's sides (nil: absent
// on that side). The objects are read as the diff reads them, in the
// namespace they land in.
func objectFindings(key string, b, h *inventory.Object) []danger.Finding {
	side := func(obj *inventory.Object) (map[string]any, bool) {
		if obj == nil {
			return nil, true
		}
		m, err := obj.Node.Map()
		if err != nil {
			return nil, false
		}
		defaultNamespace(m, obj)
		return m, true
	}
	bm, ok1 := side(b)
	hm, ok2 := side(h)
	if !ok1 || !ok2 {
		return nil // unreadable: the diff shows it so
	}
	return danger.Check(danger.Change{Key: key, Before: bm, After: hm})
}

// inventoryDanger explains what the next apply does when the inventory
// an overlay records its objects in changes (cli-utils semantics).
func inventoryDanger(b, h *inventory.Identity, objects int) []danger.Finding {
	finding := func(why string) []danger.Finding {
		return []danger.Finding{{Rule: danger.InventoryChange, Reason: why}}
	}
	switch {
	case b == nil || h == nil || *b == *h || objects == 0:
		return nil
	case b.ID != h.ID:
		return finding(fmt.Sprintf("inventory changes from %s to %s: the next apply finds the %d objects already owned by inventory-id %s and, by the must-match policy, skips them (neither updated nor pruned); keep the old inventory or adopt them on purpose (--inventory-policy adopt-all)",
			b, h, objects, b.ID))
	default:
		return finding(fmt.Sprintf("inventory object changes from %s to %s with the same inventory-id: the next apply starts an empty inventory, so objects removed before it are never pruned and the old inventory object stays; keep the old name",
			b, h))
	}
}

// Crashed are the overlays whose planning met a bug in kplan, on either
// side (a recovered panic, internal/crash): what the change does to them
// is unknown, so no plan that holds one passes, whatever the options.
func (p *Plan) Crashed() []string {
	var out []string
	for i := range p.Overlays {
		if o := &p.Overlays[i]; strings.Contains(o.HeadErr, crash.Marker) || strings.Contains(o.BaseErr, crash.Marker) {
			out = append(out, o.Path)
		}
	}
	return out
}

// IntroducedFailures are the overlays this change breaks: they fail to
// render on head and did not on base (rendered there, or new), or they
// now share an inventory. A failure on both sides already exists and is
// not the change's doing.
func (p *Plan) IntroducedFailures() []string {
	var out []string
	for i := range p.Overlays {
		if msg, introduced := p.Overlays[i].Problem(); msg != "" && introduced {
			out = append(out, p.Overlays[i].Path)
		}
	}
	return out
}
