package flux

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// layout is testdata/flux-layout: a bootstrap Kustomization (flux-system)
// applying ./clusters/dev, whose apps Kustomization applies one
// Kustomization per app, with defaults patched in.
func layout(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.FromFS(os.DirFS("../../testdata/flux-layout"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func build(t *testing.T, s *snapshot.Snapshot) *Result {
	t.Helper()
	res, err := New(Options{Scratch: t.TempDir()}).Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func find(objs []*yaml.RNode, kind, name string) *yaml.RNode {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func field(t *testing.T, o *yaml.RNode, p ...string) string {
	t.Helper()
	n, err := o.Pipe(yaml.Lookup(p...))
	if err != nil || n == nil {
		return ""
	}
	return yaml.GetValue(n)
}

func TestBuildFluxLayout(t *testing.T) {
	res := build(t, layout(t))
	var ids []string
	for _, tg := range res.Targets {
		ids = append(ids, tg.ID())
		if tg.Err != nil {
			t.Errorf("%s: %v", tg.ID(), tg.Err)
		}
	}
	want := []string{"flux-system/apps", "flux-system/echo", "flux-system/flux-system", "flux-system/podinfo"}
	if !slices.Equal(ids, want) {
		t.Fatalf("targets %v, want %v", ids, want)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].ID != "flux-system/echo-dashboards" || !strings.Contains(res.Skipped[0].Reason, "OCIRepository") {
		t.Errorf("skipped %+v, want echo-dashboards (its source is an OCIRepository)", res.Skipped)
	}
	if p := res.Target("flux-system/podinfo").Parent; p != "flux-system/apps" {
		t.Errorf("podinfo's parent %q, want flux-system/apps", p)
	}

	tests := []struct {
		target, kind, name, ns string
		fields                 map[string]string // dotted path -> value
	}{
		// targetNamespace, ${APP} from postBuild.substitute and ${DOMAIN}
		// from the in-repo ConfigMap cluster-settings.
		{"flux-system/podinfo", "Deployment", "podinfo", "podinfo", map[string]string{
			"metadata.annotations.url":      "https://podinfo.dev.example.test",
			"spec.selector.matchLabels.app": "podinfo",
			// commonMetadata patched into every app by the apps Kustomization
			"metadata.labels.cluster":                               "dev",
			"metadata.labels.kustomize.toolkit.fluxcd.io/name":      "podinfo",
			"metadata.labels.kustomize.toolkit.fluxcd.io/namespace": "flux-system",
		}},
		// the shared component from spec.components, substituted per app
		{"flux-system/podinfo", "PersistentVolumeClaim", "podinfo-backup", "podinfo", nil},
		// namePrefix, images and an inline JSON6902 patch; the path has no
		// kustomization.yaml, so Flux lists its manifests
		{"flux-system/echo", "Deployment", "dev-echo", "echo", map[string]string{
			"spec.replicas":           "2",
			"metadata.labels.cluster": "dev",
		}},
		{"flux-system/echo", "PersistentVolumeClaim", "dev-echo-backup", "echo", nil},
		{"flux-system/echo", "HelmRelease", "dev-echo-redis", "echo", nil},
		// the cluster's own objects, and the child Kustomizations as applied
		{"flux-system/flux-system", "ConfigMap", "cluster-settings", "flux-system", map[string]string{"data.DOMAIN": "dev.example.test"}},
		{"flux-system/apps", "Kustomization", "podinfo", "flux-system", map[string]string{"spec.commonMetadata.labels.cluster": "dev"}},
	}
	for _, tc := range tests {
		tg := res.Target(tc.target)
		o := find(tg.Objects, tc.kind, tc.name)
		if o == nil {
			var have []string
			for _, o := range tg.Objects {
				have = append(have, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
			t.Errorf("%s: no %s %s; has %v", tc.target, tc.kind, tc.name, have)
			continue
		}
		if o.GetNamespace() != tc.ns {
			t.Errorf("%s: %s %s in namespace %q, want %q", tc.target, tc.kind, tc.name, o.GetNamespace(), tc.ns)
		}
		for p, want := range tc.fields {
			parts := strings.Split(p, ".")
			if strings.HasPrefix(p, "metadata.labels.kustomize.toolkit.fluxcd.io/") {
				parts = []string{"metadata", "labels", strings.TrimPrefix(p, "metadata.labels.")}
			}
			if got := field(t, o, parts...); got != want {
				t.Errorf("%s: %s %s %s = %q, want %q", tc.target, tc.kind, tc.name, p, got, want)
			}
		}
	}
	echo := res.Target("flux-system/echo")
	img := field(t, find(echo.Objects, "Deployment", "dev-echo"), "spec", "template", "spec", "containers", "[name=app]", "image")
	if img != "mendhak/http-https-echo:35" {
		t.Errorf("echo image %q, want the Kustomization's images newTag 35", img)
	}
	if len(echo.NotRendered) != 1 || !strings.HasPrefix(echo.NotRendered[0], "HelmRelease echo/dev-echo-redis is not rendered") {
		t.Errorf("echo not rendered %v, want its HelmRelease", echo.NotRendered)
	}
	if len(echo.Notes) != 0 {
		t.Errorf("echo notes %v: a missing optional substituteFrom is skipped silently, as Flux does", echo.Notes)
	}
}

func TestClosureOfFluxTargets(t *testing.T) {
	res := build(t, layout(t))
	tests := []struct {
		target string
		reads  []string
		not    []string
	}{
		{"flux-system/podinfo",
			[]string{"apps/podinfo/ks.yaml", "apps/podinfo/app/deployment.yaml", "components/backup/pvc.yaml",
				"apps/kustomization.yaml",            // sets its namespace
				"clusters/dev/apps.yaml",             // its parent patches its spec
				"clusters/dev/cluster-settings.yaml", // substituteFrom
			},
			[]string{"apps/echo/app/deployment.yaml", "apps/unused/settings.yaml"}},
		{"flux-system/flux-system",
			// generated: the manifests it lists, the build of the directory
			// with a kustomization it lists, a kustomization that may appear
			[]string{"clusters/dev/apps.yaml", "clusters/dev/cluster-settings.yaml", "clusters/dev/flux-system/gotk-sync.yaml", "clusters/dev/kustomization.yaml"},
			[]string{"apps/podinfo/ks.yaml", "apps/kustomization.yaml"}},
		{"flux-system/echo",
			// generated kustomization: the path's whole tree counts
			[]string{"apps/echo/ks.yaml", "apps/echo/app/deployment.yaml", "apps/echo/app/helmrelease.yaml", "apps/echo/app/kustomization.yaml", "components/backup/pvc.yaml"},
			[]string{"apps/podinfo/app/deployment.yaml", "clusters/dev/cluster-settings.yaml"}},
	}
	for _, tc := range tests {
		c := res.Target(tc.target).Closure
		for _, p := range tc.reads {
			if !slices.Contains(c.Paths, p) {
				t.Errorf("%s: closure lacks %s", tc.target, p)
			}
		}
		for _, p := range tc.not {
			if slices.Contains(c.Paths, p) {
				t.Errorf("%s: closure holds %s", tc.target, p)
			}
		}
	}
}

// layoutWith is the layout with some files replaced.
func layoutWith(t *testing.T, files map[string]string) *snapshot.Snapshot {
	t.Helper()
	all := testkit.Files(t, "../../testdata/flux-layout")
	maps.Copy(all, files)
	return testkit.Snapshot(t, "head", all)
}

func TestPlanDefersWhatTheChangeCannotAffect(t *testing.T) {
	pvc, err := os.ReadFile("../../testdata/flux-layout/components/backup/pvc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := os.ReadFile("../../testdata/flux-layout/apps/podinfo/app/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	settings, err := os.ReadFile("../../testdata/flux-layout/clusters/dev/cluster-settings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		files   map[string]string
		built   []string          // on both sides; the others deferred on both
		changed map[string]string // target -> an object that differs
	}{
		{"the shared component changes every app using it",
			map[string]string{"components/backup/pvc.yaml": strings.Replace(string(pvc), "1Gi", "2Gi", 1)},
			[]string{"flux-system/apps", "flux-system/echo", "flux-system/flux-system", "flux-system/podinfo"},
			map[string]string{"flux-system/podinfo": "podinfo-backup", "flux-system/echo": "dev-echo-backup"}},
		{"one app's manifest defers the other app",
			map[string]string{"apps/podinfo/app/deployment.yaml": strings.Replace(string(deploy), "replicas: 1", "replicas: 3", 1)},
			[]string{"flux-system/apps", "flux-system/flux-system", "flux-system/podinfo"},
			map[string]string{"flux-system/podinfo": "podinfo"}},
		{"a substituteFrom ConfigMap changes the app substituting from it",
			map[string]string{"clusters/dev/cluster-settings.yaml": strings.Replace(string(settings), "dev.example.test", "dev.example.org", 1)},
			[]string{"flux-system/apps", "flux-system/flux-system", "flux-system/podinfo"},
			map[string]string{"flux-system/podinfo": "podinfo"}},
		{"a file nothing reads defers every app",
			map[string]string{"apps/unused/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unused\n"},
			[]string{"flux-system/apps", "flux-system/flux-system"},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, head := layout(t), layoutWith(t, tc.files)
			res, err := New(Options{Scratch: t.TempDir()}).Plan(context.Background(), base, head, snapshot.Changed(base.Index, head.Index))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				var built []string
				for _, tg := range r.Targets {
					if tg.Err != nil {
						t.Errorf("side %d %s: %v", i, tg.ID(), tg.Err)
					}
					if !tg.Deferred {
						built = append(built, tg.ID())
					}
				}
				if !slices.Equal(built, tc.built) {
					t.Errorf("side %d built %v, want %v", i, built, tc.built)
				}
			}
			for id, name := range tc.changed {
				b, h := res[0].Target(id), res[1].Target(id)
				var bo, ho string
				for _, o := range b.Objects {
					if o.GetName() == name {
						bo = o.MustString()
					}
				}
				for _, o := range h.Objects {
					if o.GetName() == name {
						ho = o.MustString()
					}
				}
				if bo == "" || bo == ho {
					t.Errorf("%s: %s does not change:\n%s", id, name, ho)
				}
			}
		})
	}
}
