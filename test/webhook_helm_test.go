package test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/test/gittest"
)

// A target with enableHelm deploys the objects of the charts its overlay
// inflates, rendered by the helm on the webhook's PATH as kplan diff
// --enable-helm renders them for the plan.
func TestWebhookDeploysHelmCharts(t *testing.T) {
	t.Parallel()
	bin := testhelm.Dir(t)
	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            enableHelm: true`)
	e.env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	e.commit("a")
	gittest.Write(t, e.repo, map[string]string{
		"app/charts/c/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"app/charts/c/values.yaml":       "size: small\n",
		"app/charts/c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\ndata:\n  size: {{ .Values.size | quote }}\n",
		"app/kustomization.yaml":         "namespace: hook\nresources: [ns.yaml, rg.yaml, a.yaml]\nhelmCharts:\n- {name: c, releaseName: charted, namespace: hook, valuesInline: {size: large}}\n",
	})
	git(t, e.repo, "add", "-A")
	git(t, e.repo, "commit", "-qm", "a chart")
	sha := git(t, e.repo, "rev-parse", "HEAD")
	e.start()
	if code := e.send("push", pushPayload(t, hookRepo, strings.Repeat("0", 40), sha), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha)
	eq(t, "ConfigMaps with the chart", e.configMaps(), []string{"a", "charted"})
	u, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Get(context.Background(), "charted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "data", "size"); v != "large" {
		t.Errorf("the chart's ConfigMap has size %q, want large (valuesInline)", v)
	}
}
