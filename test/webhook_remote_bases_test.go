package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// A target whose overlay uses a git remote base deploys the base at the
// ref the commit names when the target's remoteHosts name its server, as
// kplan diff and the Action render it; a bump of the base's ?ref= deploys
// the new version. The git-base cache stays bounded: a base no deploy
// used for longer than gitBasesMaxAge (7 days by default) is removed
// when the webhook starts.
func TestWebhookDeploysGitRemoteBases(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	up := gittest.NewUpstream(t, root, "org/base.git")
	var v1 string
	for _, v := range []struct{ version, tag string }{{"one", "v1"}, {"two", "v2"}} {
		c := up.Release(map[string]string{
			"app/kustomization.yaml": "resources: [cm.yaml]\n",
			"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {version: " + v.version + "}\n",
		}, v.tag)
		if v.tag == "v1" {
			v1 = c
		}
	}
	upstream := githttp.Serve(t, root, "")

	e := newHookEnvBranch(t, "1h", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            remoteHosts: ["127.0.0.1"]`)
	commit := func(ref string) string {
		e.commit("a")
		k := "namespace: hook\nresources:\n- ns.yaml\n- rg.yaml\n- a.yaml\n- " + upstream.URL + "/org/base.git//app?ref=" + ref + "\n"
		if err := os.WriteFile(filepath.Join(e.repo, "app", "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, e.repo, "commit", "-qam", "base at "+ref)
		return git(t, e.repo, "rev-parse", "HEAD")
	}
	version := func() string {
		u, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Get(context.Background(), "shared", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the remote base's ConfigMap: %v", err)
		}
		v, _, _ := unstructured.NestedString(u.Object, "data", "version")
		return v
	}

	sha1 := commit("v1")
	e.start()
	if code := e.send("push", pushPayload(t, hookRepo, strings.Repeat("0", 40), sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha1)
	eq(t, "ConfigMaps with the base at v1", e.configMaps(), []string{"a", "shared"})
	if v := version(); v != "one" {
		t.Errorf("the base at v1 deployed version %q, want one", v)
	}

	sha2 := commit("v2")
	if code := e.send("push", pushPayload(t, hookRepo, sha1, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha2)
	if v := version(); v != "two" {
		t.Errorf("the base bumped to v2 deployed version %q, want two", v)
	}

	// v1's tree, made to look unused for 8 days, goes when the webhook
	// starts again.
	trees, err := filepath.Glob(filepath.Join(e.state, "git-bases", "[0-9a-f]*", "trees", v1)) // the deployer's cache of the target
	if err != nil || len(trees) != 1 {
		t.Fatalf("the tree of v1 under stateDir: %v %v", trees, err)
	}
	old := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(trees[0], old, old); err != nil {
		t.Fatal(err)
	}
	killGroup(e.proc)
	e.proc.Wait()
	e.start()
	testkit.Eventually(t, "the tree of v1, unused for 8 days, removed", time.Minute, func() bool {
		_, err := os.Stat(trees[0])
		return os.IsNotExist(err)
	})
}

// The drift check and the live plan of a target whose overlay uses a git
// remote base render its deployed commit as its deploy did, the base
// fetched from the target's remoteHosts: a hand edit of an object the
// base holds is drift in both. (They rendered without git remote bases:
// every drift check of such a target failed, and its live plans said
// "drift not checked".) A pull request's head still renders with nothing
// fetched: here it vendors the base.
func TestWebhookGitRemoteBaseDriftAndLivePlan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	root := t.TempDir()
	up := gittest.NewUpstream(t, root, "org/base.git")
	base := map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {version: one}\n",
	}
	up.Release(base, "v1")
	upstream := githttp.Serve(t, root, "")

	e := newHookEnvBranch(t, "2s", `
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            prune: true
            remoteHosts: ["127.0.0.1"]`)
	e.commit("a")
	k := "namespace: hook\nresources:\n- ns.yaml\n- rg.yaml\n- a.yaml\n- " + upstream.URL + "/org/base.git//app?ref=v1\n"
	sha1 := e.write("base at v1", map[string]string{"app/kustomization.yaml": k})
	e.start()
	if code := e.send("push", pushPayload(t, hookRepo, zeroSHA, sha1), "", true); code != http.StatusAccepted {
		t.Fatalf("push: HTTP %d", code)
	}
	e.waitDeployed(sha1)
	testkit.Eventually(t, "a drift check of the deployed commit", time.Minute, func() bool { return e.metric(`kplan_drift_objects{target="prod"}`) == 0 })

	shared, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shared.Object["data"] = map[string]any{"version": "by hand"}
	if _, err := e.dyn.Resource(cmGVR).Namespace(hookNS).Update(ctx, shared, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the drift check to count the hand edit of the base's object", time.Minute, func() bool { return e.metric(`kplan_drift_objects{target="prod"}`) == 1 })

	head := e.pushPull(9, sha1, "vendor the base", map[string]string{
		"app/kustomization.yaml": "namespace: hook\nresources:\n- ns.yaml\n- rg.yaml\n- a.yaml\n- shared.yaml\n",
		"app/shared.yaml":        base["app/cm.yaml"],
	})
	if code := e.send("pull_request", prPayload(t, "opened", 9, head), "", true); code != http.StatusAccepted {
		t.Fatalf("opened: HTTP %d", code)
	}
	body := e.waitLiveComment(9, head)
	if r := row(body, "ConfigMap shared (hook)"); !strings.HasPrefix(r, "| ⚠️ configure (drift) |") || strings.Contains(body, "Drift not checked") {
		t.Errorf("the live plan does not show the hand edit of the base's object as drift:\n%s", body)
	}
}
