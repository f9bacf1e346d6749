package plan

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPlanOnlyBinariesDoNotLinkTheApplier: the plan, and the Action
// binary built on it, only render and compare; they must not link
// cli-utils' applier and inventory clients, kubectl, Helm's cluster
// client, or a dynamic client of kplan's own. What linked them was a
// package of the deploy side imported where a pure one does
// (internal/declared), then Helm's install action and repository getters
// (internal/helm renders through Helm's engine, and
// internal/chartindex reads indexes, so that neither links them).
//
// client-go's dynamic package is still compiled in, imported by two
// libraries the Flux plan must use and never constructed by it: Helm's
// template engine (for its lookup function, which a client-only render
// leaves without a cluster) and controller-runtime's apiutil (through
// fluxcd/pkg/kustomize, kustomize-controller's own generator). Nothing
// else may import it.
func TestPlanOnlyBinariesDoNotLinkTheApplier(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{
		"sigs.k8s.io/cli-utils/pkg/apply", "sigs.k8s.io/cli-utils/pkg/inventory",
		"github.com/kplan-dev/kplan/internal/deploy",
		"k8s.io/kubectl/", "k8s.io/cli-runtime/",
		"helm.sh/helm/v3/pkg/action", "helm.sh/helm/v3/pkg/kube",
	}
	dynamicAllowed := []string{"helm.sh/helm/v3/pkg/engine", "sigs.k8s.io/controller-runtime/pkg/client/apiutil"}
	for _, pkg := range []string{".", "../../cmd/action", "../../cmd/kplan-gitlab"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var dynamicBy []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			p, imports := fields[0], fields[1:]
			for _, f := range forbidden {
				if p == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) || strings.HasPrefix(p, f+"/") {
					t.Errorf("go list -deps %s holds %s", pkg, p)
				}
			}
			if slices.Contains(imports, "k8s.io/client-go/dynamic") && !slices.Contains(dynamicAllowed, p) {
				dynamicBy = append(dynamicBy, p)
			}
		}
		if len(dynamicBy) > 0 {
			t.Errorf("in go list -deps %s, k8s.io/client-go/dynamic is imported by %v", pkg, dynamicBy)
		}
	}
}
