package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// fluxRepo is a git repository holding a testdata fixture, committed on
// main (gittest.Fixture), that kplan diff plans.
type fluxRepo struct {
	*gittest.Fixture
	t *testing.T
}

func newFluxRepo(t *testing.T, fixture string) *fluxRepo {
	t.Helper()
	return &fluxRepo{Fixture: gittest.NewFixture(t, filepath.Join("../testdata", fixture)), t: t}
}

// diff runs kplan diff in format (json is decoded into p).
func (r *fluxRepo) diff(kplan, base, head, format string, args ...string) (p fluxPlan, out string) {
	r.t.Helper()
	cmd := exec.Command(kplan, append([]string{"diff", "-C", r.Dir, "--base", base, "--head", head, "--format", format}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
	}
	if format == "json" {
		if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
			r.t.Fatalf("%v\n%s", err, stdout.String())
		}
	}
	return p, stdout.String()
}

// fieldsOf are the field changes of one object of one target of p.
func fieldsOf(p fluxPlan, target, key string) map[string][2]string {
	out := map[string][2]string{}
	for _, o := range p.Overlays {
		if o.Path == target {
			for _, f := range o.Fields[key] {
				out[f.Path] = [2]string{unquote(f.Old), unquote(f.New)}
			}
		}
	}
	return out
}

// unquote is a field value, typed in the JSON report, as text: a
// string bare, anything else as Go prints it.
func unquote(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// Flux's documented two-cluster layout (testdata/flux-clusters, as
// fluxcd/flux2-kustomize-helm-example): clusters/production and
// clusters/staging each bootstrap the same flux-system Kustomization and
// an apps and infra-configs Kustomization of the same names, both reusing
// apps/base. Every cluster is planned, each target named by its cluster,
// a change to the shared base planned in both, substitution done with
// each cluster's own variables, and no directory a cluster builds also
// planned as a plain overlay.
func TestFluxEveryClusterPlanned(t *testing.T) {
	kplan := buildKplan(t)
	r := newFluxRepo(t, "flux-clusters")
	r.Edit("apps/base/podinfo/deployment.yaml", "podinfo:6.7.0", "podinfo:6.7.1")
	r.Edit("infrastructure/configs/settings.yaml", "name: ${ENVIRONMENT}", "name: env-${ENVIRONMENT}")

	var all []string
	for _, c := range []string{"production", "staging"} {
		for _, k := range []string{"flux-system", "apps", "infra-configs"} {
			all = append(all, c+": flux-system/"+k)
		}
	}
	p, _ := r.diff(kplan, "main~2", "main~1", "json")
	var ids []string
	for _, o := range p.Overlays {
		ids = append(ids, o.Path)
		if o.Error != "" {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
	}
	slices.Sort(ids)
	slices.Sort(all)
	if !slices.Equal(ids, all) {
		t.Errorf("targets %q, want every cluster's %q", ids, all)
	}
	deploy := "apps_v1_Deployment|podinfo|podinfo"
	for _, c := range []string{"production", "staging"} {
		f := fieldsOf(p, c+": flux-system/apps", deploy)
		if got := f["spec.template.spec.containers[name=podinfo].image"]; got != [2]string{"ghcr.io/stefanprodan/podinfo:6.7.0", "ghcr.io/stefanprodan/podinfo:6.7.1"} {
			t.Errorf("%s: the shared base's image bump is not planned: fields %v", c, f)
		}
	}

	p, text := r.diff(kplan, "main~1", "main", "json")
	for _, c := range []string{"production", "staging"} {
		f := fieldsOf(p, c+": flux-system/infra-configs", "~G_v1_ConfigMap|default|environment")
		if got := f["data.name"]; got != [2]string{c, "env-" + c} {
			t.Errorf("%s: the ConfigMap must be substituted with the cluster's own variable: fields %v", c, f)
		}
	}
	_ = text
	_, text = r.diff(kplan, "main~1", "main", "text")
	for _, c := range []string{"production", "staging"} {
		if !strings.Contains(text, c+": flux-system/infra-configs") {
			t.Errorf("the text plan does not name %s's target:\n%s", c, text)
		}
	}
}

// A flux-operator repository (testdata/flux-operator): a FluxInstance
// syncs clusters/home, so no flux-system Kustomization is written in
// git. Its sync path is built as Flux's flux-system Kustomization would
// be: the cluster-settings ConfigMap there feeds the apps Kustomization's
// substituteFrom, and the ResourceSet is listed as not rendered.
func TestFluxOperatorInstanceSyncPath(t *testing.T) {
	kplan := buildKplan(t)
	r := newFluxRepo(t, "flux-operator")
	r.Edit("apps/home/podinfo/ingress.yaml", "number: 9898", "number: 9899")
	r.Edit("clusters/home/cluster-settings.yaml", "DOMAIN: home.example.invalid", "DOMAIN: lab.example.invalid")

	p, _ := r.diff(kplan, "main~2", "main~1", "json")
	ing := "networking.k8s.io_v1_Ingress|podinfo|podinfo"
	var ids []string
	for _, o := range p.Overlays {
		ids = append(ids, o.Path)
		if o.Error != "" {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
	}
	if !slices.Contains(ids, "flux-system/apps") || !slices.Contains(ids, "flux-system/flux-system") {
		t.Fatalf("targets %q: the FluxInstance's sync path must be the flux-system root applying apps", ids)
	}
	if f := fieldsOf(p, "flux-system/apps", ing); f["spec.rules[0].http.paths[0].backend.service.port.number"] != [2]string{"9898", "9899"} {
		t.Errorf("the port change is not planned in flux-system/apps: %v", f)
	}

	p, _ = r.diff(kplan, "main~1", "main", "json")
	if f := fieldsOf(p, "flux-system/apps", ing); f["spec.rules[0].host"] != [2]string{"podinfo.home.example.invalid", "podinfo.lab.example.invalid"} {
		t.Errorf("the cluster-settings ConfigMap must feed substituteFrom: fields %v", f)
	}
	var notes []string
	for _, o := range p.Overlays {
		if o.Path == "flux-system/flux-system" {
			notes = o.Notes
		}
	}
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "ResourceSet flux-system/previews is not rendered") }) {
		t.Errorf("flux-system/flux-system notes %q: the ResourceSet must be listed as not rendered", notes)
	}

	// Plans reading builds and post-builds from --cache-dir say the same,
	// notes included.
	_, want := r.diff(kplan, "main~1", "main", "text")
	cache := t.TempDir()
	for i := range 2 {
		if _, got := r.diff(kplan, "main~1", "main", "text", "--cache-dir", cache); got != want {
			t.Errorf("plan %d with --cache-dir:\n%s\nwant, as without it:\n%s", i+1, got, want)
		}
	}
}
