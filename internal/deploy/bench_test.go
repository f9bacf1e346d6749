package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkApplyPrune1000 applies a 1,000-object overlay and then prunes
// 100 of it, with kplan and with `kubectl apply --server-side --prune`
// (through an ApplySet, the only way kubectl prunes server-side applied
// objects) against the same test apiserver, and reports both and their
// ratio.
// Run it with: make bench (or go test -run '^$' -bench ApplyPrune -benchtime 1x ./internal/deploy).
func BenchmarkApplyPrune1000(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Fatal("kubectl is the peer this benchmark measures against; it is not on PATH")
	}
	const n, pruned = 1000, 100
	docs := func(ns string, count int) []string {
		out := []string{nsObj(ns)}
		for i := range count {
			out = append(out, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%04d, namespace: %s, labels: {bench: %s}}\ndata: {v: %q}", i, ns, ns, strings.Repeat("x", 64)))
		}
		return out
	}
	var kplanTime, kubectlTime time.Duration
	for i := range b.N {
		ns := fmt.Sprintf("bench-kplan-%d-%d", time.Now().UnixNano(), i)
		inv := rg(ns, "inventory-bench")
		start := time.Now()
		for _, count := range []int{n, n - pruned} {
			res, err := run(b, cluster, inv, docs(ns, count), Options{})
			if err != nil || res.Failed() {
				b.Fatalf("kplan apply: %v", err)
			}
		}
		kplanTime += time.Since(start)

		ns = fmt.Sprintf("bench-kubectl-%d-%d", time.Now().UnixNano(), i)
		dir := b.TempDir()
		start = time.Now()
		for _, count := range []int{n, n - pruned} {
			f := filepath.Join(dir, fmt.Sprintf("%d.yaml", count))
			if err := os.WriteFile(f, []byte(strings.Join(docs(ns, count)[1:], "\n---\n")), 0o644); err != nil {
				b.Fatal(err)
			}
			if count == n {
				out, err := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "create", "namespace", ns).CombinedOutput()
				if err != nil {
					b.Fatalf("kubectl create namespace: %v %s", err, out)
				}
			}
			// kubectl prunes server-side applied objects only through an
			// ApplySet (alpha, behind KUBECTL_APPLYSET); its parent is a Secret.
			cmd := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "apply", "--server-side", "--prune",
				"--applyset=bench", "-n", ns, "-f", f)
			cmd.Env = append(os.Environ(), "KUBECTL_APPLYSET=true")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("kubectl apply: %v %s", err, out)
			}
		}
		kubectlTime += time.Since(start)
	}
	b.ReportMetric(kplanTime.Seconds()/float64(b.N), "kplan-s/op")
	b.ReportMetric(kubectlTime.Seconds()/float64(b.N), "kubectl-s/op")
	b.ReportMetric(kubectlTime.Seconds()/kplanTime.Seconds(), "kubectl/kplan")
}
