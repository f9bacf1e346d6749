// Package testcluster gives tests a real Kubernetes API server: an etcd and a
// kube-apiserver built from tools/cluster, started on 127.0.0.1 with random
// ports and temporary directories. There is no controller-manager, scheduler
// or kubelet: objects are stored and validated, but nothing reconciles them
// (Deployments never get Pods, deleted Namespaces stay Terminating).
package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// readyTimeout bounds how long etcd or kube-apiserver may take to become
// ready. A start normally takes a few seconds, but `go test ./...` runs
// packages in parallel on small machines.
const readyTimeout = 2 * time.Minute

// Cluster is a running etcd plus kube-apiserver.
type Cluster struct {
	// Config authenticates as an admin (client certificate in system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same credentials,
	// for tools such as `kubectl --kubeconfig`.
	Kubeconfig string
	// Dir holds data, certificates and the etcd.log and kube-apiserver.log
	// files; Stop removes it.
	Dir string

	bin     string
	apiArgs []string
	pki     *pki

	mu      sync.Mutex // guards etcd, api, stopped
	etcd    *proc
	api     *proc
	stopped bool
}

// Start starts a cluster for the test and stops it, removing its files, when
// the test ends. It fails the test (never skips) if the binaries cannot be
// built or the cluster does not come up. On test failure the tails of the
// etcd and kube-apiserver logs are logged.
func Start(t testing.TB) *Cluster {
	t.Helper()
	start := time.Now()
	c, err := StartContext(t.Context())
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	t.Logf("testcluster: kube-apiserver ready at %s after %s", c.Config.Host, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testcluster: etcd log tail:\n%s", c.logTail("etcd"))
			t.Logf("testcluster: kube-apiserver log tail:\n%s", c.logTail("kube-apiserver"))
		}
		c.Stop()
	})
	return c
}

// StartContext starts a cluster outside a test (e.g. in TestMain to share one
// cluster across a package's tests); the caller must call Stop. ctx bounds the
// start only (building binaries the first time takes minutes), not the
// cluster's lifetime.
func StartContext(ctx context.Context) (c *Cluster, err error) {
	bin, err := Binaries(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster binaries: %w", err)
	}
	dir, err := os.MkdirTemp("", "kplan-testcluster-")
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	c = &Cluster{Dir: dir, bin: bin}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n--- etcd log tail ---\n%s\n--- kube-apiserver log tail ---\n%s", err, c.logTail("etcd"), c.logTail("kube-apiserver"))
			c.Stop()
		}
	}()

	if c.pki, err = writePKI(dir); err != nil {
		return c, err
	}
	// Take all ports at once so they are distinct. Another process could grab
	// one before our servers bind it; that is rare enough to just fail.
	ports, err := freePorts(3)
	if err != nil {
		return c, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiPort := strconv.Itoa(ports[2])

	etcdArgs := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", // throwaway data: skip fsync, much faster on slow disks
	}
	c.etcd, err = startProc(c.bin, "etcd", etcdArgs, c.logPath("etcd"))
	if err != nil {
		return c, err
	}
	if err := waitReady(ctx, c.etcd, http.DefaultClient, etcdURL+"/health"); err != nil {
		return c, err
	}

	c.apiArgs = []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + apiPort,
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"), // unused, but the default is /var/run/kubernetes
		"--tls-cert-file=" + c.pki.servingCert,
		"--tls-private-key-file=" + c.pki.servingKey,
		"--client-ca-file=" + c.pki.caFile,
		"--authorization-mode=RBAC", // real authorization; the admin cert is in system:masters
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPub,
		"--service-account-signing-key-file=" + c.pki.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// ServiceAccount admission rejects Pods until a controller creates the
		// "default" ServiceAccount; there is no controller-manager here.
		"--disable-admission-plugins=ServiceAccount",
		// The "kubernetes" Service endpoints would point at a loopback
		// address, which Endpoints validation rejects; nothing needs them.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
	}
	host := "https://127.0.0.1:" + apiPort
	c.Config = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.caCert,
			CertData: c.pki.adminCert,
			KeyData:  c.pki.adminKey,
		},
		// Negative QPS disables client-side throttling, which would only slow
		// tests down against a private server.
		QPS: -1,
	}
	if c.Kubeconfig, err = c.writeKubeconfig(); err != nil {
		return c, err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a grace
// period) and keeps etcd and all files, so StartAPIServer can bring the same
// server back on the same port. Requests in between fail with connection
// refused.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	api := c.api
	c.api = nil
	c.mu.Unlock()
	if api == nil {
		return nil
	}
	return api.stop(10 * time.Second)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer and waits
// until it reports ready. The port, certificates and etcd are unchanged, so
// c.Config and c.Kubeconfig stay valid.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	client, err := c.httpClient()
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("cluster is stopped")
	}
	if c.api != nil {
		c.mu.Unlock()
		return errors.New("kube-apiserver is already running")
	}
	api, err := startProc(c.bin, "kube-apiserver", c.apiArgs, c.logPath("kube-apiserver"))
	if err == nil {
		c.api = api
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// Wait without the lock, so Stop or StopAPIServer can interrupt.
	return waitReady(ctx, api, client, c.Config.Host+"/readyz")
}

// Restart stops and starts kube-apiserver, keeping etcd and its data.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.StopAPIServer(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Stop kills both processes and removes Dir. It is idempotent; Start calls it
// from t.Cleanup.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	api, etcd := c.api, c.etcd
	c.api, c.etcd = nil, nil
	c.mu.Unlock()
	// The data is thrown away, so there is no point in a graceful shutdown.
	if api != nil {
		api.stop(0)
	}
	if etcd != nil {
		etcd.stop(0)
	}
	os.RemoveAll(c.Dir)
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.Dir, name+".log") }

// logTail returns the end of a process's log, for failure messages.
func (c *Cluster) logTail(name string) string {
	b, err := os.ReadFile(c.logPath(name))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return tail(string(b), 30)
}

func (c *Cluster) httpClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(c.pki.adminCert, c.pki.adminKey)
	if err != nil {
		return nil, fmt.Errorf("load admin cert: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.pki.caCert)
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      roots,
			Certificates: []tls.Certificate{cert},
		}},
	}, nil
}

func (c *Cluster) writeKubeconfig() (string, error) {
	const name = "kplan-testcluster"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.pki.caCert}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCert, ClientKeyData: c.pki.adminKey}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	path := filepath.Join(c.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// proc is a started server process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // exit status, valid after done
}

// startProc starts bin/name with its output appended to logPath.
func startProc(bin, name string, args []string, logPath string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close() // the child has its own copy of the descriptor
	fmt.Fprintf(logFile, "=== %s starting at %s\n", name, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Kill the child if the test process dies (e.g. a test timeout panics),
	// so no servers leak.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. A grace of 0 kills at once.
func (p *proc) stop(grace time.Duration) error {
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	if grace > 0 {
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed it", p.name, grace)
	}
	return nil
}

// waitReady polls url until it answers 200, the process exits, or the
// deadline passes.
func waitReady(ctx context.Context, p *proc, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	start := time.Now()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probe %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before becoming ready: %v", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last probe of %s: %s): %w", p.name, time.Since(start).Round(time.Second), url, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		defer l.Close() // hold all until we have n, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
