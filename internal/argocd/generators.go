package argocd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// Cluster is a cluster Argo CD deploys to, as .kplan.yaml declares it
// (argocdClusters): what a cluster generator reads from Argo CD's
// cluster Secrets.
type Cluster struct {
	Name, Server        string
	Labels, Annotations map[string]string
	// Project is the cluster Secret's project (a cluster scoped to one
	// Argo CD project), "" for none.
	Project string
}

// inClusterServer is the server of Argo CD's own cluster, which it lists
// without a Secret unless one names that server.
const inClusterServer = "https://kubernetes.default.svc"

// secretTypeLabel is on every cluster Secret of Argo CD, so among the
// labels a cluster generator matches and passes on.
const secretTypeLabel = "argocd.argoproj.io/secret-type"

// genCtx carries one ApplicationSet's settings through its generators.
type genCtx struct {
	e         *Engine
	ctx       context.Context
	s         *snapshot.Snapshot
	spec      appSetSpec
	templates *templates
}

// paramSet is one set of a generator's parameters, with the repository
// files it was made from.
type paramSet struct {
	p      map[string]any
	inputs []string
}

// maxParamSets bounds what one generator may make (a matrix multiplies):
// more is a mistake, not a repository.
const maxParamSets = 10000

type listGenerator struct {
	Elements     []map[string]any `json:"elements"`
	ElementsYaml string           `json:"elementsYaml"`
	Template     map[string]any   `json:"template"`
}

type gitItem struct {
	Path    string `json:"path"`
	Exclude bool   `json:"exclude"`
}

type gitGenerator struct {
	RequeueAfterSeconds any               `json:"requeueAfterSeconds"` // when Argo CD looks again
	RepoURL             string            `json:"repoURL"`
	Revision            string            `json:"revision"`
	Directories         []gitItem         `json:"directories"`
	Files               []gitItem         `json:"files"`
	PathParamPrefix     string            `json:"pathParamPrefix"`
	Values              map[string]string `json:"values"`
	Template            map[string]any    `json:"template"`
}

type clusterGenerator struct {
	Selector *labelSelector    `json:"selector"`
	Values   map[string]string `json:"values"`
	Template map[string]any    `json:"template"`
}

type combiner struct {
	Generators []map[string]any `json:"generators"`
	MergeKeys  []string         `json:"mergeKeys"`
	Template   map[string]any   `json:"template"`
}

// convertStrict is convert refusing the fields out does not have: a generator's
// setting kplan does not know is not evaluated, never ignored.
func convertStrict(v, out any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%v (kplan evaluates the settings Argo CD documents for it)", err)
	}
	return nil
}

// params evaluates one generator (gen, named where in errors): its
// parameter sets after its selector, and its template. outer are the
// parameters a matrix's first generator made, which the second's spec
// may use; depth is how deep in matrix/merge generators it is.
func (g *genCtx) params(gen map[string]any, where string, outer *paramSet, depth int) ([]paramSet, map[string]any, error) {
	var kinds []string
	for k := range gen {
		if k != "selector" {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	if len(kinds) != 1 {
		return nil, nil, fmt.Errorf("%s: one generator per entry, found %q", where, kinds)
	}
	kind := kinds[0]
	spec := gen[kind]
	if outer != nil && len(outer.p) > 0 {
		// A matrix's second generator may use the first's parameters
		// anywhere in its spec.
		filled, err := fill(g.templates, spec, outer.p, g.spec.GoTemplate, g.spec.GoTemplateOptions)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: the first generator's parameters in it: %v", where, err)
		}
		spec = filled
	}
	sets, tmpl, err := g.generate(kind, spec, where, depth)
	if err != nil {
		return nil, nil, err
	}
	if outer != nil {
		for i := range sets {
			// What the first generator's parameters came from chose
			// these too.
			sets[i].inputs = union(sets[i].inputs, outer.inputs)
		}
	}
	if sets, err = g.selected(gen["selector"], sets, where, depth); err != nil {
		return nil, nil, err
	}
	if len(sets) > maxParamSets {
		return nil, nil, fmt.Errorf("%s makes more than %d parameter sets", where, maxParamSets)
	}
	return sets, tmpl, nil
}

// generate evaluates a generator of kind from its spec: its parameter
// sets, before its selector, and its template.
func (g *genCtx) generate(kind string, spec any, where string, depth int) ([]paramSet, map[string]any, error) {
	var sets []paramSet
	var tmpl map[string]any
	var err error
	switch kind {
	case "list":
		var l listGenerator
		if err := convertStrict(spec, &l); err != nil {
			return nil, nil, fmt.Errorf("%s.list: %v", where, err)
		}
		tmpl = l.Template
		sets, err = g.list(l)
	case "git":
		var gg gitGenerator
		if err := convertStrict(spec, &gg); err != nil {
			return nil, nil, fmt.Errorf("%s.git: %v", where, err)
		}
		tmpl = gg.Template
		sets, err = g.git(gg)
	case "clusters":
		var c clusterGenerator
		if err := convertStrict(spec, &c); err != nil {
			return nil, nil, fmt.Errorf("%s.clusters: %v", where, err)
		}
		tmpl = c.Template
		sets, err = g.clusters(c)
	case "matrix", "merge":
		return g.combine(kind, spec, where, depth)
	default:
		why := map[string]string{
			"scmProvider":             "it lists a forge's repositories at run time",
			"pullRequest":             "it lists a forge's pull requests at run time",
			"plugin":                  "it calls a plugin service at run time",
			"clusterDecisionResource": "it reads a resource in the cluster",
		}[kind]
		return nil, nil, fmt.Errorf("%s: the %s generator is not evaluated (%s)", where, kind, cmp.Or(why, "kplan does not know it"))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s.%s: %v", where, kind, err)
	}
	return sets, tmpl, nil
}

// combine evaluates a matrix or merge generator (kind) from its spec.
func (g *genCtx) combine(kind string, spec any, where string, depth int) ([]paramSet, map[string]any, error) {
	if depth >= 2 {
		return nil, nil, fmt.Errorf("%s: a %s generator inside a generator inside a matrix or merge (Argo CD nests them one level)", where, kind)
	}
	var c combiner
	if err := convertStrict(spec, &c); err != nil {
		return nil, nil, fmt.Errorf("%s.%s: %v", where, kind, err)
	}
	if kind == "matrix" && c.MergeKeys != nil {
		return nil, nil, fmt.Errorf("%s.matrix: mergeKeys is a merge generator's", where)
	}
	var sets []paramSet
	var err error
	if kind == "matrix" {
		sets, err = g.matrix(c, where+".matrix", depth)
	} else {
		sets, err = g.merge(c, where+".merge", depth)
	}
	if err != nil {
		return nil, nil, err // named where it failed
	}
	return sets, c.Template, nil
}

// selected are the sets a generator's selector (sel, nil: none) keeps;
// below a matrix or merge only with applyNestedSelectors.
func (g *genCtx) selected(sel any, sets []paramSet, where string, depth int) ([]paramSet, error) {
	if sel == nil || (depth >= 2 && !g.spec.ApplyNestedSelectors) {
		return sets, nil
	}
	var ls labelSelector
	if err := convert(sel, &ls); err != nil {
		return nil, fmt.Errorf("%s.selector: %v", where, err)
	}
	kept := sets[:0]
	for _, ps := range sets {
		ok, err := ls.matches(flattenParams(ps.p))
		if err != nil {
			return nil, fmt.Errorf("%s.selector: %v", where, err)
		}
		if ok {
			kept = append(kept, ps)
		}
	}
	return kept, nil
}

// list is a list generator's elements, then its elementsYaml's. With the
// default syntax an element's values are strings, and its values map
// becomes values.<key> parameters.
func (g *genCtx) list(l listGenerator) ([]paramSet, error) {
	var out []paramSet
	for i, el := range l.Elements {
		if g.spec.GoTemplate {
			out = append(out, paramSet{p: el})
			continue
		}
		p := map[string]any{}
		for k, v := range el {
			if k == "values" {
				vm, ok := v.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("elements[%d].values: not a map", i)
				}
				for vk, vv := range vm {
					s, ok := vv.(string)
					if !ok {
						return nil, fmt.Errorf("elements[%d].values.%s: not a string (the default syntax takes strings)", i, vk)
					}
					p["values."+vk] = s
				}
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("elements[%d].%s: not a string (the default syntax takes strings; set goTemplate: true for others)", i, k)
			}
			p[k] = s
		}
		out = append(out, paramSet{p: p})
	}
	if l.ElementsYaml != "" {
		var els []map[string]any
		if err := sigsyaml.Unmarshal([]byte(l.ElementsYaml), &els); err != nil {
			return nil, fmt.Errorf("elementsYaml: not a YAML list of maps: %v", err)
		}
		for _, el := range els {
			out = append(out, paramSet{p: el})
		}
	}
	return out, nil
}

// git is a git generator's directories or, without, its files.
func (g *genCtx) git(gg gitGenerator) ([]paramSet, error) {
	if !g.e.opts.Repos.Has(gg.RepoURL) {
		return nil, fmt.Errorf("reads %s, another repository", gg.RepoURL)
	}
	if !g.e.tracks(gg.Revision) {
		return nil, fmt.Errorf("tracks another revision (%s)", gg.Revision)
	}
	var out []paramSet
	switch {
	case len(gg.Directories) > 0:
		for _, d := range dirsMatching(g.s, gg.Directories) {
			p := pathParams(gg.PathParamPrefix, d, "", g.spec.GoTemplate)
			if err := g.appendValues(p, gg.Values); err != nil {
				return nil, err
			}
			out = append(out, paramSet{p: p})
		}
	case len(gg.Files) > 0:
		files := filesMatching(g.s, gg.Files, g.e.opts.NewGitFileGlobbing)
		if err := g.s.Load(g.ctx, files); err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := g.s.ReadFile(g.ctx, f)
			if err != nil {
				return nil, err
			}
			objs, err := parseGitFile(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			for _, obj := range objs {
				p := map[string]any{}
				if g.spec.GoTemplate {
					maps.Copy(p, obj)
				} else {
					maps.Copy(p, toAny(flattenParams(obj)))
				}
				maps.Copy(p, pathParams(gg.PathParamPrefix, path.Dir(f), f, g.spec.GoTemplate))
				if err := g.appendValues(p, gg.Values); err != nil {
					return nil, err
				}
				out = append(out, paramSet{p: p, inputs: []string{f}})
			}
		}
	default:
		return nil, fmt.Errorf("neither directories nor files")
	}
	return out, nil
}

// parseGitFile reads a git files generator's file: one YAML or JSON
// object (an empty file is one empty object), or a list of them, each
// one parameter set.
func parseGitFile(data []byte) ([]map[string]any, error) {
	one := map[string]any{}
	if err := sigsyaml.Unmarshal(data, &one); err == nil {
		return []map[string]any{one}, nil
	}
	var many []map[string]any
	if err := sigsyaml.Unmarshal(data, &many); err != nil {
		return nil, fmt.Errorf("neither a YAML/JSON object nor a list of objects: %v", err)
	}
	return many, nil
}

// appendValues adds a generator's values, each templated with p, as
// values.<key> (default syntax) or the values map (Go templates).
func (g *genCtx) appendValues(p map[string]any, values map[string]string) error {
	if len(values) == 0 {
		return nil
	}
	out := map[string]any{}
	for k, v := range values {
		r, err := fill(g.templates, v, p, g.spec.GoTemplate, g.spec.GoTemplateOptions)
		if err != nil {
			return fmt.Errorf("values.%s: %v", k, err)
		}
		out[k] = r
	}
	if g.spec.GoTemplate {
		p["values"] = out
		return nil
	}
	for k, v := range out {
		p["values."+k] = v
	}
	return nil
}

// clusters are the clusters .kplan.yaml declares, each a cluster Secret
// of Argo CD (labels, annotations), and Argo CD's own cluster unless one
// of them has its server: the latter has no labels, so a selector leaves
// it out.
func (g *genCtx) clusters(c clusterGenerator) ([]paramSet, error) {
	o := g.e.opts
	if o.ClustersFile == "" {
		return nil, fmt.Errorf("the clusters generator reads Argo CD's clusters, which are not in git: declare them in .kplan.yaml argocdClusters (name, server, labels, annotations)")
	}
	in := []string{o.ClustersFile}
	selecting := c.Selector != nil && (len(c.Selector.MatchLabels) > 0 || len(c.Selector.MatchExpressions) > 0)
	var out []paramSet
	for _, cl := range o.Clusters {
		labels := map[string]string{secretTypeLabel: "cluster"}
		maps.Copy(labels, cl.Labels)
		if selecting {
			ok, err := c.Selector.matches(labels)
			if err != nil {
				return nil, fmt.Errorf("selector: %v", err)
			}
			if !ok {
				continue
			}
		}
		// The parameters of a cluster Secret, project among them
		// (getClusterParameters, applicationset/generators/cluster.go:
		// 128-160 at argo-cd 37ee0097cf).
		p := map[string]any{"name": cl.Name, "nameNormalized": sanitizeName(cl.Name), "server": strings.TrimRight(cl.Server, "/"), "project": cl.Project}
		if g.spec.GoTemplate {
			md := map[string]any{"labels": toAny(labels)}
			if len(cl.Annotations) > 0 {
				md["annotations"] = toAny(cl.Annotations)
			}
			p["metadata"] = md
		} else {
			for k, v := range cl.Annotations {
				p["metadata.annotations."+k] = v
			}
			for k, v := range labels {
				p["metadata.labels."+k] = v
			}
		}
		if err := g.appendValues(p, c.Values); err != nil {
			return nil, err
		}
		out = append(out, paramSet{p: p, inputs: in})
	}
	// Argo CD's own cluster, last, unless a Secret names its server or a
	// selector is set (cluster.go:90-104).
	if !slices.ContainsFunc(o.Clusters, func(cl Cluster) bool { return strings.TrimRight(cl.Server, "/") == inClusterServer }) && !selecting {
		p := map[string]any{"name": "in-cluster", "nameNormalized": "in-cluster", "server": inClusterServer, "project": ""}
		if err := g.appendValues(p, c.Values); err != nil {
			return nil, err
		}
		out = append(out, paramSet{p: p, inputs: in})
	}
	return out, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// matrix is every combination of its two generators' parameter sets,
// the second evaluated for each of the first's (it may use them).
func (g *genCtx) matrix(c combiner, where string, depth int) ([]paramSet, error) {
	if len(c.Generators) != 2 {
		return nil, fmt.Errorf("%s: has %d generators; a matrix combines two", where, len(c.Generators))
	}
	first, _, err := g.params(c.Generators[0], where+".generators[0]", nil, depth+1)
	if err != nil {
		return nil, err
	}
	var out []paramSet
	for _, a := range first {
		second, _, err := g.params(c.Generators[1], where+".generators[1]", &a, depth+1)
		if err != nil {
			return nil, err
		}
		for _, b := range second {
			var p map[string]any
			if g.spec.GoTemplate {
				p = mergeParams(b.p, a.p) // the first's win
			} else {
				p = map[string]any{}
				maps.Copy(p, a.p)
				for k, v := range b.p {
					if cur, ok := p[k]; ok && fmt.Sprint(cur) != fmt.Sprint(v) {
						return nil, fmt.Errorf("%s: both generators set %s, to %q and %q", where, k, fmt.Sprint(cur), fmt.Sprint(v))
					}
					p[k] = v
				}
			}
			out = append(out, paramSet{p: p, inputs: union(a.inputs, b.inputs)})
			if len(out) > maxParamSets {
				return nil, fmt.Errorf("%s: makes more than %d parameter sets", where, maxParamSets)
			}
		}
	}
	return out, nil
}

// merge is its first generator's parameter sets, each with the
// parameters of the later generators' sets that have the same mergeKeys
// values over it.
func (g *genCtx) merge(c combiner, where string, depth int) ([]paramSet, error) {
	if len(c.Generators) < 2 {
		return nil, fmt.Errorf("%s: has %d generators; a merge needs two or more", where, len(c.Generators))
	}
	if len(c.MergeKeys) == 0 {
		return nil, fmt.Errorf("%s: no mergeKeys", where)
	}
	var base map[string]paramSet
	for i, gen := range c.Generators {
		sets, _, err := g.params(gen, fmt.Sprintf("%s.generators[%d]", where, i), nil, depth+1)
		if err != nil {
			return nil, err
		}
		byKey := map[string]paramSet{}
		for _, ps := range sets {
			key := map[string]any{}
			for _, k := range c.MergeKeys {
				key[k] = ps.p[k]
			}
			data, err := json.Marshal(key)
			if err != nil {
				return nil, err
			}
			if _, dup := byKey[string(data)]; dup {
				return nil, fmt.Errorf("%s.generators[%d] makes two parameter sets with mergeKeys %s; each must be unique", where, i, data)
			}
			byKey[string(data)] = ps
		}
		if i == 0 {
			base = byKey
			continue
		}
		for k, b := range base {
			o, ok := byKey[k]
			if !ok {
				continue
			}
			var p map[string]any
			if g.spec.GoTemplate {
				p = mergeParams(b.p, o.p)
			} else {
				p = map[string]any{}
				maps.Copy(p, b.p)
				maps.Copy(p, o.p)
			}
			base[k] = paramSet{p: p, inputs: union(b.inputs, o.inputs)}
		}
	}
	out := make([]paramSet, 0, len(base))
	for _, k := range slices.Sorted(maps.Keys(base)) {
		out = append(out, base[k])
	}
	return out, nil
}

// mergeParams is a with b's fields over it, maps merged key by key; an
// empty value of b does not replace one of a (as the mergo merges of the
// controller uses): parameter sets of a matrix or merge, templates.
func mergeParams(a, b map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, a)
	for k, v := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := v.(map[string]any)
		switch {
		case aok && bok:
			out[k] = mergeParams(am, bm)
		case empty(v):
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		default:
			out[k] = v
		}
	}
	return out
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	}
	return false
}

func union(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// flattenParams are params as labels: nested maps and lists flattened
// with dots (a.b, a.0), values printed, as the controller flattens a
// file's content for the default syntax and parameters for a selector.
func flattenParams(in map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		key := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(key(k), e)
			}
		case []any:
			for i, e := range x {
				walk(key(strconv.Itoa(i)), e)
			}
		default:
			out[prefix] = fmt.Sprintf("%v", x)
		}
	}
	for k, v := range in {
		walk(k, v)
	}
	return out
}

// labelSelector is a Kubernetes label selector, without limits on the
// values (the controller matches URLs).
type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	} `json:"matchExpressions"`
}

func (ls *labelSelector) matches(labels map[string]string) (bool, error) {
	for k, v := range ls.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false, nil
		}
	}
	for _, e := range ls.MatchExpressions {
		v, has := labels[e.Key]
		var ok bool
		switch e.Operator {
		case "In":
			ok = has && slices.Contains(e.Values, v)
		case "NotIn":
			ok = !has || !slices.Contains(e.Values, v)
		case "Exists":
			ok = has
		case "DoesNotExist":
			ok = !has
		default:
			return false, fmt.Errorf("matchExpressions: operator %q is not In, NotIn, Exists or DoesNotExist", e.Operator)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// dirsMatching are the repository directories a git generator's
// directories select: matching an included pattern, no excluded one.
func dirsMatching(s *snapshot.Snapshot, items []gitItem) []string {
	dirs := map[string]bool{}
	for _, p := range s.Index.Paths() {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var out []string
	for _, d := range sortedKeys(dirs) {
		in, ex := false, false
		for _, r := range items {
			if ok, _ := path.Match(r.Path, d); ok {
				in = in || !r.Exclude
				ex = ex || r.Exclude
			}
		}
		if in && !ex {
			out = append(out, d)
		}
	}
	return out
}

// filesMatching are the repository files a git files generator reads:
// matching an included pattern, no excluded one, as `git ls-files`
// matches them (Argo CD's default: `*` matches across directories), or
// with newGlobbing as Argo CD's applicationset.enableNewGitFileGlobbing
// does (doublestar: `*` within a directory, `**` across).
func filesMatching(s *snapshot.Snapshot, items []gitItem, newGlobbing bool) []string {
	matchers := make([]func(string) bool, len(items))
	for i, r := range items {
		matchers[i] = pathspecMatcher(r.Path)
		if newGlobbing {
			pattern := strings.TrimPrefix(r.Path, "./")
			matchers[i] = func(file string) bool {
				ok, err := doublestar.Match(pattern, file)
				return ok && err == nil
			}
		}
	}
	var out []string
	for _, p := range s.Index.Paths() {
		in, ex := false, false
		for i, r := range items {
			if matchers[i](p) {
				in = in || !r.Exclude
				ex = ex || r.Exclude
			}
		}
		if in && !ex {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// pathspecMatcher matches files as git's pathspec pattern does: a
// pattern without wildcards names the file or a directory above it;
// with, it is matched as git's wildmatch without WM_PATHNAME: `*` and
// `?` match `/` too, `[...]` a class.
func pathspecMatcher(pattern string) func(file string) bool {
	pattern = strings.TrimPrefix(pattern, "./")
	if !strings.ContainsAny(pattern, "*?[\\") {
		pattern = strings.TrimSuffix(pattern, "/")
		return func(file string) bool { return file == pattern || strings.HasPrefix(file, pattern+"/") }
	}
	re, ok := pathspecRegexp(pattern)
	return func(file string) bool { return ok && re.MatchString(file) }
}

func pathspecRegexp(pattern string) (*regexp.Regexp, bool) {
	var b strings.Builder
	b.WriteString(`^`)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 < len(pattern) {
				i++
				b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			}
		case '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end == 0 && i+2 < len(pattern) {
				// "[]...]": a leading ] is a member.
				end = strings.IndexByte(pattern[i+2:], ']') + 1
			}
			if end <= 0 {
				return nil, false // git's wildmatch matches nothing
			}
			class := pattern[i+1 : i+1+end]
			i += end + 1
			neg := strings.HasPrefix(class, "!") || strings.HasPrefix(class, "^")
			if neg {
				class = class[1:]
			}
			b.WriteString(`[`)
			if neg {
				b.WriteString(`^`)
			}
			for _, r := range class {
				if r == '-' {
					b.WriteRune(r)
					continue
				}
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
			b.WriteString(`]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	return re, err == nil
}

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

var notDNS = regexp.MustCompile(`[^-a-z0-9.]`)

// sanitizeName is the controller's normalization of a name: lower case,
// other characters than letters, digits, '-' and '.' as '-', at most 253
// characters, no leading or trailing '-' or '.'.
func sanitizeName(name string) string {
	name = notDNS.ReplaceAllString(strings.ToLower(name), "-")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.Trim(name, "-.")
}

// pathParams are a git generator's path parameters for directory dir
// (and file, for the files generator): path, path.basename,
// path.basenameNormalized, path[N], path.filename and
// path.filenameNormalized (default syntax), or the path object with
// segments (Go templates); under prefix when pathParamPrefix is set.
func pathParams(prefix, dir, file string, goTemplate bool) map[string]any {
	base := path.Base(dir)
	segs := strings.Split(dir, "/")
	if goTemplate {
		anySegs := make([]any, len(segs))
		for i, sg := range segs {
			anySegs[i] = sg
		}
		pp := map[string]any{"path": dir, "basename": base, "basenameNormalized": sanitizeName(base), "segments": anySegs}
		if file != "" {
			pp["filename"] = path.Base(file)
			pp["filenameNormalized"] = sanitizeName(path.Base(file))
		}
		if prefix != "" {
			return map[string]any{prefix: map[string]any{"path": pp}}
		}
		return map[string]any{"path": pp}
	}
	name := "path"
	if prefix != "" {
		name = prefix + ".path"
	}
	p := map[string]any{name: dir, name + ".basename": base, name + ".basenameNormalized": sanitizeName(base)}
	if file != "" {
		p[name+".filename"] = path.Base(file)
		p[name+".filenameNormalized"] = sanitizeName(path.Base(file))
	}
	for i, sg := range segs {
		if sg != "" {
			p[name+"["+strconv.Itoa(i)+"]"] = sg
		}
	}
	return p
}

// templatePatch applies an ApplicationSet's templatePatch to the
// Application obj: the patch templated with params, then merged as the
// controller's strategic merge patch merges it into an Application (maps
// merged, lists replaced but metadata.finalizers, null deleting).
func templatePatch(tc *templates, obj map[string]any, patch string, params map[string]any, goTemplate bool, opts []string) (map[string]any, error) {
	filled, err := fill(tc, patch, params, goTemplate, opts)
	if err != nil {
		return nil, err
	}
	var p map[string]any
	if err := sigsyaml.Unmarshal([]byte(filled.(string)), &p); err != nil {
		return nil, fmt.Errorf("not a YAML map after templating: %v", err)
	}
	if hasDirective(p) {
		return nil, fmt.Errorf("strategic merge directives ($patch, $retainKeys, ...) are not evaluated")
	}
	out := mergePatch(obj, p)
	// ObjectMeta's finalizers merge (patchStrategy merge) rather than
	// being replaced.
	om, _ := obj["metadata"].(map[string]any)
	nm, _ := out["metadata"].(map[string]any)
	pm, _ := p["metadata"].(map[string]any)
	if before, _ := om["finalizers"].([]any); len(before) > 0 && nm != nil && pm["finalizers"] != nil {
		after, _ := nm["finalizers"].([]any)
		merged := slices.Clone(before)
		for _, f := range after {
			if !slices.Contains(merged, f) {
				merged = append(merged, f)
			}
		}
		nm["finalizers"] = merged
	}
	return out, nil
}

func hasDirective(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.HasPrefix(k, "$") || hasDirective(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasDirective(e) {
				return true
			}
		}
	}
	return false
}

func mergePatch(obj, patch map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, obj)
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		om, ook := out[k].(map[string]any)
		pm, pok := v.(map[string]any)
		if ook && pok {
			out[k] = mergePatch(om, pm)
			continue
		}
		out[k] = v
	}
	return out
}
