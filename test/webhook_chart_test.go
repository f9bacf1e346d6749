package test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const chartDir = "../charts/kplan-webhook"

// helmTemplate renders the webhook's chart as `helm template` does, with
// the values given as YAML; the objects by kind/name.
func helmTemplate(t *testing.T, values string) (map[string]*unstructured.Unstructured, string, error) {
	t.Helper()
	return helmTemplateOf(t, releasedChart(t), values)
}

// releaseVersion is the version releasedChart packages the chart at.
const releaseVersion = "9.8.7"

var released struct {
	once sync.Once
	path string
	err  error
}

// releasedChart is the chart as the release packages it (version and
// appVersion set to the tag's), built once per test run.
func releasedChart(t *testing.T) string {
	t.Helper()
	released.once.Do(func() {
		dir, err := os.MkdirTemp("", "kplan-chart-")
		if err != nil {
			released.err = err
			return
		}
		out, err := exec.Command(filepath.Join(testhelm.Dir(t), "helm"), "package", chartDir, "--version", releaseVersion, "--app-version", releaseVersion, "-d", dir).CombinedOutput()
		if err != nil {
			released.err = fmt.Errorf("helm package: %v\n%s", err, out)
			return
		}
		released.path = filepath.Join(dir, "kplan-webhook-"+releaseVersion+".tgz")
	})
	if released.err != nil {
		t.Fatal(released.err)
	}
	return released.path
}

// helmTemplateOf renders chart (a directory or a packaged chart).
func helmTemplateOf(t *testing.T, chart, values string) (map[string]*unstructured.Unstructured, string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testhelm.Dir(t), "helm"), "template", "kplan-webhook", chart, "--namespace", "kplan-system", "-f", "-")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(values), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("%v: %s", err, stderr.String())
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		var m map[string]any
		if err := sigsyaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("helm template printed YAML that does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	return objs, stdout.String(), nil
}

func chartDeployment(t *testing.T, objs map[string]*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := objs["Deployment/kplan-webhook"]
	if u == nil {
		t.Fatalf("no Deployment kplan-webhook among %v", keysOf(objs))
	}
	return convert[appsv1.Deployment](t, u)
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	return out
}

// The webhook's Helm chart, as `helm template` renders it with the values
// an operator sets: the image of the chart's release, the GitHub App or a
// token, replicas with leader election, metrics and the NetworkPolicy,
// and a configuration the webhook loads.
func TestWebhookChartTemplates(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Version, AppVersion string }
	if err := sigsyaml.Unmarshal(chart, &meta); err != nil {
		t.Fatal(err)
	}

	t.Run("helm lint", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(testhelm.Dir(t), "helm"), "lint", "--strict", chartDir, "--set", "github.webhookSecret=s,github.token=t").CombinedOutput()
		if err != nil {
			t.Errorf("helm lint --strict: %v\n%s", err, out)
		}
	})

	t.Run("chart credentials", func(t *testing.T) {
		objs, _, err := helmTemplate(t, "github: {webhookSecret: s, token: t}\nchartCredentials: {existingSecret: charts-login}\n")
		if err != nil {
			t.Fatal(err)
		}
		spec := chartDeployment(t, objs).Spec.Template.Spec
		env := envOf(spec.Containers[0])
		mounted := false
		for _, m := range spec.Containers[0].VolumeMounts {
			mounted = mounted || (m.Name == "chart-credentials" && m.MountPath == "/var/run/secrets/kplan-charts")
		}
		secret := false
		for _, v := range spec.Volumes {
			secret = secret || (v.Name == "chart-credentials" && v.Secret != nil && v.Secret.SecretName == "charts-login")
		}
		if env["HELM_REGISTRY_CONFIG"] != "/var/run/secrets/kplan-charts/config.json" || env["HELM_REPOSITORY_CONFIG"] != "/var/run/secrets/kplan-charts/repositories.yaml" || !mounted || !secret {
			t.Errorf("env %v, mounted %v, volume %v: want the Secret charts-login mounted and Helm's variables naming its files", env, mounted, secret)
		}
	})

	t.Run("from a clone: no image v0.0.0, a clear error", func(t *testing.T) {
		if meta.AppVersion != "0.0.0" {
			t.Skipf("Chart.yaml's appVersion is %s: the release sets it", meta.AppVersion)
		}
		_, _, err := helmTemplateOf(t, chartDir, "github: {webhookSecret: s3cret, token: ghs_x}\n")
		if err == nil || !strings.Contains(err.Error(), "image.tag") || !strings.Contains(err.Error(), "Install from a clone") {
			t.Errorf("helm template of the clone with no image.tag: %v; want an error naming image.tag and the docs", err)
		}
		objs, _, err := helmTemplateOf(t, chartDir, "github: {webhookSecret: s3cret, token: ghs_x}\nimage: {repository: registry.example/me/kplan, tag: dev-1}\n")
		if err != nil {
			t.Fatal(err)
		}
		if c := chartDeployment(t, objs).Spec.Template.Spec.Containers[0]; c.Image != "registry.example/me/kplan:dev-1" {
			t.Errorf("image %s, want the one built from the clone", c.Image)
		}
	})

	t.Run("values the schema refuses", func(t *testing.T) {
		for values, want := range map[string]string{
			"replicas: two\n":                         "/replicas",
			"rabc: {clusterAdmin: false}\n":           "'rabc' not allowed",
			"image: {tga: v1.0.0}\n":                  "'tga' not allowed",
			"kubeconfigSecrets: {prod: [a]}\n":        "/kubeconfigSecrets/prod",
			"serviceAccount: {annotations: {a: 1}}\n": "/serviceAccount/annotations/a",
			"chartCredentials: {existingSecret: 1}\n": "/chartCredentials/existingSecret",
		} {
			_, _, err := helmTemplate(t, "github: {webhookSecret: s3cret, token: ghs_x}\n"+values)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("values %q: %v; want refused naming %s", values, err, want)
			}
		}
	})

	t.Run("remote clusters' kubeconfigs, workload identity, pull secrets", func(t *testing.T) {
		objs, _, err := helmTemplate(t, `github: {webhookSecret: s3cret, token: ghs_x}
kubeconfigSecrets: {prod-eu: prod-eu-kubeconfig}
config:
  repositories:
    - name: octo-org/deploy-config
      branches:
        - name: main
          targets:
            - {name: prod-eu, overlay: overlays/prod-eu, kubeconfig: /var/run/kplan/kubeconfigs/prod-eu/kubeconfig}
serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/kplan"}}
podAnnotations: {team: platform}
image: {pullSecrets: [mirror-creds]}
extraVolumes: [{name: ca, configMap: {name: corp-ca}}]
extraVolumeMounts: [{name: ca, mountPath: /etc/ssl/corp, readOnly: true}]
`)
		if err != nil {
			t.Fatal(err)
		}
		d := chartDeployment(t, objs)
		pod := d.Spec.Template.Spec
		mounts := map[string]string{}
		for _, m := range pod.Containers[0].VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = v
		}
		if mounts["kubeconfig-prod-eu"] != "/var/run/kplan/kubeconfigs/prod-eu" || volumes["kubeconfig-prod-eu"].Secret == nil || volumes["kubeconfig-prod-eu"].Secret.SecretName != "prod-eu-kubeconfig" {
			t.Errorf("mounts %v volumes %v: want Secret prod-eu-kubeconfig at /var/run/kplan/kubeconfigs/prod-eu", mounts, keysOf(volumes))
		}
		if mounts["ca"] != "/etc/ssl/corp" || volumes["ca"].ConfigMap == nil {
			t.Errorf("extra volume and mount missing: %v %v", mounts, keysOf(volumes))
		}
		if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "mirror-creds" {
			t.Errorf("imagePullSecrets %v", pod.ImagePullSecrets)
		}
		if d.Spec.Template.Annotations["team"] != "platform" || d.Spec.Template.Annotations["checksum/config"] == "" {
			t.Errorf("pod annotations %v", d.Spec.Template.Annotations)
		}
		sa := objs["ServiceAccount/kplan-webhook"]
		if sa == nil || sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::1:role/kplan" {
			t.Errorf("ServiceAccount annotations: %v", sa)
		}
		// The target's kubeconfig is the file the mount holds.
		cm := convert[corev1.ConfigMap](t, objs["ConfigMap/kplan-webhook-config"])
		if !strings.Contains(cm.Data["webhook.yaml"], "/var/run/kplan/kubeconfigs/prod-eu/kubeconfig") {
			t.Errorf("config:\n%s", cm.Data["webhook.yaml"])
		}
	})

	t.Run("defaults with a token", func(t *testing.T) {
		objs, _, err := helmTemplate(t, "github: {webhookSecret: s3cret, token: ghs_x}\n")
		if err != nil {
			t.Fatal(err)
		}
		d := chartDeployment(t, objs)
		c := d.Spec.Template.Spec.Containers[0]
		if want := "ghcr.io/kplan-dev/kplan:v" + releaseVersion; c.Image != want {
			t.Errorf("image %s, want %s: the release's own image", c.Image, want)
		}
		if !slices.Equal(c.Command, []string{"/usr/local/bin/kplan-webhook"}) || !slices.Contains(c.Args, "--leader-elect") || *d.Spec.Replicas != 2 {
			t.Errorf("command %q args %q replicas %d: want kplan-webhook, two replicas electing a leader", c.Command, c.Args, *d.Spec.Replicas)
		}
		env := envOf(c)
		if env["KPLAN_GITHUB_TOKEN_FILE"] == "" || env["KPLAN_WEBHOOK_SECRET_FILE"] == "" || env["KPLAN_GITHUB_APP_ID"] != "" {
			t.Errorf("env %v: want the token's and the webhook secret's files", env)
		}
		for _, k := range []string{"Role/kplan-webhook-leader-election", "RoleBinding/kplan-webhook-leader-election", "ClusterRoleBinding/kplan-webhook-cluster-admin",
			"NetworkPolicy/kplan-webhook", "PodDisruptionBudget/kplan-webhook", "Service/kplan-webhook", "ServiceAccount/kplan-webhook", "Secret/kplan-webhook", "ConfigMap/kplan-webhook-config"} {
			if objs[k] == nil {
				t.Errorf("no %s among %v", k, keysOf(objs))
			}
		}
		if objs["ServiceMonitor/kplan-webhook"] != nil {
			t.Errorf("a ServiceMonitor without metrics.serviceMonitor.enabled")
		}
		secret := convert[corev1.Secret](t, objs["Secret/kplan-webhook"])
		if secret.StringData["webhook-secret"] != "s3cret" || secret.StringData["github-token"] != "ghs_x" {
			t.Errorf("Secret %v", secret.StringData)
		}
		// The configuration loads as the webhook loads it.
		cm := convert[corev1.ConfigMap](t, objs["ConfigMap/kplan-webhook-config"])
		f := filepath.Join(t.TempDir(), "webhook.yaml")
		os.WriteFile(f, []byte(cm.Data["webhook.yaml"]), 0o644)
		cfg, err := config.Load(f)
		if err != nil || cfg.StateDir != "/var/lib/kplan" || len(cfg.AllTargets()) != 1 {
			t.Errorf("the chart's configuration: %v %+v\n%s", err, cfg, cm.Data["webhook.yaml"])
		}
	})

	t.Run("a GitHub App, one replica, metrics and no NetworkPolicy", func(t *testing.T) {
		objs, _, err := helmTemplate(t, `github:
  webhookSecret: s3cret
  app: {id: "4242", installationID: "77", privateKey: "-----BEGIN RSA PRIVATE KEY-----"}
replicas: 1
image: {tag: v9.9.9}
metrics: {port: 9191, serviceMonitor: {enabled: true, interval: 1m}}
networkPolicy: {enabled: false}
rbac:
  clusterAdmin: false
  rules: [{apiGroups: [""], resources: [configmaps], verbs: ["*"]}]
extraArgs: [--live-plans=false]
`)
		if err != nil {
			t.Fatal(err)
		}
		d := chartDeployment(t, objs)
		c := d.Spec.Template.Spec.Containers[0]
		env := envOf(c)
		if env["KPLAN_GITHUB_APP_ID"] != "4242" || env["KPLAN_GITHUB_APP_INSTALLATION_ID"] != "77" || env["KPLAN_GITHUB_APP_PRIVATE_KEY_FILE"] == "" || env["KPLAN_GITHUB_TOKEN_FILE"] != "" {
			t.Errorf("env %v: want the App's ID, installation and key file, no token", env)
		}
		if c.Image != "ghcr.io/kplan-dev/kplan:v9.9.9" || slices.Contains(c.Args, "--leader-elect") || !slices.Contains(c.Args, "--metrics-listen=:9191") || !slices.Contains(c.Args, "--live-plans=false") {
			t.Errorf("image %s args %q", c.Image, c.Args)
		}
		for _, k := range []string{"NetworkPolicy/kplan-webhook", "PodDisruptionBudget/kplan-webhook", "Role/kplan-webhook-leader-election", "ClusterRoleBinding/kplan-webhook-cluster-admin"} {
			if objs[k] != nil {
				t.Errorf("%s rendered", k)
			}
		}
		if objs["ServiceMonitor/kplan-webhook"] == nil || objs["ClusterRole/kplan-webhook"] == nil || objs["ClusterRoleBinding/kplan-webhook"] == nil {
			t.Errorf("want a ServiceMonitor and the ClusterRole of rbac.rules, bound: %v", keysOf(objs))
		}
		if s := convert[corev1.Secret](t, objs["Secret/kplan-webhook"]); s.StringData["github-app-private-key"] == "" {
			t.Errorf("Secret %v: no App key", s.StringData)
		}
	})

	t.Run("three replicas sharing six shards", func(t *testing.T) {
		objs, _, err := helmTemplate(t, "github: {webhookSecret: s3cret, token: ghs_x}\nreplicas: 3\nshards: 6\n")
		if err != nil {
			t.Fatal(err)
		}
		d := chartDeployment(t, objs)
		c := d.Spec.Template.Spec.Containers[0]
		if *d.Spec.Replicas != 3 || !slices.Contains(c.Args, "--leader-elect") || !slices.Contains(c.Args, "--shards=6") {
			t.Errorf("replicas %d args %q: want three replicas with --leader-elect --shards=6", *d.Spec.Replicas, c.Args)
		}
		role := convert[rbacv1.Role](t, objs["Role/kplan-webhook-leader-election"])
		if !grants(role.Rules, "coordination.k8s.io", "leases", "get", "list", "create", "update", "delete") {
			t.Errorf("Role %+v: the shards' Leases need get, list, create, update and delete", role.Rules)
		}
		// One replica has no Leases: shards mean nothing there.
		objs, _, err = helmTemplate(t, "github: {webhookSecret: s3cret, token: ghs_x}\nreplicas: 1\nshards: 6\n")
		if err != nil {
			t.Fatal(err)
		}
		if args := chartDeployment(t, objs).Spec.Template.Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--shards") }) {
			t.Errorf("one replica with --shards: %q", args)
		}
	})

	t.Run("GitLab alone", func(t *testing.T) {
		objs, _, err := helmTemplate(t, "github: {webhookSecret: s3cret}\ngitlab: {enabled: true, token: glpat-x, webhookSecret: gl-s3cret}\n")
		if err != nil {
			t.Fatal(err)
		}
		c := chartDeployment(t, objs).Spec.Template.Spec.Containers[0]
		env := envOf(c)
		// The names the webhook reads (config.GitLabAuthFrom).
		if env[config.EnvGitLabTokenFile] != "/var/run/secrets/kplan/gitlab-token" || env[config.EnvGitHubTokenFile] != "" {
			t.Errorf("env %v: want the GitLab token's file, no GitHub token", env)
		}
		var ref *corev1.SecretKeySelector
		for _, e := range c.Env {
			if e.Name == config.EnvGitLabWebhookSecret && e.ValueFrom != nil {
				ref = e.ValueFrom.SecretKeyRef
			}
		}
		if ref == nil || ref.Key != "gitlab-webhook-secret" || ref.Optional == nil || !*ref.Optional {
			t.Errorf("KPLAN_GITLAB_WEBHOOK_SECRET: %+v, want the Secret's optional gitlab-webhook-secret", ref)
		}
		secret := convert[corev1.Secret](t, objs["Secret/kplan-webhook"])
		if secret.StringData["gitlab-token"] != "glpat-x" || secret.StringData["gitlab-webhook-secret"] != "gl-s3cret" || secret.StringData["github-token"] != "" {
			t.Errorf("Secret %v", secret.StringData)
		}
		if _, _, err := helmTemplate(t, "github: {webhookSecret: s}\ngitlab: {enabled: true}\n"); err == nil || !strings.Contains(err.Error(), "gitlab.token") {
			t.Errorf("helm template with GitLab on and no token: %v", err)
		}
	})

	t.Run("no credentials is an error naming the value", func(t *testing.T) {
		_, _, err := helmTemplate(t, "{}\n")
		if err == nil || !strings.Contains(err.Error(), "github.webhookSecret") {
			t.Errorf("helm template without a webhook secret: %v", err)
		}
		_, _, err = helmTemplate(t, "github: {webhookSecret: s}\n")
		if err == nil || !strings.Contains(err.Error(), "github.token or github.app.id") {
			t.Errorf("helm template without a token or App: %v", err)
		}
	})
}

// The chart installs into a cluster and the webhook it describes answers
// a signed delivery and deploys it. The test cluster has no scheduler or
// kubelet: the chart's objects are applied to the API server (with
// kplan's own engine, as `kplan apply` would), and the pod is run as the
// kubelet would run it: the Deployment's command, args and environment,
// its ConfigMap and Secret read back from the cluster as the files the
// pod mounts, the listeners on loopback.
func TestWebhookChartInstallsAndAnswersASignedDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, root := newHookBase(t, hookRepo)
	cs, err := kubernetes.NewForConfig(e.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	gitSrv := githttp.Serve(t, root, hookToken)
	e.gh.AddToken(hookToken, githubapi.Identity{Login: "kplan[bot]"})
	first := e.commit("one")

	_, manifest, err := helmTemplate(t, fmt.Sprintf(`github: {webhookSecret: %q, token: %q}
config:
  repositories:
    - name: %s
      cloneURL: %s/%s.git
      branches:
        - name: main
          targets:
            - {name: prod, overlay: app, kubeconfig: %s, reconcileTimeout: 20s}
  gitBaseURL: %s
  apiBaseURL: %s/
  resyncInterval: 1h
`, hookSecret, hookToken, hookRepo, gitSrv.URL, hookRepo, e.cluster.Kubeconfig, gitSrv.URL, e.gh.URL()))
	if err != nil {
		t.Fatal(err)
	}
	// helm install: the namespace, then the chart's objects.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kplan-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tg := renderFiles(t, ctx, map[string]string{
		"kustomization.yaml": "resources: [chart.yaml, inventory.yaml]\n",
		"chart.yaml":         manifest,
		"inventory.yaml":     "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: kplan-webhook-chart, namespace: kplan-system}\n",
	})
	applyInstall(t, ctx, deploy.New(deploy.NewGetter(e.cluster.Kubeconfig, "")), "the chart", tg)

	// The pod, from what the cluster holds.
	d, err := cs.AppsV1().Deployments("kplan-system").Get(ctx, "kplan-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	mounts := map[string]string{} // mount path -> directory standing for it
	for _, m := range c.VolumeMounts {
		dir := t.TempDir()
		mounts[m.MountPath] = dir
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			var data map[string][]byte
			switch {
			case v.ConfigMap != nil:
				cm, err := cs.CoreV1().ConfigMaps("kplan-system").Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("volume %s: %v", v.Name, err)
				}
				data = map[string][]byte{}
				for k, s := range cm.Data {
					data[k] = []byte(s)
				}
			case v.Secret != nil:
				s, err := cs.CoreV1().Secrets("kplan-system").Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("volume %s: %v", v.Name, err)
				}
				data = s.Data
			}
			for k, b := range data {
				os.WriteFile(filepath.Join(dir, k), b, 0o600)
			}
		}
	}
	var pairs []string
	for p, dir := range mounts {
		pairs = append(pairs, p, dir)
	}
	// One pass: a directory standing for a mount is not rewritten again.
	local := strings.NewReplacer(pairs...).Replace
	// The configuration's stateDir is a mount too.
	cfgFile := local("/etc/kplan/webhook.yaml")
	if data, err := os.ReadFile(cfgFile); err != nil {
		t.Fatalf("the pod's configuration: %v", err)
	} else {
		os.WriteFile(cfgFile, []byte(strings.ReplaceAll(string(data), "stateDir: /var/lib/kplan", "stateDir: "+local("/var/lib/kplan"))), 0o600)
	}
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=127.0.0.1:0"
		case strings.HasPrefix(a, "--metrics-listen="):
			a = "--metrics-listen=127.0.0.1:0"
		}
		args = append(args, local(a))
	}
	if !slices.Equal(c.Command, []string{"/usr/local/bin/kplan-webhook"}) {
		t.Fatalf("the pod runs %q, want kplan-webhook", c.Command)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + e.cluster.Kubeconfig} // in a pod, the in-cluster config
	for _, v := range c.Env {
		val := local(v.Value)
		if f := v.ValueFrom; f != nil && f.FieldRef != nil {
			val = map[string]string{"metadata.name": "kplan-webhook-0", "metadata.namespace": "kplan-system", "status.podIP": "127.0.0.1"}[f.FieldRef.FieldPath]
		}
		env = append(env, v.Name+"="+val)
	}
	bin := buildWebhook(t)
	// --help lists every variable the chart sets.
	help, _ := exec.Command(bin, "--help").Output()
	for _, v := range c.Env {
		if v.Name != "HOME" && !strings.Contains(string(help), "\n  "+v.Name+" ") {
			t.Errorf("the chart sets %s, which kplan-webhook --help does not list", v.Name)
		}
	}
	proc := exec.Command(bin, args...)
	proc.Env = env
	ownGroup(proc)
	stdout, _ := proc.StdoutPipe()
	var logs bytes.Buffer
	proc.Stderr = &logs
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroup(proc)
		proc.Wait()
		if t.Failed() {
			t.Logf("webhook log:\n%s", tailLines(logs.String(), 40))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		proc.Wait()
		t.Fatalf("the chart's webhook (%q) did not start: %v\n%s", args, err, logs.String())
	}
	go io.Copy(io.Discard, stdout)
	e.url, e.metricsURL = listenerURLs(t, line)
	if !strings.Contains(line, "campaigning for Lease kplan-system/kplan-webhook") {
		t.Errorf("two replicas in the chart, but the webhook does not elect a leader: %q", line)
	}
	// Ready once it leads (the readiness probe of the chart).
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(e.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chart's webhook is not ready after a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := e.send("ping", fixture(t, "ping/payload.json", func(map[string]any) {}), "", true); code/100 != 2 {
		t.Errorf("a signed ping: %d", code)
	}
	if code := e.send("ping", fixture(t, "ping/payload.json", func(map[string]any) {}), "", false); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("a ping with a wrong signature: %d, want it refused", code)
	}
	e.waitDeployed(first) // the start's resync
	second := e.commit("one", "two")
	if code := e.send("push", pushPayload(t, hookRepo, first, second), "", true); code/100 != 2 {
		t.Fatalf("a signed push: %d", code)
	}
	e.waitDeployed(second)
	if got := e.configMaps(); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("ConfigMaps in %s after the push: %v", hookNS, got)
	}
}
