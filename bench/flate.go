package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// flate (github.com/home-operations/flate, a Go rewrite of flux-local) is
// the Flux cases' peer. It is AGPL-3.0: the bench only runs it as a
// separate program, built on its own from its own module; kplan never
// imports or links it, and it is not in kplan's go.mod.
//
// The pinned version is the newest the Go module proxy serves; it needs
// Go 1.27, and go1.27.3 is the one toolchain approved here (the go
// command fetches it from the proxy, as a module, when GOTOOLCHAIN names
// it). `make flate` (go run ./bench -install-flate) builds it once into
// os.UserCacheDir()/kplan, where the bench finds it by default.
const (
	flateVersion   = "v0.6.5"
	flateToolchain = "go1.27.3"
	flatePackage   = "github.com/home-operations/flate/cmd/flate"
)

// flateInstall says how to install the pinned flate, for the notes that
// leave its columns out.
const flateInstall = "make flate, or: GOTOOLCHAIN=" + flateToolchain + " go install " + flatePackage + "@" + flateVersion + " and -flate PATH"

// flateDir is where `make flate` keeps the pinned flate.
func flateDir() string {
	return filepath.Join(cacheRoot(), "flate-"+flateVersion+"-"+flateToolchain)
}

// installFlate builds the pinned flate into flateDir, unless it is there,
// and returns its path.
func installFlate(ctx context.Context) (string, error) {
	bin := filepath.Join(flateDir(), "flate")
	if executable(bin) {
		return bin, nil
	}
	step("build flate " + flateVersion + " with " + flateToolchain + " (first time: about 5 minutes on 2 cores; then cached in " + flateDir() + ")")
	if err := goInstall(ctx, flatePackage+"@"+flateVersion, flateDir(), "GOTOOLCHAIN="+flateToolchain); err != nil {
		return "", err
	}
	return bin, nil
}

// findFlate is the flate binary the Flux cases run, or "" with a note
// saying why there is none: the path -flate gives ("none": none), else
// the pinned flate `make flate` built, else flate on the PATH.
func findFlate(path string) (bin, note string) {
	switch {
	case path == "none":
		return "", "flate left out (-flate none)"
	case path != "":
		if !executable(path) {
			return "", fmt.Sprintf("no flate at %s (-flate); install it with %s", path, flateInstall)
		}
		return path, ""
	}
	if bin := filepath.Join(flateDir(), "flate"); executable(bin) {
		return bin, ""
	}
	if p, err := exec.LookPath("flate"); err == nil {
		return p, ""
	}
	return "", "flate is not installed; install it with " + flateInstall
}

// flateVersionOf is what `flate --version` says ("v0.6.5"), or what went
// wrong.
func flateVersionOf(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return fmt.Sprintf("unknown (%s --version: %v)", bin, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "unknown"
	}
	return fields[len(fields)-1]
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// cacheRoot is where the bench keeps the peers it builds:
// os.UserCacheDir()/kplan, beside the test binaries.
func cacheRoot() string {
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	return filepath.Join(root, "kplan")
}

// goInstall runs `go install pkgAtVersion` (outside any module, with env
// added) into dir, through a temporary directory renamed into place: an
// interrupted build leaves no half-written dir, and of two runs building
// at once one wins.
func goInstall(ctx context.Context, pkgAtVersion, dir string, env ...string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", pkgAtVersion)
	cmd.Dir = os.TempDir() // no go.mod or go.work around it
	cmd.Env = append(append(os.Environ(), "GOBIN="+tmp, "GOWORK=off"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install %s: %w\n%s", pkgAtVersion, err, tail(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil { // another run may have won
			return err
		}
	}
	return nil
}
