package gitlabci

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The CI/CD component (templates/kplan-plan.yml) sets exactly the
// KPLAN_* variables Run reads, each from an input it declares, and runs
// the job in merge request pipelines only, with the cache and artifact
// directories its inputs name.
func TestComponentSetsWhatRunReads(t *testing.T) {
	data, err := os.ReadFile("../../templates/kplan-plan.yml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.SplitN(string(data), "\n---\n", 2)
	if len(docs) != 2 {
		t.Fatal("a component is its spec, ---, then its jobs")
	}
	var spec struct {
		Spec struct {
			Inputs map[string]struct {
				Default any    `yaml:"default"`
				Type    string `yaml:"type"`
			} `yaml:"inputs"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &spec); err != nil {
		t.Fatal(err)
	}
	var jobs map[string]struct {
		Rules     []map[string]string      `yaml:"rules"`
		Variables map[string]string        `yaml:"variables"`
		Script    []string                 `yaml:"script"`
		Cache     struct{ Paths []string } `yaml:"cache"`
		Artifacts struct{ Paths []string } `yaml:"artifacts"`
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &jobs); err != nil {
		t.Fatal(err)
	}
	job, ok := jobs["$[[ inputs.job-name ]]"]
	if !ok {
		t.Fatalf("jobs %v", jobs)
	}
	read := []string{EnvOverlays, EnvExclude, EnvWorkDir, EnvFailOnError, EnvFailOnDangerous, EnvAllowDangerousLabel, EnvComment,
		EnvEnableHelm, EnvLoadRestrictor, EnvCacheDir, EnvReportDir, EnvDiffStyle, EnvIgnoreFields, EnvIgnoreKinds, EnvRemoteHosts, EnvForkRemoteHosts}
	input := regexp.MustCompile(`^"?\$\[\[ inputs\.([a-z-]+) \]\]"?$`)
	var set []string
	for k, v := range job.Variables {
		if !strings.HasPrefix(k, "KPLAN_") {
			continue
		}
		set = append(set, k)
		m := input.FindStringSubmatch(v)
		if m == nil {
			t.Errorf("%s = %q: want an input", k, v)
		} else if _, ok := spec.Spec.Inputs[m[1]]; !ok {
			t.Errorf("%s uses input %s, which the spec does not declare", k, m[1])
		}
	}
	slices.Sort(set)
	slices.Sort(read)
	if !slices.Equal(set, read) {
		t.Errorf("the component sets %v; Run reads %v (the token, %s, is the project's masked variable)", set, read, EnvToken)
	}
	if len(job.Rules) != 1 || job.Rules[0]["if"] != `$CI_PIPELINE_SOURCE == "merge_request_event"` || !slices.Equal(job.Script, []string{"kplan-gitlab"}) {
		t.Errorf("rules %v, script %v", job.Rules, job.Script)
	}
	if !slices.Equal(job.Cache.Paths, []string{"$[[ inputs.cache-dir ]]/"}) || !slices.Equal(job.Artifacts.Paths, []string{"$[[ inputs.report-dir ]]/"}) {
		t.Errorf("cache %v, artifacts %v", job.Cache.Paths, job.Artifacts.Paths)
	}
	// The defaults are Run's.
	s, err := ReadSettings(func(string) string { return "" }, "/p")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]any{"fail-on-error": s.FailOnError, "comment": s.Comment, "fail-on-dangerous": s.FailOnDangerous,
		"cache-dir": strings.TrimPrefix(s.CacheDir, "/p/"), "report-dir": strings.TrimPrefix(s.ReportDir, "/p/")} {
		if got := spec.Spec.Inputs[name].Default; got != want {
			t.Errorf("input %s defaults to %v, Run to %v", name, got, want)
		}
	}
}

// The job reads only the flow's settings its component offers: a
// variable of an Action-only input (a shard, which the job could not
// merge) is not read.
func TestReadsOnlyWhatTheComponentOffers(t *testing.T) {
	env := map[string]string{"KPLAN_SHARD": "1/2", "KPLAN_ARGOCD": "maybe", EnvDiffStyle: "unified"}
	s, err := ReadSettings(func(k string) string { return env[k] }, "/p")
	if err != nil || s.Plan.Shard.On() || s.ArgoCD != nil || s.DiffStyle != "unified" {
		t.Errorf("%+v, %v", s, err)
	}
}
