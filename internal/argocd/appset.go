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
	g := &genCtx{e: e, ctx: ctx, s: s, spec: spec}
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
			app, err := g.application(tmpl, ps.p)
			if err != nil {
				return nil, fail("%s: %v", where, err)
			}
			if md, ok := app["metadata"].(map[string]any); ok {
				md["namespace"] = set.Namespace
			}
			a, err := Parse(app, set.File)
			if err != nil {
				return nil, fail("an Application it makes: %v", err)
			}
			if first, dup := names[a.Name]; dup {
				// The controller refuses the whole ApplicationSet.
				return nil, fail("%s and %s both make an Application named %s", first, where, a.Name)
			}
			names[a.Name] = where
			a.Inputs = ps.inputs
			a.Set = set.ID()
			out = append(out, a)
		}
	}
	return out, nil
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
		filled, err := fill(obj, params, spec.GoTemplate, spec.GoTemplateOptions)
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
		patched, err := templatePatch(obj, *spec.TemplatePatch, params, spec.GoTemplate, spec.GoTemplateOptions)
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
func fill(v any, params map[string]any, goTemplate bool, opts []string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			r, err := fill(e, params, goTemplate, opts)
			if err != nil {
				return nil, err
			}
			// Keys are templated too (an annotation named after a
			// parameter).
			key, err := fill(k, params, goTemplate, opts)
			if err != nil {
				return nil, err
			}
			out[key.(string)] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := fill(e, params, goTemplate, opts)
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
		return execTemplate(x, params, opts)
	}
	return v, nil
}

// maxTemplateOutput bounds what one Go template field may write.
const maxTemplateOutput = 1 << 20

// goTemplateTimeout bounds one Go template field: a template can loop
// (range over a number) and text/template takes no context, so past it
// the execution is abandoned, as a Helm templating is.
const goTemplateTimeout = 5 * time.Second

// execTemplate executes one Go template field with sprig's functions but
// those reading the environment or the network (as the controller
// has them) and those making a big value or a key at once, plus the
// controller's normalize, toYaml, fromYaml and fromYamlArray.
func execTemplate(x string, params map[string]any, opts []string) (string, error) {
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
	for _, o := range opts {
		// text/template panics on any other option.
		if !slices.Contains([]string{"missingkey=default", "missingkey=invalid", "missingkey=zero", "missingkey=error"}, o) {
			return "", fmt.Errorf("goTemplateOptions: %q is not a template option (missingkey=default, invalid, zero or error)", o)
		}
	}
	t, err := template.New("").Funcs(funcs).Option(opts...).Parse(x)
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
