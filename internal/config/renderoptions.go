package config

import (
	"reflect"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kplan-dev/kplan/internal/render"
)

// renderOptions reads a target's render options: each field of
// render.Options tagged `target:"name"`, under that name. They are read
// from the struct rather than listed here so that a render option is
// declared once, where the render reads it, and reaches every render of
// the target (deploy.Prepare) without another file knowing of it.
func (p *parser) renderOptions(o *render.Options) map[string]func(*yaml.Node, string) {
	handlers := map[string]func(*yaml.Node, string){}
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		name, ok := v.Type().Field(i).Tag.Lookup("target")
		if !ok {
			continue
		}
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Duration]():
			handlers[name] = func(n *yaml.Node, field string) {
				if d, ok := p.duration(n, field); ok {
					f.SetInt(int64(d))
				}
			}
		case f.Kind() == reflect.Bool:
			handlers[name] = func(n *yaml.Node, field string) {
				if b, ok := p.bool(n, field); ok {
					f.SetBool(b)
				}
			}
		case f.Kind() == reflect.String:
			handlers[name] = func(n *yaml.Node, field string) {
				if s, ok := p.str(n, field); ok {
					f.SetString(s)
				}
			}
		case f.CanInt():
			handlers[name] = func(n *yaml.Node, field string) {
				var i int64
				if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || f.OverflowInt(i) {
					p.errorf(n, field, "want a whole number, got %s", describe(n))
					return
				}
				f.SetInt(i)
			}
		}
		// Another type is read by no handler, so the option is refused as
		// unknown; TestRenderOptionsAreReadable fails on it.
	}
	return handlers
}
