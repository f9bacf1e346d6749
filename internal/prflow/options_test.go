package prflow

import (
	"strings"
	"testing"
)

var (
	action = Words{Name: func(input string) string { return input }, Kind: "Action input"}
	gitlab = Words{Name: func(input string) string {
		return "KPLAN_" + strings.ToUpper(strings.ReplaceAll(input, "-", "_"))
	}, Kind: "CI/CD variable"}
	flags = Words{Name: func(input string) string { return "--" + strings.TrimSuffix(input, "s") }}
)

// One parser, each front end's words: a wrong setting is named as the
// user of that front end wrote it.
func TestReadNamesSettingsInTheFrontEndsWords(t *testing.T) {
	for _, c := range []struct {
		inputs map[string]string
		words  Words
		want   string
	}{
		{map[string]string{"diff-style": "side"}, action, `Action input diff-style: diff style "side"`},
		{map[string]string{"diff-style": "side"}, gitlab, `CI/CD variable KPLAN_DIFF_STYLE: diff style "side"`},
		{map[string]string{"fail-on-error": "maybe"}, gitlab, `CI/CD variable KPLAN_FAIL_ON_ERROR "maybe": want true or false`},
		{map[string]string{"ignore-kinds": "Secret"}, action, "Action inputs ignore-fields/ignore-kinds: "},
		{map[string]string{"ignore-kinds": "Secret"}, gitlab, "CI/CD variables KPLAN_IGNORE_FIELDS/KPLAN_IGNORE_KINDS: "},
		{map[string]string{"shard": "4/3"}, action, "Action input shard: "},
		{map[string]string{"argocd": "maybe"}, action, `Action input argocd: "maybe": want true, false or auto`},
		{map[string]string{"load-restrictor": "x"}, gitlab, `CI/CD variable KPLAN_LOAD_RESTRICTOR "x": want`},
	} {
		_, err := Read(func(k string) string { return c.inputs[k] }, c.words, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.inputs, err, c.want)
		}
	}
}

// Unset settings are their defaults, the same for every front end.
func TestReadDefaults(t *testing.T) {
	s, err := Read(func(string) string { return "" }, gitlab, "")
	if err != nil {
		t.Fatal(err)
	}
	if !s.FailOnError || !s.Comment || s.FailOnDangerous || s.EnableHelm || s.NoDefaultIgnore || s.ArgoCD != nil || s.Plan.Shard.On() {
		t.Errorf("defaults: %+v", s)
	}
	if s.Plan.Ignore.Source != "CI/CD variable" {
		t.Errorf("ignore rules' source %q", s.Plan.Ignore.Source)
	}
}

// kplan diff's flags bind to Options: Plan names them as flags.
func TestOptionsPlanNamesFlags(t *testing.T) {
	_, err := Options{IgnoreKinds: []string{"Secret"}}.Plan(flags)
	if err == nil || !strings.HasPrefix(err.Error(), "--ignore-field/--ignore-kind: ") {
		t.Errorf("%v", err)
	}
	opts, err := Options{Overlays: "a/*,b", Exclude: "c", NoDefaultIgnore: true}.Plan(flags)
	if err != nil || len(opts.Filter.Include) != 2 || len(opts.Filter.Exclude) != 1 || !opts.NoDefaultIgnore || opts.Ignore.Source != "command line" {
		t.Errorf("%+v, %v", opts, err)
	}
}
