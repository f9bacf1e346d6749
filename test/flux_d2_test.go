package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// flux-operator's d2 reference layout (fleet, infra, apps) in one
// repository (testdata/flux-d2): a FluxInstance syncs an OCIRepository
// whose artifact CI pushes from fleet/ (.kplan.yaml fluxArtifacts), the
// tenants Kustomization there applies ResourceSets whose inputs are
// inline and from a Static ResourceSetInputProvider, and what they make
// (each tenant's Namespace, OCIRepository and Flux Kustomization) is
// planned, each tenant's Kustomization a target built from the directory
// its OCIRepository's artifact is pushed from, substituting from the
// runtime ConfigMap the ResourceSet copies into its namespace
// (copyFrom). Each step is one commit,
// planned against the one before, changed-only as --full.
func TestFluxD2LayoutEndToEnd(t *testing.T) {
	kplan := buildKplan(t)
	r := newFluxRepo(t, "flux-d2")
	type target struct {
		keys  []string // added, changed and pruned
		notes []string // substrings of its notes
	}
	steps := []struct {
		name   string
		change func()
		want   map[string]target
	}{{
		name: "an app of a tenant the ResourceSet makes",
		change: func() {
			r.Replace("apps/frontend/staging/deployment.yaml", "replicas: 1", "replicas: 3")
		},
		want: map[string]target{"frontend/apps": {
			keys:  []string{"apps_v1_Deployment|frontend|frontend"},
			notes: []string{"its source OCIRepository frontend/apps pulls oci://registry.example.invalid/d2/apps/frontend, planned as built from this commit's apps/frontend"},
		}},
	}, {
		name: "the Static provider's tenant",
		change: func() {
			r.Replace("apps/backend/staging/deployment.yaml", "image: ghcr.io/example/backend:1.0.0", "image: ghcr.io/example/backend:1.1.0")
		},
		want: map[string]target{"backend/apps": {keys: []string{"apps_v1_Deployment|backend|backend"}}},
	}, {
		name: "a tenant added to the inline inputs",
		change: func() {
			r.Replace("fleet/tenants/apps.yaml", "    - tenant: \"frontend\"\n", "    - tenant: \"payments\"\n      tag: \"${ARTIFACT_TAG}\"\n      environment: \"${ENVIRONMENT}\"\n    - tenant: \"frontend\"\n")
		},
		want: map[string]target{"flux-system/tenants": {
			keys: []string{
				"kustomize.toolkit.fluxcd.io_v1_Kustomization|payments|apps",
				"source.toolkit.fluxcd.io_v1_OCIRepository|payments|apps",
				"~G_v1_ConfigMap|payments|flux-runtime-info",
				"~G_v1_Namespace||payments",
				"~G_v1_ServiceAccount|payments|flux",
				"fluxcd.controlplane.io_v1_ResourceSet|flux-system|apps",
			},
			notes: []string{
				"Kustomization payments/apps is not planned: its source OCIRepository payments/apps is an artifact .kplan.yaml's fluxArtifacts does not map",
				"ResourceSet flux-system/apps waits for ResourceSet flux-system/policies (ready)",
				"ResourceSetInputProvider flux-system/pull-requests (type GitHubPullRequest: flux-operator asks https://github.com/example/d2-apps for its inputs at run time",
			},
		}},
	}, {
		name: "the template, in every tenant",
		change: func() {
			r.Replace("fleet/tenants/apps.yaml", "          toolkit.fluxcd.io/role: \"tenant\"\n", "          toolkit.fluxcd.io/role: \"tenant\"\n          team: << inputs.tenant | upper >>\n")
		},
		want: map[string]target{"flux-system/tenants": {keys: []string{
			"fluxcd.controlplane.io_v1_ResourceSet|flux-system|apps",
			"~G_v1_Namespace||backend",
			"~G_v1_Namespace||frontend",
			"~G_v1_Namespace||payments",
		}}},
	}, {
		// The runtime ConfigMap reaches each tenant through the
		// ResourceSet's copyFrom, and its app through substitution.
		name: "the cluster name, copied into the tenants",
		change: func() {
			r.Replace("fleet/clusters/staging/flux-system/runtime-info.yaml", "CLUSTER_NAME: staging-1", "CLUSTER_NAME: staging-2")
		},
		want: map[string]target{
			"flux-system/flux-system": {keys: []string{"~G_v1_ConfigMap|flux-system|flux-runtime-info"}},
			"flux-system/tenants": {keys: []string{
				"~G_v1_ConfigMap|backend|flux-runtime-info",
				"~G_v1_ConfigMap|frontend|flux-runtime-info",
				"~G_v1_ConfigMap|payments|flux-runtime-info",
			}},
			"frontend/apps": {keys: []string{"apps_v1_Deployment|frontend|frontend"}},
		},
	}, {
		// The runtime ConfigMap feeds the inputs through substitution:
		// every tenant's Kustomization now builds another directory.
		name: "the environment, through substitution into the inputs",
		change: func() {
			gittest.Write(t, r.Dir, map[string]string{
				"apps/frontend/production/kustomization.yaml": "resources:\n  - ../staging\n",
				"apps/backend/production/kustomization.yaml":  "resources:\n  - ../staging\n",
			})
			r.Replace("fleet/clusters/staging/flux-system/runtime-info.yaml", "ENVIRONMENT: staging", "ENVIRONMENT: production")
		},
		want: map[string]target{
			"flux-system/flux-system": {keys: []string{"~G_v1_ConfigMap|flux-system|flux-runtime-info"}},
			"flux-system/tenants": {keys: []string{
				"~G_v1_ConfigMap|backend|flux-runtime-info",
				"~G_v1_ConfigMap|frontend|flux-runtime-info",
				"~G_v1_ConfigMap|payments|flux-runtime-info",
				"kustomize.toolkit.fluxcd.io_v1_Kustomization|backend|apps",
				"kustomize.toolkit.fluxcd.io_v1_Kustomization|frontend|apps",
				"kustomize.toolkit.fluxcd.io_v1_Kustomization|payments|apps",
				"fluxcd.controlplane.io_v1_ResourceSet|flux-system|apps",
				"fluxcd.controlplane.io_v1_ResourceSetInputProvider|flux-system|backend",
				"fluxcd.controlplane.io_v1_ResourceSetInputProvider|flux-system|pull-requests",
			}},
		},
	}}
	for _, st := range steps {
		st.change()
		gittest.Git(t, r.Dir, "add", "-A")
		gittest.Git(t, r.Dir, "commit", "-qm", st.name)
		t.Run(st.name, func(t *testing.T) {
			for _, mode := range [][]string{nil, {"--full"}} {
				p, _ := r.diff(kplan, "HEAD~1", "HEAD", "json", mode...)
				got := map[string]target{}
				for _, o := range p.Overlays {
					if o.Error != "" {
						t.Errorf("%v: %s fails: %s", mode, o.Path, o.Error)
					}
					if keys := slices.Concat(o.Added, o.Changed, o.Pruned); len(keys) > 0 {
						got[o.Path] = target{keys: keys, notes: o.Notes}
					}
				}
				for id, w := range st.want {
					g := got[id]
					slices.Sort(g.keys)
					if want := slices.Sorted(slices.Values(w.keys)); !slices.Equal(g.keys, want) {
						t.Errorf("%v: %s plans %q, want %q", mode, id, g.keys, want)
					}
					for _, n := range w.notes {
						if !slices.ContainsFunc(g.notes, func(s string) bool { return strings.Contains(s, n) }) {
							t.Errorf("%v: %s notes %q, want one with %q", mode, id, g.notes, n)
						}
					}
				}
				if len(got) != len(st.want) {
					t.Errorf("%v: changed targets %v, want those of %v", mode, got, st.want)
				}
			}
		})
	}
}
