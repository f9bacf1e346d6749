package plan

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPlanOnlyBinariesDoNotLinkTheApplier: the plan, and the Action
// binary built on it, only render and compare; they must not link
// cli-utils' applier and inventory clients, kubectl's command packages or
// a dynamic client of kplan's own. What linked them was a package of the
// deploy side imported where a pure one does (internal/declared).
// client-go's dynamic client still comes in through Flux's kustomize
// package (controller-runtime's client), and with kubectl's cmd/util
// through the Helm SDK (its engine's lookup and its kube client, which
// action.Install imports), which the Flux plan needs to render
// HelmReleases; no other package may bring them.
func TestPlanOnlyBinariesDoNotLinkTheApplier(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{".", "../../cmd/action", "../../cmd/kplan-gitlab"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		// What the Flux plan's libraries bring along, and only they.
		allowed := func(p string) bool {
			for _, prefix := range []string{"sigs.k8s.io/controller-runtime/", "helm.sh/helm/v3/", "k8s.io/cli-runtime/pkg/resource", "k8s.io/client-go/scale", "k8s.io/kubectl/pkg/cmd/util"} {
				if strings.HasPrefix(p, prefix) {
					return true
				}
			}
			return false
		}
		var dynamicBy []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			p, imports := fields[0], fields[1:]
			switch {
			case p == "sigs.k8s.io/cli-utils/pkg/apply", p == "sigs.k8s.io/cli-utils/pkg/inventory",
				p == "github.com/kplan-dev/kplan/internal/deploy":
				t.Errorf("go list -deps %s holds %s", pkg, p)
			case (slices.Contains(imports, "k8s.io/client-go/dynamic") || slices.Contains(imports, "k8s.io/kubectl/pkg/cmd/util")) && !allowed(p):
				dynamicBy = append(dynamicBy, p)
			}
		}
		if len(dynamicBy) > 0 {
			t.Errorf("in go list -deps %s, k8s.io/client-go/dynamic or kubectl's cmd/util is imported by %v", pkg, dynamicBy)
		}
	}
}
