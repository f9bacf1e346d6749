package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/gitbase"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/shard"
)

// Every option, render options included, changes the fingerprint the
// shards of a run are compared by, unless it is tagged out: an option
// added later counts without anyone listing it (the hand-kept lists of
// kplan diff's flags and the Action's inputs did not).
func TestFingerprintCountsEveryOption(t *testing.T) {
	policy, err := netpolicy.New([]string{"charts.example.com"}, "%s")
	if err != nil {
		t.Fatal(err)
	}
	interfaces := map[string]any{"Render.Remote": policy, "Render.Git": gitbase.New(t.TempDir(), nil)}
	var left []string
	var visit func(v reflect.Value, name string)
	visit = func(v reflect.Value, name string) {
		typ := v.Type()
		for i := range typ.NumField() {
			f := typ.Field(i)
			n := strings.TrimPrefix(name+"."+f.Name, ".")
			if f.Tag.Get("fingerprint") == "-" {
				left = append(left, n)
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				visit(v.Field(i), n)
				continue
			}
			before := Options{}.Fingerprint()
			var o Options
			fv := reflect.ValueOf(&o).Elem().FieldByIndex(fieldPath(Options{}, n))
			set(t, fv, interfaces[n])
			if after := o.Fingerprint(); after == before || !strings.Contains(after, n+"=") {
				t.Errorf("setting %s gives the fingerprint %q, as unset: shards differing in it would merge", n, after)
			}
		}
	}
	visit(reflect.ValueOf(Options{}), "")
	want := []string{"RepoDir", "Base", "Head", "Render.Charts", "Logger", "GC", "CacheDir", "Resolver", "BaseLabel", "HeadLabel", "Progress", "Shard"}
	if !reflect.DeepEqual(left, want) {
		t.Errorf("options left out of the fingerprint: %q, want %q", left, want)
	}
	// The network policy is named by the hosts it allows.
	o := Options{}
	o.Render.Remote = policy
	if got := o.Fingerprint(); got != "Render.Remote=charts.example.com" {
		t.Errorf("fingerprint with a policy: %q", got)
	}
}

// fieldPath is the index path of a dotted field name.
func fieldPath(v any, name string) []int {
	var idx []int
	typ := reflect.TypeOf(v)
	for _, part := range strings.Split(name, ".") {
		f, _ := typ.FieldByName(part)
		idx = append(idx, f.Index...)
		typ = f.Type
	}
	return idx
}

// set gives v a value other than its zero: iface for an interface.
func set(t *testing.T, v reflect.Value, iface any) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		if e := s.Index(0); e.Kind() == reflect.String {
			e.SetString("x")
		}
		v.Set(s)
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string][]string{"x": {"y"}}))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if p.Elem().Kind() != reflect.Struct { // a pointer to a struct is set as it is
			set(t, p.Elem(), nil)
		}
		v.Set(p)
	case reflect.Interface:
		v.Set(reflect.ValueOf(iface))
	default:
		t.Fatalf("no test value for a %s option: extend set", v.Kind())
	}
}

// Validate refuses what no plan can be made with, naming the option, and
// a front end renames it as its users spell it.
func TestValidateNamesTheOption(t *testing.T) {
	err := Options{Ignore: inventorydiff.IgnoreRules{Kinds: []string{"Secret"}}, Shard: shard.Shard{Index: 4, Count: 3}}.Validate()
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Option != "Ignore" {
		t.Fatalf("Validate: %v, want an OptionError for Ignore", err)
	}
	named := NameOptions(err, map[string]string{"Ignore": "--ignore-kind", "Shard": "--shard"})
	for _, want := range []string{"--ignore-kind: ", "Secret", "--shard: share 4/3"} {
		if !strings.Contains(named.Error(), want) {
			t.Errorf("named: %q lacks %q", named, want)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}
