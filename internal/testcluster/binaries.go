package testcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinEnv names an environment variable that, when set, points to a directory
// holding prebuilt etcd and kube-apiserver executables; Binaries then builds
// nothing.
const BinEnv = "KPLAN_CLUSTER_BIN"

// recipe is mixed into the cache key; bump it when the way the binaries are
// built changes (flags, ldflags), so stale caches are not reused.
const recipe = "v1"

// binMu and binDir memoise a successful Binaries call for this process. A
// failure is not cached, so a cancelled context does not poison later tests.
var (
	binMu  sync.Mutex
	binDir string
)

// Binaries returns a directory holding the etcd and kube-apiserver executables
// pinned by tools/cluster/go.mod. They are built once per go.mod/go.sum
// content into os.UserCacheDir()/kplan/cluster-<hash>/ and reused by every
// later test process; a file lock stops parallel `go test` processes from
// building twice, and the build goes to a temporary directory that is renamed
// into place, so no process ever sees half-written binaries.
func Binaries(ctx context.Context) (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinEnv, dir, err)
		}
		return dir, nil
	}
	binMu.Lock()
	defer binMu.Unlock()
	if binDir != "" {
		return binDir, nil
	}
	dir, err := buildCached(ctx)
	if err != nil {
		return "", err
	}
	binDir = dir
	return dir, nil
}

// checkBinaries reports whether dir holds both executables.
func checkBinaries(dir string) error {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("missing %s: %w", name, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

func buildCached(ctx context.Context) (string, error) {
	modDir, err := ToolsModule("cluster", BinEnv)
	if err != nil {
		return "", err
	}
	key, err := cacheKey(modDir)
	if err != nil {
		return "", err
	}
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir() // e.g. no $HOME: still cache, just less durably
	}
	root = filepath.Join(root, "kplan")
	final := filepath.Join(root, "cluster-"+key)
	if checkBinaries(final) == nil {
		return final, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create binary cache dir: %w", err)
	}

	unlock, err := LockFile(ctx, final+".lock", "cluster binaries")
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while we waited for the lock.
	if checkBinaries(final) == nil {
		return final, nil
	}
	// A leftover directory without both binaries (should not happen thanks to
	// the rename, but e.g. a user deleted a file) would block the rename.
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("remove incomplete binary cache %s: %w", final, err)
	}

	tmp, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(tmp) // no-op after a successful rename
	if err := build(ctx, modDir, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("move built binaries into %s: %w", final, err)
	}
	return final, nil
}

// build compiles both executables from the tools/cluster module into out.
func build(ctx context.Context, modDir, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("testcluster needs the go command to build etcd and kube-apiserver (or set %s): %w", BinEnv, err)
	}
	// Stamp the real Kubernetes version; otherwise /version reports
	// v0.0.0-master, which confuses version-skew checks in clients.
	kver, err := runGo(ctx, goBin, modDir, "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	ldflags := "-s -w"
	if major, minor, ok := majorMinor(kver); ok {
		const v = "k8s.io/component-base/version."
		ldflags += fmt.Sprintf(" -X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean",
			v, kver, v, major, v, minor, v)
	}
	// etcd's main package is named "server", so it needs an explicit output file.
	if _, err := runGo(ctx, goBin, modDir, "build", "-ldflags="+ldflags, "-o", filepath.Join(out, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
		return err
	}
	if _, err := runGo(ctx, goBin, modDir, "build", "-ldflags="+ldflags, "-o", filepath.Join(out, "kube-apiserver"), "k8s.io/kubernetes/cmd/kube-apiserver"); err != nil {
		return err
	}
	return checkBinaries(out)
}

func runGo(ctx context.Context, goBin, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	// The tools module must not be pulled into a go.work the user may have.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s (in %s, after %s): %w\n%s", strings.Join(args, " "), dir, time.Since(start).Round(time.Second), err, tail(stderr.String(), 40))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// majorMinor splits "v1.37.1" into "1" and "37".
func majorMinor(v string) (string, string, bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// cacheKey hashes what determines the binaries: the tools module's go.mod and
// go.sum, the Go toolchain and platform, and the build recipe.
func cacheKey(modDir string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(modDir, name))
		if err != nil {
			return "", fmt.Errorf("hash tools module: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s %s/%s %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, recipe)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// ToolsModule finds tools/<name> (a module pinning a tool the tests
// build) by walking up from the working directory (go test runs each
// package in its own directory inside the repo), falling back to this
// source file's location; env names the variable that points at prebuilt
// binaries instead.
func ToolsModule(name, env string) (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			cand := filepath.Join(dir, "tools", name)
			if _, err := os.Stat(filepath.Join(cand, "go.mod")); err == nil {
				return cand, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cannot find tools/%s/go.mod above %v; run inside the kplan repository or set %s", name, starts, env)
}

// LockFile takes an exclusive flock on path, polling so that ctx can
// cancel the wait (a first build takes minutes); what names the build
// waited for.
func LockFile(ctx context.Context, path, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process building %s (%s): %w", what, path, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
