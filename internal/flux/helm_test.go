package flux

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/helm"
	"github.com/kplan-dev/kplan/internal/kubeversion"
)

// How a release's render reaches its target: rendered objects join it; a
// release kplan cannot render is a reason, and its objects are left out
// on the side that rendered too (no side shows what the other cannot);
// any other failure fails the target on its side, so that no failed
// release reads as "no change".
func TestApplyReleases(t *testing.T) {
	obj := func(name string) *yaml.RNode {
		return yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: ns}\n")
	}
	unavailable := &helm.UnavailableError{Release: "ns/app", Reason: "cannot be fetched"}
	for _, tc := range []struct {
		name        string
		rr          releaseRender
		otherCannot bool
		objects     []string
		notRendered string
		err         string
	}{
		{name: "rendered", rr: releaseRender{id: "ns/app", objects: []*yaml.RNode{obj("rendered")}}, objects: []string{"own", "rendered"}},
		{name: "unavailable", rr: releaseRender{id: "ns/app", err: unavailable}, objects: []string{"own"}, notRendered: "HelmRelease ns/app is not rendered: cannot be fetched"},
		{name: "unavailable on the other side", rr: releaseRender{id: "ns/app", objects: []*yaml.RNode{obj("rendered")}}, otherCannot: true, objects: []string{"own"},
			notRendered: "HelmRelease ns/app is not rendered: on the other side of the plan it cannot be"},
		{name: "fails", rr: releaseRender{id: "ns/app", err: errors.New("HelmRelease ns/app: template: boom")}, err: "Flux Kustomization flux-system/t: HelmRelease ns/app: template: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &Target{Kustomization: &Kustomization{Namespace: "flux-system", Name: "t"}, Objects: []*yaml.RNode{obj("own")}}
			res := &Result{Targets: []*Target{tg}}
			applyReleases(res, map[string][]releaseRender{"flux-system/t": {tc.rr}}, func(target, rel string) (string, bool) {
				return "it cannot be", tc.otherCannot && target == "flux-system/t" && rel == "ns/app"
			}, func(string) kubeversion.Capabilities { return kubeversion.Capabilities{Version: "v1.30"} })
			if tg.Kubernetes == nil || tg.Kubernetes.Version != "v1.30" {
				t.Errorf("the target says its charts were templated for %v, want its cluster's v1.30", tg.Kubernetes)
			}
			var names []string
			for _, o := range tg.Objects {
				names = append(names, o.GetName())
			}
			if !slices.Equal(names, tc.objects) {
				t.Errorf("objects %v, want %v", names, tc.objects)
			}
			switch {
			case tc.notRendered == "" && len(tg.NotRendered) > 0:
				t.Errorf("not rendered %v, want none", tg.NotRendered)
			case tc.notRendered != "" && (len(tg.NotRendered) != 1 || !strings.HasPrefix(tg.NotRendered[0], tc.notRendered)):
				t.Errorf("not rendered %v, want %q", tg.NotRendered, tc.notRendered)
			}
			got := ""
			if tg.Err != nil {
				got = tg.Err.Error()
			}
			if got != tc.err {
				t.Errorf("error %q, want %q", got, tc.err)
			}
		})
	}
}
