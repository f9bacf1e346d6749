// Command deploydemo shows a merge deploying, with nothing outside this
// machine: a kube-apiserver on loopback, a git repository served over
// HTTP, a stand-in for GitHub's API, and the real kplan-webhook receiving
// two signed push deliveries. Run it with `make demo-deploy`.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const secret, token = "demo-secret", "ghs_demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploydemo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "kplan-deploydemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	fmt.Println("starting etcd and kube-apiserver on loopback (the first run builds them: ~4 min)…")
	c, err := testcluster.StartContext(ctx)
	if err != nil {
		return err
	}
	defer c.Stop()
	repo := filepath.Join(tmp, "git", "octo", "config.git")
	sh := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=demo", "-c", "user.email=demo@kplan.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	commit := func(msg string, configMaps ...string) (string, error) {
		app := filepath.Join(repo, "app")
		os.RemoveAll(app)
		os.MkdirAll(app, 0o755)
		res := []string{"ns.yaml", "resourcegroup.yaml"}
		os.WriteFile(filepath.Join(app, "ns.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"), 0o644)
		os.WriteFile(filepath.Join(app, "resourcegroup.yaml"), []byte("apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory-00000001}\n"), 0o644)
		for _, cm := range configMaps {
			os.WriteFile(filepath.Join(app, cm+".yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+cm+"}\ndata: {owner: demo}\n"), 0o644)
			res = append(res, cm+".yaml")
		}
		os.WriteFile(filepath.Join(app, "kustomization.yaml"), []byte("namespace: shop\nresources: ["+strings.Join(res, ", ")+"]\n"), 0o644)
		if _, err := sh(repo, "add", "-A"); err != nil {
			return "", err
		}
		if out, err := sh(repo, "commit", "-qm", msg); err != nil {
			return "", fmt.Errorf("%v: %s", err, out)
		}
		return sh(repo, "rev-parse", "HEAD")
	}
	os.MkdirAll(repo, 0o755)
	if out, err := sh(repo, "init", "-q", "-b", "main"); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	gitSrv, err := githttp.New(filepath.Join(tmp, "git"), token)
	if err != nil {
		return err
	}
	defer gitSrv.Close()
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken(token, githubapi.Identity{Login: "kplan[bot]"})

	cfg := filepath.Join(tmp, "webhook.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
repositories:
  - name: octo/config
    cloneURL: %s/octo/config.git
    branches:
      - name: main
        targets:
          - name: shop
            overlay: app
            kubeconfig: %s
            reconcileTimeout: 30s
apiBaseURL: %s/
stateDir: %s
`, gitSrv.URL, c.Kubeconfig, gh.URL(), filepath.Join(tmp, "state"))), 0o644)
	bin := filepath.Join(tmp, "kplan-webhook")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/webhook").CombinedOutput(); err != nil {
		return fmt.Errorf("build kplan-webhook: %v\n%s", err, out)
	}
	hook := exec.Command(bin, "--config", cfg, "--listen", "127.0.0.1:18089")
	hook.Env = append(os.Environ(), "KPLAN_WEBHOOK_SECRET="+secret, "KPLAN_GITHUB_TOKEN="+token)
	// The webhook's JSON log would drown the story; it goes to a file.
	logPath := filepath.Join(tmp, "webhook.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	hook.Stdout, hook.Stderr = os.Stdout, logFile
	if err := hook.Start(); err != nil {
		return err
	}
	defer func() { hook.Process.Kill(); hook.Wait() }()
	time.Sleep(time.Second)

	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	prev := strings.Repeat("0", 40)
	for i, merge := range [][]string{{"cart", "checkout"}, {"cart", "payments"}} {
		sha, err := commit(fmt.Sprintf("merge %d", i+1), merge...)
		if err != nil {
			return err
		}
		fmt.Printf("\n== merge %d (%s): the overlay holds ConfigMaps %v; GitHub sends a signed push\n", i+1, sha[:7], merge)
		body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": prev, "after": sha,
			"repository": map[string]any{"full_name": "octo/config", "name": "config", "owner": map[string]any{"login": "octo"}}})
		prev = sha
		if err := deliver(body, fmt.Sprintf("demo-%d", i)); err != nil {
			return err
		}
		if err := waitDeployed(ctx, dyn, sha); err != nil {
			return err
		}
		l, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, o := range l.Items {
			if o.GetName() != "kube-root-ca.crt" {
				names = append(names, o.GetName())
			}
		}
		fmt.Printf("cluster namespace shop now holds ConfigMaps %v\n", names)
		for _, s := range gh.Statuses("octo", "config", sha) {
			fmt.Printf("commit status %s: %s — %s\n", s.Context, s.State, s.Description)
		}
	}
	return nil
}

func deliver(body []byte, id string) error {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:18089/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Printf("webhook answered HTTP %d\n", resp.StatusCode)
	return nil
}

func waitDeployed(ctx context.Context, dyn dynamic.Interface, sha string) error {
	rg := schema.GroupVersionResource{Group: "kpt.dev", Version: "v1alpha1", Resource: "resourcegroups"}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		u, err := dyn.Resource(rg).Namespace("shop").Get(ctx, "inventory-00000001", metav1.GetOptions{})
		if err == nil && u.GetAnnotations()[deploy.AnnotationSHA] == sha {
			fmt.Printf("deployed: %s is %s\n", sha[:7], u.GetAnnotations()[deploy.AnnotationOutcome])
			return nil
		}
	}
	return fmt.Errorf("%s was not deployed in time", sha[:7])
}
