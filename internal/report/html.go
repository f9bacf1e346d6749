package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// The HTML report is one self-contained page for a reviewer to browse a
// large plan: every target with its objects and field changes, filters
// by target, kind, change type and danger (checkboxes and CSS :has, no
// script: it reads and filters with JavaScript off), the noise the
// ignore rules hid behind its count, images and dangers first. It loads
// nothing: no script, stylesheet, font or image from anywhere. Secret
// values never appear: it shows the masked field changes and YAML the
// other formats show.
//
//go:embed templates/report.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("report").Parse(htmlSource))

// writeHTML prints the plan as one HTML page.
func writeHTML(w io.Writer, p *inventorydiff.Plan, opts Options) error {
	if err := htmlTemplate.Execute(w, newHTMLPage(p, opts)); err != nil {
		return fmt.Errorf("write the HTML report: %w", err)
	}
	return nil
}

// htmlPage is what the template shows.
type htmlPage struct {
	Summary, Commits string
	Dangerous        int
	Gate             string
	Broken           int
	Running          []string
	Dangers          []htmlDanger
	Images           []htmlImage
	Notes            []string
	Ignored          []string
	Kinds            []htmlOption
	Changes          []htmlOption
	Targets          []*htmlTarget
	Unchanged        int
	Footer           string
	// CSS are the filter rules for this plan's kinds and targets.
	CSS template.CSS
}

type htmlDanger struct{ Target, ID, Reason, Rule string }

type htmlImage struct {
	Change  string
	Objects []string
}

// htmlOption is one checkbox or radio of the filters.
type htmlOption struct {
	ID, Name string
	Count    int
}

type htmlTarget struct {
	ID, Title, Counts string
	Classes           string
	Failure           string
	Introduced        bool // the failure is this change's
	Errors            []string
	Dangers           []string
	Lines             []string
	Objects           []*htmlObject
	Ignored           []*htmlObject
	IgnoredFields     int
}

type htmlObject struct {
	Change, Sign, Name string
	Kind, Classes      string
	Fields             []htmlField
	// YAML is an added or pruned object's YAML; Unified its unified diff
	// (the unified style).
	YAML, Unified string
}

type htmlField struct {
	Class, Header string
	Lines         []htmlLine
}

type htmlLine struct{ Class, Text string }

func plain(s string) string { return s }

// newHTMLPage gathers what the page shows, in the order a reviewer reads
// it: what is dangerous or broken, the images, then the targets.
func newHTMLPage(p *inventorydiff.Plan, opts Options) *htmlPage {
	pg := &htmlPage{Summary: Summary(p), Commits: commits(p), Dangerous: p.Totals.Dangerous,
		Gate: opts.DangerGate.sentence(), Broken: len(p.IntroducedFailures()), Footer: footer(p)}
	for _, r := range opts.Running {
		pg.Running = append(pg.Running, capital(r.sentence(plain)))
	}
	for _, ic := range images(p) {
		change := "new " + ic.New
		switch {
		case ic.New == "":
			change = "removed " + ic.Old
		case ic.Old != "":
			change = ic.Old + " → " + ic.New
		}
		var objs []string
		for _, m := range ic.Objects {
			objs = append(objs, m.overlay+": "+inventorydiff.Name(m.key))
		}
		pg.Images = append(pg.Images, htmlImage{change, objs})
	}
	if s := noLongerPlanned(p, plain); s != "" {
		pg.Notes = append(pg.Notes, s)
	}
	pg.Notes = append(pg.Notes, notPlanned(p, plain)...)
	for _, u := range p.Unread {
		s := "No overlay reads the changed file " + u.Path + ": this plan cannot show what it changes"
		if u.Hint != "" {
			s += " (" + u.Hint + ")"
		}
		pg.Notes = append(pg.Notes, s)
	}
	if s := chartsLine(p, plain); s != "" {
		pg.Notes = append(pg.Notes, s)
	}
	if s := hiddenByDefault(p, plain, "shown with default-ignore: false (Action), ignore: {defaults: false} (.kplan.yaml) or --no-default-ignore"); s != "" {
		pg.Ignored = append(pg.Ignored, s)
	}
	for _, r := range shownRules(p) {
		src := ""
		if r.Source != "" {
			src = " (" + r.Source + ")"
		}
		pg.Ignored = append(pg.Ignored, r.Rule+src+": "+ignoredText(r))
	}
	kinds := map[string]int{}
	changes := map[string]int{}
	var first, last []*htmlTarget
	for i := range p.Overlays {
		o := &p.Overlays[i]
		if !reported(o) {
			pg.Unchanged++
			continue
		}
		t := newHTMLTarget(o, fmt.Sprintf("t%d", i), opts)
		for _, f := range o.Dangerous {
			pg.Dangers = append(pg.Dangers, htmlDanger{Target: title(o), ID: t.ID, Reason: f.Reason, Rule: string(f.Rule)})
		}
		for _, obj := range t.Objects {
			changes[obj.Change]++
			kinds[obj.Kind]++
		}
		for _, obj := range t.Ignored {
			kinds[obj.Kind] += 0 // its kind can be filtered too
		}
		switch msg, introduced := o.Problem(); {
		case len(o.Dangerous) > 0 || (msg != "" && introduced):
			first = append(first, t)
		case msg != "" && o.Status == inventorydiff.Failed:
			last = append(last, t) // failing on base too: not this change's
		default:
			pg.Targets = append(pg.Targets, t)
		}
	}
	pg.Targets = slices.Concat(first, pg.Targets, last)
	for _, c := range []string{"added", "changed", "pruned", "detached"} {
		if changes[c] > 0 {
			pg.Changes = append(pg.Changes, htmlOption{ID: "c-" + c, Name: c, Count: changes[c]})
		}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		pg.Kinds = append(pg.Kinds, htmlOption{ID: fmt.Sprintf("k%d", i), Name: k, Count: kinds[k]})
	}
	kindID := map[string]string{}
	for _, k := range pg.Kinds {
		kindID[k.Name] = k.ID
	}
	for _, t := range pg.Targets {
		for _, obj := range slices.Concat(t.Objects, t.Ignored) {
			obj.Classes = "obj c-" + obj.Change + " " + kindID[obj.Kind]
		}
	}
	pg.CSS = filterCSS(pg)
	return pg
}

// filterCSS hides what the filters leave out: an unticked change type
// or kind hides its objects, a chosen target the other targets, "only
// dangerous" the targets with no finding.
func filterCSS(pg *htmlPage) template.CSS {
	var b strings.Builder
	for _, o := range slices.Concat(pg.Changes, pg.Kinds) {
		fmt.Fprintf(&b, "body:has(#%s:not(:checked)) .obj.%s{display:none}\n", o.ID, o.ID)
	}
	for _, t := range pg.Targets {
		fmt.Fprintf(&b, "body:has(#f-%s:checked) .target:not(#%s){display:none}\n", t.ID, t.ID)
	}
	return template.CSS(b.String())
}

func newHTMLTarget(o *inventorydiff.Overlay, id string, opts Options) *htmlTarget {
	t := &htmlTarget{ID: id, Title: title(o), Counts: overlayCounts(o), Failure: failureLine(o)}
	classes := []string{"target"}
	if len(o.Dangerous) > 0 {
		classes = append(classes, "dangerous")
	}
	switch o.Status {
	case inventorydiff.New:
		t.Counts = "new overlay, " + t.Counts
	case inventorydiff.Removed:
		t.Counts = "overlay removed, " + t.Counts
	case inventorydiff.Moved:
		t.Counts = "moved from " + o.MovedFrom + ", " + t.Counts
	case inventorydiff.Failed:
		t.Counts = "failed to render"
	}
	if _, introduced := o.Problem(); introduced && t.Failure != "" {
		t.Introduced = true
		classes = append(classes, "failed")
	}
	t.Classes = strings.Join(classes, " ")
	if o.BaseErr != "" {
		t.Errors = append(t.Errors, "On base: "+o.BaseErr)
	}
	if msg, _ := o.Problem(); msg != "" {
		t.Errors = append(t.Errors, "On head: "+msg)
	}
	for _, f := range o.Dangerous {
		t.Dangers = append(t.Dangers, f.String())
	}
	for _, s := range []string{inventoryChange(o), chartsOf(o)} {
		if s != "" {
			t.Lines = append(t.Lines, s)
		}
	}
	t.Lines = append(t.Lines, o.Notes...)
	unified := map[string]string{}
	if opts.unified() {
		for _, d := range unifiedDiffs(o) {
			unified[d.key] = d.diff
		}
	}
	for _, k := range o.Added {
		t.Objects = append(t.Objects, &htmlObject{Change: "added", Sign: "+", Name: inventorydiff.Name(k), Kind: inventorydiff.Kind(k), YAML: o.AddedYAML[k], Unified: unified[k]})
	}
	for _, c := range o.Changed {
		obj := &htmlObject{Change: "changed", Sign: "~", Name: changeName(c), Kind: inventorydiff.Kind(c.Key), Fields: htmlFields(c.Fields), Unified: unified[c.Key]}
		t.Objects = append(t.Objects, obj)
	}
	for _, k := range o.Pruned {
		t.Objects = append(t.Objects, &htmlObject{Change: "pruned", Sign: "-", Name: inventorydiff.Name(k), Kind: inventorydiff.Kind(k), YAML: o.PrunedYAML[k], Unified: unified[k]})
	}
	for _, k := range o.Detached {
		t.Objects = append(t.Objects, &htmlObject{Change: "detached", Sign: " ", Name: inventorydiff.Name(k) + ": left in the cluster (not pruned)", Kind: inventorydiff.Kind(k)})
	}
	for _, c := range o.Ignored {
		t.IgnoredFields += len(c.Fields)
		t.Ignored = append(t.Ignored, &htmlObject{Change: "changed", Sign: "~", Name: changeName(c), Kind: inventorydiff.Kind(c.Key), Fields: htmlFields(c.Fields)})
	}
	return t
}

// htmlFields are field changes as their one-line headers (a Secret's
// value masked) and the line diffs of multi-line values.
func htmlFields(fields []inventorydiff.FieldChange) []htmlField {
	out := make([]htmlField, 0, len(fields))
	for _, f := range fields {
		hf := htmlField{Class: map[string]string{"+": "add", "-": "del"}[f.Op], Header: f.Header()}
		hf.Class = cmp.Or(hf.Class, "mod")
		for _, l := range f.DiffLines() {
			hf.Lines = append(hf.Lines, htmlLine{Class: map[byte]string{'+': "add", '-': "del"}[l[0]], Text: l})
		}
		out = append(out, hf)
	}
	return out
}
