// Package testhelm gives the Helm tests the helm and kustomize commands
// they compare kplan with: built from the tools/helm module (whose go.mod
// pins both versions) into ~/.cache/kplan, once per version.
package testhelm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/testcluster"
)

// BinEnv names an environment variable pointing to a directory that
// holds prebuilt helm and kustomize executables; nothing is built then.
const BinEnv = "KPLAN_HELM_BIN"

// Binaries returns a directory holding the helm and kustomize executables,
// building them the first time (minutes on a small machine; `make
// cluster` does it before the tests).
func Binaries(ctx context.Context) (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if err := check(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinEnv, dir, err)
		}
		return dir, nil
	}
	mod, err := testcluster.ToolsModule("helm", BinEnv)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, name))
		if err != nil {
			return "", fmt.Errorf("hash tools/helm: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "kplan")
	final := filepath.Join(root, "helm-"+hex.EncodeToString(h.Sum(nil))[:16])
	if check(final) == nil {
		return final, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create binary cache dir: %w", err)
	}
	unlock, err := testcluster.LockFile(ctx, final+".lock", "helm")
	if err != nil {
		return "", err
	}
	defer unlock()
	if check(final) == nil { // built while we waited
		return final, nil
	}
	if err := os.RemoveAll(final); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// Flags as tools/cluster's build (no -trimpath) and the Kubernetes
	// modules at its versions (tools/helm/go.mod): helm's build reuses
	// the packages kube-apiserver's compiled, most of helm's.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp+string(filepath.Separator),
		"helm.sh/helm/v3/cmd/helm", "sigs.k8s.io/kustomize/kustomize/v5")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build helm and kustomize in %s: %w\n%s", mod, err, stderr.String())
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	return final, check(final)
}

func check(dir string) error {
	for _, name := range []string{"helm", "kustomize"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

// Dir is Binaries for a test: the directory of the pinned helm and
// kustomize commands, or the test fails.
func Dir(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := Binaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
