package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"

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
	GoTemplate        bool             `json:"goTemplate"`
	GoTemplateOptions []string         `json:"goTemplateOptions"`
	Generators        []map[string]any `json:"generators"`
	Template          map[string]any   `json:"template"`
	TemplatePatch     string           `json:"templatePatch"`
}

type listGenerator struct {
	Elements     []map[string]any `json:"elements"`
	ElementsYaml string           `json:"elementsYaml"`
	Template     map[string]any   `json:"template"`
}

type gitGenerator struct {
	RepoURL     string `json:"repoURL"`
	Revision    string `json:"revision"`
	Directories []struct {
		Path    string `json:"path"`
		Exclude bool   `json:"exclude"`
	} `json:"directories"`
	Files    []any          `json:"files"`
	Template map[string]any `json:"template"`
}

// generate makes the Applications an ApplicationSet's generators and
// template make, as the ApplicationSet controller does, for the list
// and git directory generators; any other generator fails it with the
// reason.
func (e *Engine) generate(ctx context.Context, s *snapshot.Snapshot, set *AppSet) ([]*Application, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrGenerator}, args...)...)
	}
	var spec appSetSpec
	if err := convert(set.Object["spec"], &spec); err != nil {
		return nil, fail("spec: %v", err)
	}
	if spec.TemplatePatch != "" {
		return nil, fail("templatePatch is not evaluated yet")
	}
	var out []*Application
	for i, g := range spec.Generators {
		var params []map[string]any
		tmpl := spec.Template
		switch {
		case g["list"] != nil && len(g) == 1:
			var l listGenerator
			if err := convert(g["list"], &l); err != nil {
				return nil, fail("generators[%d].list: %v", i, err)
			}
			if l.ElementsYaml != "" {
				return nil, fail("generators[%d].list.elementsYaml is not evaluated yet", i)
			}
			params = l.Elements
			if l.Template != nil {
				tmpl = merge(tmpl, l.Template)
			}
		case g["git"] != nil && len(g) == 1:
			var gg gitGenerator
			if err := convert(g["git"], &gg); err != nil {
				return nil, fail("generators[%d].git: %v", i, err)
			}
			if !e.opts.Repos.Has(gg.RepoURL) {
				return nil, fail("generators[%d].git reads %s, another repository", i, gg.RepoURL)
			}
			if !e.tracks(gg.Revision) {
				return nil, fail("generators[%d].git tracks another revision (%s)", i, gg.Revision)
			}
			if len(gg.Files) > 0 || len(gg.Directories) == 0 {
				return nil, fail("generators[%d].git: the files generator is not evaluated yet", i)
			}
			for _, d := range dirsMatching(s, gg) {
				params = append(params, dirParams(d, spec.GoTemplate))
			}
			if gg.Template != nil {
				tmpl = merge(tmpl, gg.Template)
			}
		default:
			var kinds []string
			for k := range g {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			return nil, fail("generators[%d]: the %s generator is not evaluated yet (list and git directories are)", i, strings.Join(kinds, ", "))
		}
		for _, p := range params {
			obj, err := fill(tmpl, p, spec.GoTemplate, spec.GoTemplateOptions)
			if err != nil {
				return nil, fail("generators[%d]: template: %v", i, err)
			}
			m, _ := obj.(map[string]any)
			app := map[string]any{"apiVersion": Group + "/v1alpha1", "kind": "Application", "metadata": m["metadata"], "spec": m["spec"]}
			if md, ok := app["metadata"].(map[string]any); ok {
				md["namespace"] = set.Namespace
			}
			a, err := Parse(app, set.File)
			if err != nil {
				return nil, fail("an Application it makes: %v", err)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// convert decodes v (JSON-shaped) into out.
func convert(v, out any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// merge is a with b's fields over it (a generator's template over the
// ApplicationSet's).
func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := v.(map[string]any)
		if aok && bok {
			out[k] = merge(am, bm)
			continue
		}
		out[k] = v
	}
	return out
}

// dirsMatching are the repository directories the git generator's
// directories select: matching an included pattern, no excluded one.
func dirsMatching(s *snapshot.Snapshot, g gitGenerator) []string {
	dirs := map[string]bool{}
	for _, p := range s.Index.Paths() {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var out []string
	for _, d := range sortedKeys(dirs) {
		in := false
		for _, r := range g.Directories {
			if ok, _ := path.Match(r.Path, d); ok {
				if r.Exclude {
					in = false
					break
				}
				in = true
			}
		}
		if in {
			out = append(out, d)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var notDNS = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// dirParams are a git directory's parameters: path, path.basename,
// path.basenameNormalized and path[N] (default syntax), or the path
// object (Go templates).
func dirParams(d string, goTemplate bool) map[string]any {
	base := path.Base(d)
	norm := strings.ToLower(notDNS.ReplaceAllString(base, "-"))
	segs := strings.Split(d, "/")
	if goTemplate {
		anySegs := make([]any, len(segs))
		for i, sg := range segs {
			anySegs[i] = sg
		}
		return map[string]any{"path": map[string]any{"path": d, "basename": base, "basenameNormalized": norm, "segments": anySegs}}
	}
	p := map[string]any{"path": d, "path.basename": base, "path.basenameNormalized": norm}
	for i, sg := range segs {
		p["path["+strconv.Itoa(i)+"]"] = sg
	}
	return p
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
			out[k] = r
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
				k := strings.TrimSpace(m[2 : len(m)-2])
				if v, ok := params[k]; ok {
					return fmt.Sprint(v)
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
// has them) and those making a big value or a key at once.
func execTemplate(x string, params map[string]any, opts []string) (string, error) {
	funcs := sprig.TxtFuncMap()
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
