package main

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// result is one commit of one case.
type result struct {
	Case, Commit, Path, Cluster string
	Error                       string `json:",omitempty"`
	Logs                        string
	// State is each Flux object's Ready condition when the controllers
	// settled.
	State string
	// CreatedNamespaces are namespaces no target creates, which the
	// controllers failed to apply into (FirstState); the harness created
	// them and let the controllers try again (State).
	CreatedNamespaces []string `json:",omitempty"`
	FirstState        string   `json:",omitempty"`
	// CreatedCRDs ("group/version/Kind") are custom kinds whose CRDs the
	// cluster lacked (a chart installs them), created accepting any
	// object for a second try.
	CreatedCRDs []string               `json:",omitempty"`
	Plan        map[string]*planTarget `json:"-"`
	// All compares every object of the cluster, whichever target.
	All     targetResult
	Targets []targetResult
}

// targetResult compares one target: the Kustomization ns/name.
type targetResult struct {
	Target string
	// Agree: same objects, and every field kplan planned is what the
	// apiserver holds.
	Agree bool
	// OnlyPlanned: planned by kplan, not applied by the controllers.
	OnlyPlanned []string `json:",omitempty"`
	// OnlyApplied: applied by the controllers, not planned by kplan.
	OnlyApplied []string `json:",omitempty"`
	// Fields: planned fields whose applied value differs (or is absent).
	Fields     []string `json:",omitempty"`
	PlanError  string   `json:",omitempty"`
	PlanNotes  []string `json:",omitempty"`
	FluxStatus string   `json:",omitempty"`
}

// compare fills r.Targets from the plan and what the controllers applied.
func (r *result) compare(applied map[string]map[string]map[string]any) {
	names := map[string]bool{}
	for n := range r.Plan {
		names[n] = true
	}
	for n := range applied {
		names[n] = true
	}
	allPlanned, allApplied := map[string]map[string]any{}, map[string]map[string]any{}
	for _, p := range r.Plan {
		for k, o := range p.Objects {
			allPlanned[k] = o
		}
	}
	for _, a := range applied {
		for k, o := range a {
			allApplied[k] = o
		}
	}
	r.All = r.compareTarget("(all targets)", allPlanned, allApplied)
	for _, n := range sortedKeys(names) {
		planned := map[string]map[string]any{}
		if p := r.Plan[n]; p != nil {
			planned = p.Objects
		}
		t := r.compareTarget(n, planned, applied[n])
		if p := r.Plan[n]; p != nil {
			t.PlanError, t.PlanNotes = p.Error, p.Notes
		}
		r.Targets = append(r.Targets, t)
	}
}

// compareTarget compares one target's planned and applied objects.
func (r *result) compareTarget(n string, planned, live map[string]map[string]any) targetResult {
	t := targetResult{Target: n, FluxStatus: r.fluxStatus(n)}
	for _, k := range sortedKeys(planned) {
		l, ok := live[k]
		if !ok {
			t.OnlyPlanned = append(t.OnlyPlanned, k)
			continue
		}
		for _, d := range subset(planned[k], l, "", strings.HasPrefix(k, "/Secret ")) {
			t.Fields = append(t.Fields, k+": "+d)
		}
	}
	for _, k := range sortedKeys(live) {
		if _, ok := planned[k]; !ok {
			t.OnlyApplied = append(t.OnlyApplied, k)
		}
	}
	t.Agree = len(t.OnlyPlanned)+len(t.OnlyApplied)+len(t.Fields) == 0
	return t
}

// fluxStatus is the Ready line of the Kustomization ns/name.
func (r *result) fluxStatus(target string) string {
	for _, l := range strings.Split(r.State, "\n") {
		if strings.HasPrefix(l, "Kustomization "+target+" ") {
			return strings.TrimPrefix(l, "Kustomization "+target+" ")
		}
	}
	return ""
}

// subset lists where want (planned) is not contained in got (applied):
// fields the apiserver or a controller added (defaults, clusterIP) are
// not differences, a planned field absent or different is. A Secret's
// data is masked in the plan and not compared.
func subset(want, got any, path string, secret bool) []string {
	if secret && (path == ".data" || path == ".stringData") {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: planned a map, applied %s", path, short(got))}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			if secret && path == "" && (k == "data" || k == "stringData") {
				continue // masked in the plan
			}
			if path == "" && k == "apiVersion" {
				continue // read back at the apiserver's preferred version
			}
			gv, ok := g[k]
			if !ok {
				if w[k] == nil || isEmpty(w[k]) {
					continue // an empty planned field the apiserver drops
				}
				out = append(out, fmt.Sprintf("%s.%s: planned %s, not applied", path, k, short(w[k])))
				continue
			}
			out = append(out, subset(w[k], gv, path+"."+k, secret)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: planned %s, applied %s", path, short(want), short(got))}
		}
		var out []string
		for i := range w {
			out = append(out, subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i), secret)...)
		}
		return out
	default:
		if reflect.DeepEqual(want, got) || fmt.Sprint(want) == fmt.Sprint(got) {
			return nil
		}
		return []string{fmt.Sprintf("%s: planned %s, applied %s", path, short(want), short(got))}
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

func short(v any) string {
	b, err := sigsyaml.Marshal(v)
	s := strings.TrimSpace(string(b))
	if err != nil {
		s = fmt.Sprint(v)
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func parseObject(text string) (map[string]any, error) {
	var m map[string]any
	if err := sigsyaml.Unmarshal([]byte(text), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// printResult writes r for a reader of the terminal.
func printResult(w io.Writer, r result) {
	fmt.Fprintf(w, "== %s %s (%s, cluster %s)\n", r.Case, r.Commit, r.Path, r.Cluster)
	if r.Error != "" {
		fmt.Fprintf(w, "   error: %s\n", r.Error)
	}
	if len(r.CreatedNamespaces) > 0 {
		fmt.Fprintf(w, "   namespaces no target creates, created for a second try: %s\n", strings.Join(r.CreatedNamespaces, ", "))
	}
	if len(r.CreatedCRDs) > 0 {
		fmt.Fprintf(w, "   CRDs the cluster lacked, created accepting any object: %s\n", strings.Join(r.CreatedCRDs, ", "))
	}
	sort.Slice(r.Targets, func(i, j int) bool { return r.Targets[i].Target < r.Targets[j].Target })
	for _, t := range append([]targetResult{r.All}, r.Targets...) {
		verdict := "agree"
		if !t.Agree {
			verdict = "DISAGREE"
		}
		fmt.Fprintf(w, "   %-40s %s  [flux: %s]\n", t.Target, verdict, t.FluxStatus)
		if t.PlanError != "" {
			fmt.Fprintf(w, "      kplan error: %s\n", t.PlanError)
		}
		for _, k := range t.OnlyPlanned {
			fmt.Fprintf(w, "      only planned: %s\n", k)
		}
		for _, k := range t.OnlyApplied {
			fmt.Fprintf(w, "      only applied: %s\n", k)
		}
		for _, f := range t.Fields {
			fmt.Fprintf(w, "      field: %s\n", f)
		}
	}
}
