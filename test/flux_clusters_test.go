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
// substituteFrom, and the ResourceSet is rendered as flux-operator
// renders it (resourceset.go), not listed as not rendered.
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
	if slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "ResourceSet flux-system/previews") }) {
		t.Errorf("flux-system/flux-system notes %q: the ResourceSet is rendered (its Namespace planned), not listed", notes)
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

// Leftover `flux bootstrap` files beside a FluxInstance
// (testdata/flux-operator, with clusters/legacy: a gotk-sync.yaml whose
// flux-system Kustomization applies its own directory, and an apps
// Kustomization there) are an entry point nothing references: the plan
// names it, on the FluxInstance's cluster, and does not plan it as a
// second cluster doubling every target; until .kplan.yaml declares it.
func TestFluxPhantomEntryBesideFluxInstance(t *testing.T) {
	kplan := buildKplan(t)
	r := newFluxRepo(t, "flux-operator")
	gittest.Write(t, r.Dir, map[string]string{
		"clusters/legacy/flux-system/gotk-sync.yaml": `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  ref:
    branch: main
  url: https://example.invalid/home-ops.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/legacy
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`,
		"clusters/legacy/flux-system/kustomization.yaml": "resources:\n  - gotk-sync.yaml\n",
		"clusters/legacy/apps.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./apps/home
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`,
	})
	gittest.Git(t, r.Dir, "add", "-A")
	gittest.Git(t, r.Dir, "commit", "-qm", "leftover bootstrap files")
	r.Edit("apps/home/podinfo/ingress.yaml", "number: 9898", "number: 9899")

	targets := func(p fluxPlan) (ids []string, notes map[string][]string) {
		notes = map[string][]string{}
		for _, o := range p.Overlays {
			ids = append(ids, o.Path)
			notes[o.Path] = o.Notes
			if o.Error != "" {
				t.Errorf("%s: %s", o.Path, o.Error)
			}
		}
		slices.Sort(ids)
		return ids, notes
	}
	for _, full := range []bool{false, true} {
		args := []string{}
		if full {
			args = append(args, "--full")
		}
		p, _ := r.diff(kplan, "main~1", "main", "json", args...)
		ids, notes := targets(p)
		// The leftover directory is no Flux target's: planned as a plain
		// kustomize overlay, as bootstrap/ directories are.
		ids = slices.DeleteFunc(ids, func(id string) bool { return id == "clusters/legacy/flux-system" })
		if want := []string{"flux-system/apps", "flux-system/flux-system"}; !slices.Equal(ids, want) {
			t.Errorf("full=%v: targets %q, want the FluxInstance's cluster alone %q", full, ids, want)
		}
		if !slices.ContainsFunc(notes["flux-system/flux-system"], func(n string) bool {
			return strings.Contains(n, "clusters/legacy") && strings.Contains(n, "unreferenced") && strings.Contains(n, "fluxClusters")
		}) {
			t.Errorf("full=%v: flux-system/flux-system's notes %q must name clusters/legacy as an unreferenced entry point", full, notes["flux-system/flux-system"])
		}
		if f := fieldsOf(p, "flux-system/apps", "networking.k8s.io_v1_Ingress|podinfo|podinfo"); len(f) == 0 && !full {
			t.Errorf("the port change is not planned: %+v", p.Overlays)
		}
	}

	// Declared in .kplan.yaml, it is a cluster.
	gittest.Write(t, r.Dir, map[string]string{".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\nfluxClusters:\n  home: clusters/home\n  legacy: clusters/legacy\n"})
	gittest.Git(t, r.Dir, "add", "-A")
	gittest.Git(t, r.Dir, "commit", "-qm", "declare both clusters")
	r.Edit("apps/home/podinfo/ingress.yaml", "number: 9899", "number: 9900")
	p, _ := r.diff(kplan, "main~1", "main", "json")
	ids, _ := targets(p)
	want := []string{"home: flux-system/apps", "home: flux-system/flux-system", "legacy: flux-system/apps", "legacy: flux-system/flux-system"}
	if !slices.Equal(ids, want) {
		t.Errorf("targets %q, want both declared clusters %q", ids, want)
	}
}
