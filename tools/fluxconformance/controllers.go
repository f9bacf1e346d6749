package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// controller is one Flux controller, built from its Go module as the
// module proxy serves it.
type controller struct {
	Name    string // e.g. source-controller
	Version string // a version the module proxy serves
}

// controllers are the Flux v2.7 line's controllers: the newest
// source-controller and kustomize-controller v1.10 need Go 1.27, and the
// proxy serves no helm-controller past v1.4.x (403 on v1.5 and later), so
// the three are taken from one Flux release line, whose APIs agree.
var controllers = []controller{
	{"source-controller", "v1.7.3"},
	{"kustomize-controller", "v1.7.3"},
	{"helm-controller", "v1.4.3"},
}

// module is the module path of c.
func (c controller) module() string { return "github.com/fluxcd/" + c.Name }

// srcDir is the module's source as the proxy serves it (read-only).
func (c controller) srcDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", c.module()+"@"+c.Version).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", c.module(), c.Version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", c.module(), c.Version, err)
	}
	if m.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", c.module(), c.Version, m.Error)
	}
	return m.Dir, nil
}

// build returns the controller's binary, built into cache the first time.
// The module's go.mod replaces its api module with ./api, which the
// module's zip leaves out (it is a module of its own): the replace is
// dropped and the api module taken at the same version from the proxy.
func (c controller) build(ctx context.Context, cache string) (string, error) {
	bin := filepath.Join(cache, c.Name+"-"+c.Version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src, err := c.srcDir(ctx)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "fluxconf-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	dir := filepath.Join(work, c.Name)
	if out, err := exec.CommandContext(ctx, "cp", "-r", src, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", src, err, out)
	}
	if out, err := exec.CommandContext(ctx, "chmod", "-R", "u+w", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chmod %s: %v: %s", dir, err, out)
	}
	steps := [][]string{
		{"go", "mod", "edit", "-dropreplace", c.module() + "/api"},
		{"go", "build", "-mod=mod", "-o", bin + ".tmp", "."},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s@%s: %s: %v\n%s", c.Name, c.Version, strings.Join(s, " "), err, out)
		}
	}
	return bin, os.Rename(bin+".tmp", bin)
}

// crds are the CustomResourceDefinition files of the controller's module.
func (c controller) crds(ctx context.Context) ([]string, error) {
	src, err := c.srcDir(ctx)
	if err != nil {
		return nil, err
	}
	return filepath.Glob(filepath.Join(src, "config", "crd", "bases", "*.yaml"))
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the controller against kubeconfig, its log in logDir.
func (c controller) start(ctx context.Context, bin, kubeconfig, logDir string) (*exec.Cmd, error) {
	var ports [2]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	args := []string{
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-addr=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--log-level=debug",
		"--events-addr=",
	}
	switch c.Name {
	case "source-controller":
		storage, err := freePort()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(logDir, "storage")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(storage)
		args = append(args, "--storage-path="+dir, "--storage-addr="+addr, "--storage-adv-addr="+addr)
	case "kustomize-controller", "helm-controller":
		args = append(args, "--requeue-dependency=3s", "--concurrent=8")
	}
	log, err := os.Create(filepath.Join(logDir, c.Name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// controller-runtime reads KUBECONFIG (its --kubeconfig flag is on
	// Go's flag set, which the controllers' pflag set may not carry).
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=flux-system", "KUBECONFIG="+kubeconfig)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	go func() { _ = cmd.Wait(); log.Close() }()
	return cmd, nil
}
