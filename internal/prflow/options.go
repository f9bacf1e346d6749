// Package prflow is the pull request flow under kplan's CI front ends,
// the GitHub Action (internal/action) and the GitLab CI job
// (internal/gitlabci): settings → remote policy → commit choice → plan →
// report files → comment → gates, written once. A front end is an
// adapter: it maps its environment onto Settings (Read, naming them in
// its Words), and gives a Job what only it knows: the change, how to
// choose the two commits, where files and the comment go. kplan diff
// binds its flags to the same Options, so that a plan option is one
// field, one parser and one check for every front end (as helm's
// pkg/action options serve its CLI and its SDK alike).
package prflow

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/internal/shard"
)

// Options are the plan options a user sets, whichever front end takes
// them: the Action's inputs and the GitLab component's (Read), kplan
// diff's flags (bound to the fields). They are kept as given; Plan checks
// them and makes plan.Options.
type Options struct {
	// Overlays and Exclude are globs of overlay directories, comma- or
	// newline-separated (render.Patterns).
	Overlays, Exclude string
	// LoadRestrictor is kustomize's (render.ParseLoadRestrictor).
	LoadRestrictor string
	EnableHelm     bool
	// DiffStyle is how the reports show changes inside objects
	// (report.CheckDiffStyle).
	DiffStyle                 string
	IgnoreFields, IgnoreKinds []string
	NoDefaultIgnore           bool
	// Shard is "I/N" or "" (shard.Parse).
	Shard string
	// ArgoCD is nil for "auto": .kplan.yaml and detection decide.
	ArgoCD *bool
	// WebhookConfig is the webhook's configuration file: its targets for
	// Repository (owner/name) tell the plan which overlays deploy to one
	// cluster.
	WebhookConfig, Repository string
	// FailOnError fails the run on the overlays the change breaks.
	FailOnError bool
}

// Words are how a front end's user names its settings, in errors, logs
// and the report.
type Words struct {
	// Name spells a setting, given by its Action input name
	// ("diff-style"), as the user writes it: "diff-style",
	// "KPLAN_DIFF_STYLE", "--diff-style".
	Name func(input string) string
	// Kind is what the settings are, before a name: "Action input",
	// "CI/CD variable"; "" for flags, which need none.
	Kind string
}

// Say names a setting for a message: "Action input diff-style".
func (w Words) Say(input string) string {
	if w.Kind == "" {
		return w.Name(input)
	}
	return w.Kind + " " + w.Name(input)
}

// sayPair names two settings at once: "Action inputs a/b".
func (w Words) sayPair(a, b string) string {
	if w.Kind == "" {
		return w.Name(a) + "/" + w.Name(b)
	}
	return w.Kind + "s " + w.Name(a) + "/" + w.Name(b)
}

// source is where ignore rules came from, as the report says it.
func (w Words) source() string { return cmp.Or(w.Kind, "command line") }

// Plan checks the options and makes the plan options they set (the
// commits, the network policy, the logger and the cache are the front
// end's to add), naming a wrong one in w's words.
func (o Options) Plan(w Words) (plan.Options, error) {
	opts := plan.Options{
		Filter:          render.Filter{Include: render.Patterns(o.Overlays), Exclude: render.Patterns(o.Exclude)},
		Render:          render.Options{EnableHelm: o.EnableHelm},
		Ignore:          inventorydiff.IgnoreRules{Fields: o.IgnoreFields, Kinds: o.IgnoreKinds, Source: w.source()},
		NoDefaultIgnore: o.NoDefaultIgnore, ArgoCD: o.ArgoCD,
	}
	var err error
	if opts.Shard, err = shard.Parse(strings.TrimSpace(o.Shard)); err != nil {
		return opts, fmt.Errorf("%s: %w", w.Say("shard"), err)
	}
	if err := report.CheckDiffStyle(o.DiffStyle); err != nil {
		return opts, fmt.Errorf("%s: %w", w.Say("diff-style"), err)
	}
	if opts.Render.LoadRestrictorNone, err = render.ParseLoadRestrictor(o.LoadRestrictor); err != nil {
		return opts, fmt.Errorf("%s %w", w.Say("load-restrictor"), err)
	}
	if path := strings.TrimSpace(o.WebhookConfig); path != "" {
		if opts.DeployedTo, opts.WebhookNotes, err = config.DeployedTo(path, o.Repository); err != nil {
			return opts, fmt.Errorf("%s: %w", w.Say("webhook-config"), err)
		}
	}
	if err := opts.Validate(); err != nil {
		return opts, plan.NameOptions(err, map[string]string{"Ignore": w.sayPair("ignore-fields", "ignore-kinds"), "Shard": w.Say("shard")})
	}
	return opts, nil
}

// Settings are a CI job's: the plan options, and what the job does
// around the plan.
type Settings struct {
	Options
	// WorkDir is the repository's directory in the job's workspace.
	WorkDir string
	// CacheDir is the render cache as given: the front end resolves it
	// (Job.CacheDir), each as its cache step keeps it.
	CacheDir string
	// Comment keeps the plan as the change's one comment.
	Comment bool
	// FailOnDangerous fails the job on dangerous findings unless the
	// change carries AllowDangerousLabel.
	FailOnDangerous     bool
	AllowDangerousLabel string
	// RemoteHosts may be fetched from by renders; ForkRemoteHosts instead
	// when the change is untrusted (Job.Untrusted).
	RemoteHosts, ForkRemoteHosts []string
	// Plan is Options checked (Read).
	Plan plan.Options
}

// Inputs are the settings Read reads, as the Action and the GitLab
// component name their inputs (the component's CI/CD variables are
// KPLAN_ and these in upper snake case). A front end that does not offer
// one answers "" for it: its default.
var Inputs = []string{
	"overlays", "exclude", "working-directory", "cache-dir", "load-restrictor", "enable-helm", "diff-style",
	"ignore-fields", "ignore-kinds", "default-ignore", "argocd", "shard", "webhook-config",
	"fail-on-error", "fail-on-dangerous", "allow-dangerous-label", "comment", "remote-hosts", "fork-remote-hosts",
}

// Read reads the settings through get (an input's value by its name in
// Inputs, "" when not set), naming them in w's words; repository is the
// job's (owner/name), for webhook-config.
func Read(get func(input string) string, w Words, repository string) (Settings, error) {
	s := Settings{
		Options: Options{
			Overlays: get("overlays"), Exclude: get("exclude"), LoadRestrictor: get("load-restrictor"), DiffStyle: get("diff-style"),
			IgnoreFields: render.Patterns(get("ignore-fields")), IgnoreKinds: render.Patterns(get("ignore-kinds")),
			Shard: get("shard"), WebhookConfig: get("webhook-config"), Repository: repository,
		},
		WorkDir: get("working-directory"), CacheDir: get("cache-dir"),
		AllowDangerousLabel: strings.TrimSpace(get("allow-dangerous-label")),
		RemoteHosts:         render.Patterns(get("remote-hosts")), ForkRemoteHosts: render.Patterns(get("fork-remote-hosts")),
	}
	var defaultIgnore bool
	for _, b := range []struct {
		name string
		def  bool
		dst  *bool
	}{{"fail-on-error", true, &s.FailOnError}, {"comment", true, &s.Comment}, {"enable-helm", false, &s.EnableHelm},
		{"fail-on-dangerous", false, &s.FailOnDangerous}, {"default-ignore", true, &defaultIgnore}} {
		v := strings.TrimSpace(get(b.name))
		if v == "" {
			*b.dst = b.def
			continue
		}
		var err error
		if *b.dst, err = strconv.ParseBool(v); err != nil {
			return s, fmt.Errorf("%s %q: want true or false", w.Say(b.name), v)
		}
	}
	s.NoDefaultIgnore = !defaultIgnore
	var err error
	if s.ArgoCD, err = autoBool(get("argocd")); err != nil {
		return s, fmt.Errorf("%s: %w", w.Say("argocd"), err)
	}
	s.Plan, err = s.Options.Plan(w)
	return s, err
}

// autoBool reads a true/false/auto setting: nil for auto or empty.
func autoBool(v string) (*bool, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.EqualFold(v, "auto") {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%q: want true, false or auto", v)
	}
	return &b, nil
}
