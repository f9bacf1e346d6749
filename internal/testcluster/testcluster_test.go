package testcluster

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestClusterSurvivesAPIServerRestart(t *testing.T) {
	c := Start(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kplan-test"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "kplan-test"},
		Data:       map[string]string{"key": "value"},
	}
	if _, err := cs.CoreV1().ConfigMaps("kplan-test").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	// Pods must be accepted without a controller-manager (no default
	// ServiceAccount exists).
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kplan-test"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods("kplan-test").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}

	start := time.Now()
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped in %s", time.Since(start).Round(time.Millisecond))
	if _, err := cs.CoreV1().ConfigMaps("kplan-test").Get(ctx, "cfg", metav1.GetOptions{}); err == nil {
		t.Fatal("get configmap succeeded while kube-apiserver was stopped")
	} else {
		t.Logf("while stopped: %v", err)
	}
	start = time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %s", time.Since(start).Round(time.Millisecond))

	got, err := cs.CoreV1().ConfigMaps("kplan-test").Get(ctx, "cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap after restart: %v", err)
	}
	if got.Data["key"] != "value" {
		t.Fatalf("configmap data after restart = %v, want key=value", got.Data)
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found; skipping the kubeconfig check")
		return
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig, "get", "ns", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ns: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "namespace/kplan-test") {
		t.Fatalf("kubectl get ns output lacks namespace/kplan-test:\n%s", out)
	}
}
