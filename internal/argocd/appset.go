package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// ErrGenerator is the category of an ApplicationSet kplan cannot
// expand: a generator it does not evaluate, or a template that fails.
var ErrGenerator = errors.New("ApplicationSet not expanded")

// AppSet is one ApplicationSet of the repository.
type AppSet struct {
	Namespace, Name, File string
	Object                map[string]any
}

// ID is namespace/name.
func (a *AppSet) ID() string { return a.Namespace + "/" + a.Name }

type appSetSpec struct {
	GoTemplate           bool             `json:"goTemplate"`
	GoTemplateOptions    []string         `json:"goTemplateOptions"`
	ApplyNestedSelectors bool             `json:"applyNestedSelectors"`
	Generators           []map[string]any `json:"generators"`
	Template             map[string]any   `json:"template"`
	TemplatePatch        *string          `json:"templatePatch"`
	SyncPolicy           struct {
		PreserveResourcesOnDeletion bool `json:"preserveResourcesOnDeletion"`
	} `json:"syncPolicy"`
}

// generate makes the Applications an ApplicationSet's generators and
// template make, as the ApplicationSet controller does; a generator
// kplan cannot evaluate offline fails it with the reason. Each
// Application's Inputs are the repository files its parameters came
// from.
func (e *Engine) generate(ctx context.Context, s *snapshot.Snapshot, set *AppSet) ([]*Application, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrGenerator}, args...)...)
	}
	var spec appSetSpec
	if err := convert(set.Object["spec"], &spec); err != nil {
		return nil, fail("spec: %v", err)
	}
	g := &genCtx{e: e, ctx: ctx, s: s, spec: spec, templates: &templates{}}
	var out []*Application
	names := map[string]string{}
	for i, gen := range spec.Generators {
		where := fmt.Sprintf("generators[%d]", i)
		sets, gtmpl, err := g.params(gen, where, nil, 0)
		if err != nil {
			return nil, fail("%v", err)
		}
		// The generator's template over the ApplicationSet's, as the
		// controller merges them (mergo: the ApplicationSet's fills
		// what the generator's leaves empty).
		tmpl := mergeParams(spec.Template, gtmpl)
		for _, ps := range sets {
			a, err := e.made(set, i, ps, func() (*Application, error) { return g.made(set, tmpl, ps, where) })
			if err != nil {
				return nil, fail("%v", err)
			}
			if first, dup := names[a.Name]; dup {
				// The controller refuses the whole ApplicationSet.
				return nil, fail("%s and %s both make an Application named %s", first, where, a.Name)
			}
			names[a.Name] = where
			out = append(out, a)
		}
	}
	return out, nil
}

// made is the Application the ApplicationSet set's generator gen makes
// of the parameters ps, by build, once per plan: the same set (a file
// alike on both sides is one *AppSet) and the same parameters make the
// same Application, so the sides share it, and a generator's sets
// whose inputs a change did not touch are not templated again. build's
// errors are not kept.
func (e *Engine) made(set *AppSet, gen int, ps paramSet, build func() (*Application, error)) (*Application, error) {
	// %#v writes maps sorted, and the types of values: params equal
	// under it template alike.
	key := madeKey{set: set, gen: gen, params: fmt.Sprintf("%#v", ps.p), inputs: strings.Join(ps.inputs, "\x00")}
	if a, ok := e.madeApps.Load(key); ok {
		return a.(*Application), nil
	}
	a, err := build()
	if err != nil {
		return nil, err
	}
	e.madeApps.Store(key, a)
	return a, nil
}

// madeKey names an Application an ApplicationSet makes: the set (its
// pointer: its file's parse is shared while the plan runs), which of its
// generators, the parameters and their inputs.
type madeKey struct {
	set            *AppSet
	gen            int
	params, inputs string
}

// made templates the Application of the parameters ps (generator where)
// with tmpl, as set's.
func (g *genCtx) made(set *AppSet, tmpl map[string]any, ps paramSet, where string) (*Application, error) {
	app, err := g.application(tmpl, ps.p)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	if md, ok := app["metadata"].(map[string]any); ok {
		md["namespace"] = set.Namespace
	}
	a, err := Parse(app, set.File)
	if err != nil {
		return nil, fmt.Errorf("an Application it makes: %v", err)
	}
	a.Inputs = ps.inputs
	a.Set = set.ID()
	a.setPolicy = set.applicationsSync()
	return a, nil
}

// applicationsSync is the ApplicationSet's spec.syncPolicy.applicationsSync
// ("" for sync, the default). The ApplicationSet controller honours it
// unless it runs with its own --policy (applicationset/controllers/
// applicationset_controller.go:153, 342, 376, utils.DefaultPolicy; the
// override is allowed by default, cmd/argocd-applicationset-controller/
// commands/applicationset_controller.go:303 at 37ee0097cf), which a
// repository cannot show: kplan takes the default.
func (a *AppSet) applicationsSync() string {
	spec, _ := a.Object["spec"].(map[string]any)
	sp, _ := spec["syncPolicy"].(map[string]any)
	p, _ := sp["applicationsSync"].(string)
	if p == "sync" {
		return ""
	}
	return p
}

// application is the Application the template makes for params: every
// string (and map key) templated, templatePatch applied, and the
// resources finalizer added as the controller adds it.
func (g *genCtx) application(tmpl, params map[string]any) (map[string]any, error) {
	spec := g.spec
	var obj map[string]any
	// A copy: the Applications of a template share none of its maps.
	if err := convert(map[string]any{"metadata": tmpl["metadata"], "spec": tmpl["spec"]}, &obj); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	// The controller leaves the template as written for no parameters.
	if len(params) > 0 {
		filled, err := fill(g.templates, obj, params, spec.GoTemplate, spec.GoTemplateOptions)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		obj = filled.(map[string]any)
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		if fs, _ := md["finalizers"].([]any); len(fs) == 0 && !spec.SyncPolicy.PreserveResourcesOnDeletion {
			md["finalizers"] = []any{ResourcesFinalizer}
		}
	}
	if spec.TemplatePatch != nil {
		patched, err := templatePatch(g.templates, obj, *spec.TemplatePatch, params, spec.GoTemplate, spec.GoTemplateOptions)
		if err != nil {
			return nil, fmt.Errorf("templatePatch: %w", err)
		}
		obj = patched
	}
	return map[string]any{"apiVersion": Group + "/v1alpha1", "kind": "Application", "metadata": obj["metadata"], "spec": obj["spec"]}, nil
}

// convert decodes v (JSON-shaped) into out.
func convert(v, out any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

var tag = regexp.MustCompile(`{{\s*([^{}]*?)\s*}}`)

// fill substitutes params in every string of the template: Go
// templates (with sprig's functions but those reading the environment,
// as the controller has) or the default {{param}} syntax, which leaves
// unknown parameters as written.
func fill(tc *templates, v any, params map[string]any, goTemplate bool, opts []string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			r, err := fill(tc, e, params, goTemplate, opts)
			if err != nil {
				return nil, err
			}
			// Keys are templated too (an annotation named after a
			// parameter).
			key, err := fill(tc, k, params, goTemplate, opts)
			if err != nil {
				return nil, err
			}
			out[key.(string)] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := fill(tc, e, params, goTemplate, opts)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		if !goTemplate {
			return tag.ReplaceAllStringFunc(x, func(m string) string {
				// Only string parameters replace a tag, as the
				// controller's fasttemplate replacement does.
				if v, ok := params[strings.TrimSpace(m[2:len(m)-2])].(string); ok {
					return v
				}
				return m
			}), nil
		}
		return execTemplate(tc, x, params, opts)
	}
	return v, nil
}

// maxTemplateOutput bounds what one Go template field may write.
const maxTemplateOutput = 1 << 20

// goTemplateTimeout bounds one Go template field: a template can loop
// (range over a number) and text/template takes no context, so past it
// the execution is abandoned, as a Helm templating is.
const goTemplateTimeout = 5 * time.Second

// templateFuncs are the functions of an ApplicationSet's Go templates:
// sprig's but those reading the environment or the network (as the
// controller has them) and those making a big value or a key at once,
// plus the controller's normalize, toYaml, fromYaml and fromYamlArray.
// Made once: sprig makes a map of some two hundred functions each time.
var templateFuncs = sync.OnceValue(func() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	funcs["normalize"] = sanitizeName
	funcs["toYaml"] = func(v any) string {
		data, err := sigsyaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(data), "\n")
	}
	funcs["fromYaml"] = func(s string) map[string]any {
		m := map[string]any{}
		if err := sigsyaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["fromYamlArray"] = func(s string) []any {
		var a []any
		if err := sigsyaml.Unmarshal([]byte(s), &a); err != nil {
			a = []any{err.Error()}
		}
		return a
	}
	for _, f := range []string{"env", "expandenv", "getHostByName", "repeat", "until", "untilStep",
		"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
		"derivePassword", "bcrypt", "htpasswd", "randBytes", "randAlpha", "randAlphaNum", "randAscii", "randNumeric"} {
		delete(funcs, f)
	}
	return funcs
})

// templates keeps the Go templates of one ApplicationSet's fields
// parsed: each Application it makes executes the same few. A nil
// *templates parses each anew.
type templates struct {
	mu sync.Mutex
	m  map[string]*template.Template // by options and text
}

// parse parses the template x with opts (checked).
func (c *templates) parse(x string, opts []string) (*template.Template, error) {
	key := strings.Join(opts, "\x00") + "\x00\x00" + x
	if c != nil {
		c.mu.Lock()
		t, ok := c.m[key]
		c.mu.Unlock()
		if ok {
			return t, nil
		}
	}
	t, err := template.New("").Funcs(templateFuncs()).Option(opts...).Parse(x)
	if err != nil || c == nil {
		return t, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*template.Template{}
	}
	c.m[key] = t // executions share it: text/template executes in parallel
	return t, nil
}

// execTemplate executes one Go template field with templateFuncs,
// bounded in time and output; tc keeps the parsed templates (nil: none).
func execTemplate(tc *templates, x string, params map[string]any, opts []string) (string, error) {
	for _, o := range opts {
		// text/template panics on any other option.
		if !slices.Contains([]string{"missingkey=default", "missingkey=invalid", "missingkey=zero", "missingkey=error"}, o) {
			return "", fmt.Errorf("goTemplateOptions: %q is not a template option (missingkey=default, invalid, zero or error)", o)
		}
	}
	t, err := tc.parse(x, opts)
	if err != nil {
		return "", err
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned execution never blocks
	go func() {
		var r result
		r.err = crash.Catch(func() error {
			w := &capped{max: maxTemplateOutput}
			if err := t.Execute(w, params); err != nil {
				return err
			}
			r.out = w.b.String()
			return nil
		})
		done <- r
	}()
	timer := time.NewTimer(goTemplateTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-timer.C:
		return "", fmt.Errorf("the template took more than %s, and was abandoned", goTemplateTimeout)
	}
}

// capped is a buffer failing writes past max bytes.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		return 0, fmt.Errorf("the template writes more than %d bytes", c.max)
	}
	return c.b.Write(p)
}
