// Package testkit holds the helpers kplan's tests share: a snapshot from
// a map of files, a tree read from disk, untar, the kubeflow corpus, an
// Eventually that waits for a condition, and golden files regenerated
// with -update. Only tests import it.
package testkit

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// update is the -update flag of every test binary that imports this
// package: golden files and generated sections are rewritten, not compared.
var update = flag.Bool("update", false, "rewrite golden files and generated doc sections instead of comparing them")

// Update says whether the test runs with -update.
func Update() bool { return *update }

// Snapshot is an in-memory snapshot of files (path → content), named rev.
func Snapshot(t testing.TB, rev string, files map[string]string) *snapshot.Snapshot {
	t.Helper()
	m := fstest.MapFS{}
	for name, content := range files {
		m[name] = &fstest.MapFile{Data: []byte(content)}
	}
	s, err := snapshot.FromFS(m, rev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Files reads every regular file under dir into a map of slash paths
// relative to dir, as Snapshot takes them.
func Files(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Untar unpacks a .tar.gz into dir: directories, regular files and
// symlinks; an entry that would land outside dir is skipped.
func Untar(t testing.TB, tarball, dir string) {
	t.Helper()
	if err := untar(tarball, dir); err != nil {
		t.Fatalf("unpack %s: %v", tarball, err)
	}
}

func untar(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeFile(p, tr, hdr.FileInfo().Mode())
			}
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(hdr.Linkname, p)
			}
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Corpus returns the kubeflow/manifests tarball (KPLAN_CORPUS, default
// ../shared/corpus beside the checkout; from a package two levels down,
// as internal/plan). Without it the test skips, but under CI=true it
// fails: CI must run the corpus checks. They are skipped under -race and
// -short, where their hundreds of renders would take many minutes.
func Corpus(t testing.TB) string {
	t.Helper()
	p := os.Getenv("KPLAN_CORPUS")
	if p == "" {
		p = "../../../shared/corpus/kubeflow-manifests.tar.gz"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no corpus at %s: set KPLAN_CORPUS to kubeflow-manifests.tar.gz", p)
		}
		t.Skipf("no corpus at %s (set KPLAN_CORPUS)", p)
	}
	if raceEnabled || testing.Short() {
		t.Skip("the corpus checks run without -race and -short (make test runs them so)")
	}
	return p
}

// Eventually waits until ok holds, checking every 20 ms, and fails the
// test naming what it waited for when timeout passes first.
func Eventually(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
