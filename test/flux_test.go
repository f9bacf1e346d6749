package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// fluxPlan is the part of kplan diff's JSON a Flux plan is checked on.
type fluxPlan struct {
	Summary  string
	Overlays []struct {
		Path, Status, File, Error string
		Added, Changed, Pruned    []string
		Fields                    map[string][]struct {
			Path     string
			Old, New any // typed values
		}
		Notes []string
	}
	Unread []struct{ Path, Hint string }
	Work   struct{ Overlays, Skipped int }
}

// A Flux repository (testdata/flux-layout) planned by kplan diff: each
// Flux Kustomization is a target named namespace/name; a change to the
// component the apps share through spec.components plans the change in
// every app, in its targetNamespace, with its substituted name; a change
// to one app's manifest plans that app alone; a file nothing reads is
// listed as unread, never a bare "no change".
func TestFluxRepositoryPlan(t *testing.T) {
	kplan := buildKplan(t)
	fx := gittest.NewFixture(t, "../testdata/flux-layout")
	dir := fx.Dir
	fx.Edit("components/backup/pvc.yaml", "1Gi", "2Gi")
	fx.Edit("apps/podinfo/app/deployment.yaml", "replicas: 1", "replicas: 3")
	fx.Edit("apps/unused/settings.yaml", "key: value", "key: other")

	diff := func(t *testing.T, base, head string, args ...string) fluxPlan {
		t.Helper()
		cmd := exec.Command(kplan, append([]string{"diff", "-C", dir, "--base", base, "--head", head, "--format", "json"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
		}
		var p fluxPlan
		if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
			t.Fatalf("%v\n%s", err, stdout.String())
		}
		return p
	}
	changed := func(p fluxPlan) map[string][]string {
		out := map[string][]string{}
		for _, o := range p.Overlays {
			if o.Error != "" {
				t.Errorf("%s: %s", o.Path, o.Error)
			}
			if o.Status != "unchanged" {
				out[o.Path] = append(append(append([]string{}, o.Added...), o.Changed...), o.Pruned...)
			}
		}
		return out
	}

	t.Run("shared component", func(t *testing.T) {
		p := diff(t, "main~3", "main~2")
		got := changed(p)
		want := map[string][]string{
			"flux-system/podinfo": {"~G_v1_PersistentVolumeClaim|podinfo|podinfo-backup"},
			"flux-system/echo":    {"~G_v1_PersistentVolumeClaim|echo|dev-echo-backup"},
		}
		if len(got) != len(want) {
			t.Errorf("changed targets %v, want %v", got, want)
		}
		for id, keys := range want {
			if !slices.Equal(got[id], keys) {
				t.Errorf("%s changes %v, want %v", id, got[id], keys)
			}
		}
		var ids []string
		for _, o := range p.Overlays {
			ids = append(ids, o.Path)
			if o.Path == "flux-system/podinfo" && o.File != "apps/podinfo/ks.yaml" {
				t.Errorf("podinfo's file %q, want the file declaring it", o.File)
			}
			if o.Path == "flux-system/echo" && !slices.ContainsFunc(o.Notes, func(n string) bool {
				return strings.HasPrefix(n, "Flux: HelmRelease echo/dev-echo-redis is not rendered")
			}) {
				t.Errorf("echo's notes %q: its HelmRelease must be listed as not rendered", o.Notes)
			}
		}
		for _, id := range []string{"flux-system/flux-system", "flux-system/apps", "flux-system/podinfo", "flux-system/echo"} {
			if !slices.Contains(ids, id) {
				t.Errorf("no target %s in %v", id, ids)
			}
		}
		for _, o := range p.Overlays {
			if strings.HasPrefix(o.Path, "apps/") || strings.HasPrefix(o.Path, "components/") {
				t.Errorf("the directory %s is planned on its own; Flux builds it in a target", o.Path)
			}
		}
		if len(p.Unread) != 0 {
			t.Errorf("unread %v: the component is read", p.Unread)
		}
	})

	t.Run("one app", func(t *testing.T) {
		p := diff(t, "main~2", "main~1")
		got := changed(p)
		if len(got) != 1 || !slices.Equal(got["flux-system/podinfo"], []string{"apps_v1_Deployment|podinfo|podinfo"}) {
			t.Errorf("changed %v, want podinfo's Deployment only", got)
		}
		if p.Work.Skipped == 0 {
			t.Errorf("work %+v: echo cannot change and is not built", p.Work)
		}
	})

	t.Run("unread file", func(t *testing.T) {
		p := diff(t, "main~1", "main")
		if got := changed(p); len(got) != 0 {
			t.Errorf("changed %v, want none", got)
		}
		if len(p.Unread) != 1 || p.Unread[0].Path != "apps/unused/settings.yaml" {
			t.Errorf("unread %+v, want apps/unused/settings.yaml", p.Unread)
		}
		if !strings.Contains(p.Summary, "1 changed file no overlay reads") {
			t.Errorf("summary %q: must say a changed file is read by nothing", p.Summary)
		}
	})

	t.Run("flux off", func(t *testing.T) {
		noFlux := func(p fluxPlan, how string) {
			t.Helper()
			if len(p.Overlays) == 0 {
				t.Errorf("%s: no overlays planned", how)
			}
			for _, o := range p.Overlays {
				if strings.HasPrefix(o.Path, "flux-system/") {
					t.Errorf("%s plans the Flux target %s", how, o.Path)
				}
			}
		}
		noFlux(diff(t, "main~3", "main~2", "--flux=false"), "--flux=false")
		git(t, dir, "checkout", "-q", "-b", "no-flux", "main~2")
		gittest.Write(t, dir, map[string]string{".kplan.yaml": "flux: false\n"})
		git(t, dir, "add", ".kplan.yaml")
		git(t, dir, "commit", "-qm", "flux off")
		noFlux(diff(t, "main~3", "no-flux"), ".kplan.yaml flux: false")
	})
}
