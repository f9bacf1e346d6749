package deploy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/render"
)

// TestTargetRenderOptionsReachTheRender pins where a target's render
// option is declared: a field of render.Options tagged `target:"name"`
// is read from the webhook's configuration under that name and reaches
// the options every render of the target uses (SettingsOf, then
// Prepare), with no other file listing it. Each tagged field is set to a
// value other than its zero in a configuration and read back.
func TestTargetRenderOptionsReachTheRender(t *testing.T) {
	typ := reflect.TypeFor[render.Options]()
	n := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, ok := f.Tag.Lookup("target")
		if !ok {
			continue
		}
		n++
		var yamlValue string
		var want any
		switch {
		case f.Type == reflect.TypeFor[time.Duration]():
			yamlValue, want = "90s", 90*time.Second
		case f.Type.Kind() == reflect.Bool:
			yamlValue, want = "true", true
		case f.Type.Kind() == reflect.String:
			yamlValue, want = "x", "x"
		case f.Type.Kind() == reflect.Int, f.Type.Kind() == reflect.Int64:
			yamlValue, want = "7", reflect.ValueOf(7).Convert(f.Type).Interface()
		default:
			t.Errorf("render.Options.%s (target option %s) has type %s, which the configuration cannot read", f.Name, name, f.Type)
			continue
		}
		file := fmt.Sprintf("repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n          - {name: a, overlay: a, %s: %s}\n", name, yamlValue)
		cfg, err := config.Parse("w.yaml", []byte(file))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := reflect.ValueOf(SettingsOf(cfg.Repositories[0].Branches[0].Targets[0]).Render).Field(i).Interface()
		if got != want {
			t.Errorf("%s: %s in the configuration renders with %s = %v, want %v", name, yamlValue, f.Name, got, want)
		}
	}
	if n == 0 {
		t.Fatal("no field of render.Options is a target option; enableHelm is")
	}
}
