// Package report prints a plan for people and machines: Markdown for the
// PR comment and job summary, plain text for the terminal, and JSON.
package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/markers"
)

// Diff styles: how a report shows what changed inside objects.
const (
	// DiffFields shows each changed field (multi-line values as line
	// diffs) and added objects' YAML.
	DiffFields = "fields"
	// DiffUnified shows every object's YAML, base against head, as
	// unified diffs, as kustomize build | diff -u would.
	DiffUnified = "unified"
)

// Options choose how a report shows a plan; the zero value is the
// default.
type Options struct {
	// DiffStyle is DiffFields ("" too) or DiffUnified.
	DiffStyle string
	// Complete says, in Markdown, where the complete report is (a link
	// to the job summary, an artifact), for a Markdown report fitted to
	// GitHub's limits that had to leave something out; "" is a report
	// fitted to MaxBytes, the command line's --max-bytes.
	Complete string
	// MaxBytes bounds the Markdown Write prints (the command line's
	// --max-bytes); 0 prints it whole: the size budget belongs to the
	// comment, which the Action fits to GitHub's limits itself.
	MaxBytes int
	// DangerGate says what dangerous findings mean for the check; zero:
	// nothing is said.
	DangerGate DangerGate
	// Running are the targets whose cluster runs another commit than the
	// plan's base, noted near the top of the Markdown and the text (not
	// in the JSON: they are the forge's record, not the plan).
	Running []Running
}

// DangerGate is the Action's fail-on-dangerous, as the comment tells it.
type DangerGate struct {
	// Fails says the check fails on dangerous findings.
	Fails bool
	// Label acknowledges them; Acknowledged says the PR carries it.
	Label        string
	Acknowledged bool
}

// sentence is what the gate says after the count of dangerous changes
// ("" when nothing).
func (g DangerGate) sentence() string {
	switch {
	case g.Acknowledged:
		return fmt.Sprintf("acknowledged by the label `%s`", g.Label)
	case g.Fails && g.Label != "":
		return fmt.Sprintf("this check fails until they are fixed or the label `%s` acknowledges them", g.Label)
	case g.Fails:
		return "this check fails until they are fixed"
	}
	return ""
}

// CheckDiffStyle refuses a diff style that is neither fields nor unified.
func CheckDiffStyle(style string) error {
	switch style {
	case "", DiffFields, DiffUnified:
		return nil
	}
	return fmt.Errorf("diff style %q: want %s or %s", style, DiffFields, DiffUnified)
}

func (o Options) unified() bool { return o.DiffStyle == DiffUnified }

// Summary is the one-line total that opens every form of the report, e.g.
// "3 to add, 1 to change, 2 to prune in 2 of 48 overlays".
func Summary(p *inventorydiff.Plan) string {
	t := p.Totals
	s := fmt.Sprintf("%d to add, %d to change, %d to prune in %d of %d overlays",
		t.Added, t.Changed, t.Pruned, t.ChangedOverlays, t.Overlays)
	if t.Detached > 0 {
		s += fmt.Sprintf(", %d left in the cluster", t.Detached)
	}
	if n := len(p.Unread); n > 0 {
		// Never a bare "no change" for a change nothing here reads.
		s += fmt.Sprintf("; %d changed %s no overlay reads", n, plural(n, "file", "files"))
	}
	if t.Failed > 0 {
		s += fmt.Sprintf("; %d %s failed", t.Failed, plural(t.Failed, "overlay", "overlays"))
		if n := len(p.IntroducedFailures()); n < t.Failed {
			s += fmt.Sprintf(" (%d already failing on base)", t.Failed-n)
		}
	}
	return s
}

// commits says which commits were planned, e.g. "head abc1234 against
// main at def5678".
func commits(p *inventorydiff.Plan) string {
	return fmt.Sprintf("%s against %s", orRev(p.HeadLabel, "head "+shortRev(p.Head)), orRev(p.BaseLabel, "base "+shortRev(p.Base)))
}

func orRev(label, rev string) string {
	if label != "" {
		return label
	}
	return rev
}

// title names an overlay for a reader: its path, the targets that deploy
// it and where it moved from.
func title(o *inventorydiff.Overlay) string {
	s := o.Path
	if len(o.Targets) > 0 {
		s = plural(len(o.Targets), "target ", "targets ") + strings.Join(o.Targets, ", ") + " (" + o.Path + ")"
	}
	return s
}

// reported says whether a report lists the overlay: anything but an
// unchanged overlay with no problem and no dangerous finding (a renamed
// inventory changes no object but is counted as a danger: it is named).
func reported(o *inventorydiff.Overlay) bool {
	msg, _ := o.Problem()
	return o.Status != inventorydiff.Unchanged || msg != "" || len(o.Dangerous) > 0
}

// failureLine says whether the change brings an overlay's failure.
func failureLine(o *inventorydiff.Overlay) string {
	msg, introduced := o.Problem()
	switch {
	case msg == "":
		return ""
	case introduced:
		return "introduced by this change"
	default:
		return "already failing on base; not caused by this change"
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func overlayCounts(o *inventorydiff.Overlay) string {
	s := fmt.Sprintf("%d to add, %d to change, %d to prune", len(o.Added), len(o.Changed), len(o.Pruned))
	if len(o.Detached) > 0 {
		s += fmt.Sprintf(", %d left in the cluster", len(o.Detached))
	}
	return s
}

// shortRev abbreviates a commit SHA for display.
func shortRev(rev string) string {
	if len(rev) == 40 && !strings.ContainsAny(rev, " ") {
		return rev[:7]
	}
	return rev
}

// unifiedDiffs are the overlay's objects as unified YAML diffs, in the
// order of the plan: added, changed, pruned.
func unifiedDiffs(o *inventorydiff.Overlay) []keyedDiff {
	var out []keyedDiff
	for _, k := range o.Added {
		out = append(out, keyedDiff{k, inventorydiff.Unified("/dev/null", "head/"+k, "", o.AddedYAML[k])})
	}
	for _, c := range o.Changed {
		if c.Unified != "" {
			out = append(out, keyedDiff{c.Key, c.Unified})
		}
	}
	for _, k := range o.Pruned {
		out = append(out, keyedDiff{k, inventorydiff.Unified("base/"+k, "/dev/null", o.PrunedYAML[k], "")})
	}
	return out
}

type keyedDiff struct{ key, diff string }

// overlayError is the error of an overlay that failed on either side.
func overlayError(o *inventorydiff.Overlay) string {
	var parts []string
	if o.BaseErr != "" {
		parts = append(parts, "base: "+o.BaseErr)
	}
	if msg, _ := o.Problem(); msg != "" {
		parts = append(parts, "head: "+msg)
	}
	return strings.Join(parts, "; ")
}

// jsonOverlay is the JSON form of one overlay.
type jsonOverlay struct {
	Path      string               `json:"path"`
	Status    inventorydiff.Status `json:"status"`
	Base      jsonSide             `json:"base"`
	Head      jsonSide             `json:"head"`
	Added     []string             `json:"added"`
	Pruned    []string             `json:"pruned"`
	Changed   []string             `json:"changed"`
	Replaced  []jsonReplacement    `json:"replaced"`
	Detached  []string             `json:"detached"`
	Unchanged int                  `json:"unchanged"`
	// Dangerous are the findings as lines (reason and [rule]);
	// DangerousFindings the same, typed.
	Dangerous         []string               `json:"dangerous"`
	DangerousFindings []danger.Finding       `json:"dangerousFindings"`
	Fields            map[string][]jsonField `json:"fields,omitempty"`
	// AddedYAML is each added object as kustomize build prints it
	// (Secret values masked).
	AddedYAML map[string]string `json:"addedYaml,omitempty"`
	// Unified is, with the unified diff style, each added, changed and
	// pruned object's unified YAML diff by key.
	Unified map[string]string `json:"unified,omitempty"`
	Error   string            `json:"error,omitempty"`
	// Failure is "introduced" (the change breaks the overlay) or
	// "existing" (it failed on base too).
	Failure string `json:"failure,omitempty"`
	// Digest is the head render's digest: what the merge's apply must be
	// to be the plan reviewed (absent when head did not render it).
	Digest string `json:"digest,omitempty"`
	// Skipped says the plan did not render the overlay: the change
	// cannot affect it. It has no digest.
	Skipped bool `json:"skipped,omitempty"`
	// File is the overlay's kustomization file; Notes, kustomize's
	// warnings about the files its build reads.
	File       string   `json:"file,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	Targets    []string `json:"targets,omitempty"`
	MovedFrom  string   `json:"movedFrom,omitempty"`
	SharedWith []string `json:"sharedInventoryWith,omitempty"`
	// Kubernetes is what its charts were templated for (absent when it
	// templated none): the version, the declared API versions, and
	// where they were declared ("" is kplan's default).
	Kubernetes *kubeversion.Capabilities `json:"kubernetes,omitempty"`
}

type jsonSide struct {
	Hash      string              `json:"hash"`
	Error     string              `json:"error,omitempty"`
	Inventory *inventory.Identity `json:"inventory,omitempty"`
}

type jsonReplacement struct {
	Base string `json:"base"`
	Head string `json:"head"`
}

// FormatVersion is the version of the JSON report's schema (docs/plan.md):
// a change that renames, removes or retypes a field raises it. 1 was the
// unversioned schema, with old/new as JSON text inside strings and head
// "working tree".
const FormatVersion = 2

// Worktree is the JSON's head when the plan compared the working tree
// on disk (with base, the commit it was compared with).
const Worktree = "worktree"

// workingTree is the Rev internal/snapshot gives files on disk.
const workingTree = "working tree"

type jsonPlan struct {
	FormatVersion int `json:"formatVersion"`
	// Base and Head are commit SHAs; Head is "worktree" for files on disk.
	Base     string        `json:"base"`
	Head     string        `json:"head"`
	Summary  string        `json:"summary"`
	Overlays []jsonOverlay `json:"overlays"`
	Totals   jsonTotals    `json:"totals"`
	// Images are the image changes across the plan ("" old: a new one).
	Images []jsonImage `json:"images"`
	// Ignored are the ignore rules applied and what each hid.
	Ignored []inventorydiff.IgnoredRule `json:"ignored,omitempty"`
	// Hidden sums what each source's rules hid ("default": the default
	// noise set).
	Hidden []inventorydiff.Hidden `json:"hidden,omitempty"`
	// NoLongerPlanned are the overlays the change's new .kplan.yaml stops
	// planning, left as they are.
	NoLongerPlanned []string `json:"noLongerPlanned,omitempty"`
	// NotPlanned are the engines' objects of head that are no target,
	// with why.
	NotPlanned []inventorydiff.NotPlanned `json:"notPlanned,omitempty"`
	// Unread are the changed files no overlay reads.
	Unread []inventorydiff.UnreadFile `json:"unread,omitempty"`
	// Work is how much the plan rendered and how long it took.
	Work *jsonWork `json:"work,omitempty"`
	// Settings are the render settings the plan used.
	Settings inventorydiff.Settings `json:"settings"`
}

// jsonField is a field change with its values typed: a string, number,
// boolean, null, object or list as in the object, never JSON text inside
// a string; an order change lists the keys, old and new order.
type jsonField struct {
	Path   string          `json:"path"`
	Op     string          `json:"op"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new,omitempty"`
	Diff   string          `json:"diff,omitempty"`
	Hidden bool            `json:"hidden,omitempty"`
}

func fieldJSON(f inventorydiff.FieldChange) jsonField {
	return jsonField{Path: f.Path, Op: f.Op, Old: typedValue(f.Op, f.Old), New: typedValue(f.Op, f.New), Diff: f.Diff, Hidden: f.Hidden}
}

// typedValue is a field change's value as JSON: FieldChange holds it as
// JSON text (a short scalar, or the window of a long string where the
// sides differ), an order change as keys joined by ", ".
func typedValue(op, v string) json.RawMessage {
	var out any = v
	switch {
	case v == "":
		return nil
	case op == "order":
		out = strings.Split(v, ", ")
	case json.Valid([]byte(v)):
		return json.RawMessage(v)
	}
	data, _ := json.Marshal(out) // strings: cannot fail
	return data
}

type jsonImage struct {
	Old     string       `json:"old,omitempty"`
	New     string       `json:"new,omitempty"`
	Objects []jsonObject `json:"objects"`
}

type jsonObject struct {
	Overlay string `json:"overlay"`
	Key     string `json:"key"`
}

type jsonWork struct {
	Overlays  int   `json:"overlays"`
	Skipped   int   `json:"skipped"`
	Rendered  int   `json:"rendered"`
	CacheHits int   `json:"cacheHits"`
	TookMs    int64 `json:"tookMs"`
	// Shards is how many runners shared a merged plan (its tookMs is the
	// longest one's).
	Shards int `json:"shards,omitempty"`
}

type jsonTotals struct {
	Added           int `json:"added"`
	Changed         int `json:"changed"`
	Pruned          int `json:"pruned"`
	Detached        int `json:"detached"`
	Overlays        int `json:"overlays"`
	ChangedOverlays int `json:"changedOverlays"`
	Failed          int `json:"failed"`
	Introduced      int `json:"introducedFailures"`
	Dangerous       int `json:"dangerous"`
}

// JSON is the machine-readable plan. Every overlay is listed; changed
// holds objects changed in place, replaced the generated objects whose
// name suffix changed (counted as changes in totals.changed). Secret
// values never appear: their field changes carry hidden=true.
func JSON(p *inventorydiff.Plan) ([]byte, error) { return JSONWith(p, Options{}) }

// JSONWith is JSON shown as opts say: the unified style adds each
// object's unified YAML diff.
func JSONWith(p *inventorydiff.Plan, opts Options) ([]byte, error) {
	head := p.Head
	if head == workingTree {
		head = Worktree
	}
	out := jsonPlan{FormatVersion: FormatVersion, Base: p.Base, Head: head, Summary: Summary(p), Overlays: make([]jsonOverlay, 0, len(p.Overlays)), Images: []jsonImage{}, Ignored: p.Ignored, Hidden: p.Hidden, NoLongerPlanned: p.NoLongerPlanned, NotPlanned: p.NotPlanned, Unread: p.Unread, Settings: p.Settings}
	for _, ic := range images(p) {
		j := jsonImage{Old: ic.Old, New: ic.New}
		for _, m := range ic.Objects {
			j.Objects = append(j.Objects, jsonObject{m.overlay, m.key})
		}
		out.Images = append(out.Images, j)
	}
	if w := p.Work; w != nil {
		out.Work = &jsonWork{w.Overlays, w.Skipped, w.Rendered, w.CacheHits, w.Took.Milliseconds(), w.Shards}
	}
	t := p.Totals
	out.Totals = jsonTotals{t.Added, t.Changed, t.Pruned, t.Detached, t.Overlays, t.ChangedOverlays, t.Failed, len(p.IntroducedFailures()), t.Dangerous}
	for i := range p.Overlays {
		o := &p.Overlays[i]
		j := jsonOverlay{
			Path: o.Path, Status: o.Status,
			Base:    jsonSide{Hash: o.BaseHash, Error: o.BaseErr, Inventory: o.BaseInventory},
			Head:    jsonSide{Hash: o.HeadHash, Error: o.HeadErr, Inventory: o.HeadInventory},
			Targets: o.Targets, MovedFrom: o.MovedFrom, SharedWith: o.SharedWith,
			Added: nonNil(o.Added), Pruned: nonNil(o.Pruned), Detached: nonNil(o.Detached),
			Changed: []string{}, Replaced: []jsonReplacement{},
			Unchanged: o.Unchanged, Dangerous: []string{}, DangerousFindings: []danger.Finding{},
			Error:     overlayError(o),
			AddedYAML: o.AddedYAML,
			File:      o.File, Notes: o.Notes,
			Digest: o.HeadDigest, Skipped: o.Skipped, Kubernetes: o.Kubernetes,
		}
		for _, f := range o.Dangerous {
			j.Dangerous = append(j.Dangerous, f.String())
			j.DangerousFindings = append(j.DangerousFindings, f)
		}
		if msg, introduced := o.Problem(); msg != "" {
			j.Failure = "existing"
			if introduced {
				j.Failure = "introduced"
			}
		}
		for _, c := range o.Changed {
			if c.Replaced() {
				j.Replaced = append(j.Replaced, jsonReplacement{Base: c.BaseKey, Head: c.Key})
			} else {
				j.Changed = append(j.Changed, c.Key)
			}
			if len(c.Fields) > 0 {
				if j.Fields == nil {
					j.Fields = map[string][]jsonField{}
				}
				for _, f := range c.Fields {
					j.Fields[c.Key] = append(j.Fields[c.Key], fieldJSON(f))
				}
			}
		}
		if opts.unified() {
			j.Unified = map[string]string{}
			for _, d := range unifiedDiffs(o) {
				j.Unified[d.key] = d.diff
			}
		}
		out.Overlays = append(out.Overlays, j)
	}
	return json.MarshalIndent(out, "", "  ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Reviewed is what the plan comment records, hidden, for the webhook to
// compare the merge's apply with: the commits and each rendered overlay's
// head digest.
func Reviewed(p *inventorydiff.Plan) markers.Reviewed {
	r := markers.Reviewed{Base: p.Base, Head: p.Head, Digests: map[string]string{}, Settings: p.Settings}
	for _, o := range p.Overlays {
		switch {
		case o.HeadDigest != "":
			r.Digests[o.Path] = o.HeadDigest
		case o.Skipped:
			r.Skipped = append(r.Skipped, o.Path)
		}
	}
	slices.Sort(r.Skipped)
	return r
}
