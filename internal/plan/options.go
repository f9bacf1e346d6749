package plan

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// OptionError says which option (Options' field name) is wrong, so that a
// front end can name it as its users spell it (a flag, an Action input).
type OptionError struct {
	Option string // "Base", "Ignore", …
	Err    error
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// NameOptions rewrites the *OptionError in err (as Validate returns it)
// to name each option as a front end spells it: names maps a field name
// to a flag or an input ("Ignore": "--ignore-field/--ignore-kind").
func NameOptions(err error, names map[string]string) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		if oe, ok := errors.AsType[*OptionError](e); ok && names[oe.Option] != "" {
			out[i] = fmt.Errorf("%s: %w", names[oe.Option], oe.Err)
		}
	}
	return errors.Join(out...)
}

// Validate refuses options no plan can be made with, before any work is
// done: every front end (kplan diff, the Action) calls it as soon as it
// has read its flags or inputs, and Run again. The commits are not
// checked (a front end knows them later, or requires them its own way;
// Run refuses no Base). Its errors are *OptionError.
func (o Options) Validate() error {
	var errs []error
	if err := inventorydiff.CheckIgnore(o.Ignore); err != nil {
		errs = append(errs, &OptionError{"Ignore", err})
	}
	if o.Shard.On() && (o.Shard.Index < 1 || o.Shard.Index > o.Shard.Count) {
		errs = append(errs, &OptionError{"Shard", fmt.Errorf("share %s: want I/N with 1 <= I <= N", o.Shard)})
	}
	return errors.Join(errs...)
}

// Fingerprint names what every shard of one run must share: each option
// that chooses the overlays or how they render, with its value (options
// at their zero value are left out). It is derived from Options itself,
// render options included, so that a new option counts unless its field
// is tagged `fingerprint:"-"` (what is checked otherwise, as the commits,
// or cannot change the plan, as a logger): a new plan input cannot let
// parts planned differently merge.
//
// A value that has a Fingerprint method (the network policy: the hosts it
// allows) is named by it; any other pointer, interface or func only by
// whether it is set (a git fetcher: remote bases fetched or refused).
func (o Options) Fingerprint() string {
	var out []string
	fingerprint(reflect.ValueOf(o), "", &out)
	return strings.Join(out, " ")
}

type fingerprinter interface{ Fingerprint() string }

func fingerprint(v reflect.Value, name string, out *[]string) {
	if v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer || v.Kind() == reflect.Func || v.Kind() == reflect.Map || v.Kind() == reflect.Chan {
		if v.IsNil() {
			return
		}
	}
	if name != "" && v.CanInterface() { // not Options' own method
		if f, ok := v.Interface().(fingerprinter); ok {
			*out = append(*out, name+"="+f.Fingerprint())
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("fingerprint") == "-" {
				continue
			}
			n := f.Name
			if name != "" {
				n = name + "." + n
			}
			fingerprint(v.Field(i), n, out)
		}
	case reflect.Pointer:
		if e := v.Elem(); e.Kind() != reflect.Struct {
			fingerprint(e, name, out) // *bool: Flux on, off or left to the repository
		} else {
			*out = append(*out, name+"=set")
		}
	case reflect.Map:
		// fmt prints a map's keys sorted: shards given other maps (the
		// webhook's clusters) must not merge.
		if v.Len() > 0 {
			*out = append(*out, fmt.Sprintf("%s=%v", name, v.Interface()))
		}
	case reflect.Interface, reflect.Func, reflect.Chan:
		*out = append(*out, name+"=set")
	case reflect.String:
		if v.String() != "" {
			*out = append(*out, fmt.Sprintf("%s=%q", name, v.String()))
		}
	case reflect.Slice:
		if v.Len() > 0 {
			*out = append(*out, fmt.Sprintf("%s=%q", name, v.Interface()))
		}
	default:
		if !v.IsZero() {
			*out = append(*out, fmt.Sprintf("%s=%v", name, v.Interface()))
		}
	}
}
