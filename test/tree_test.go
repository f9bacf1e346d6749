package test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// maxTrackedSize is the largest file the tree may track outside the
// documentation's images: every `uses:` of the Action and every module
// download carries the whole tree, so a built binary committed by mistake
// (an 80 MB `action` once) costs every user.
const maxTrackedSize = 2 << 20

// TestNoLargeTrackedFiles: no tracked file over 2 MB but the images
// under docs/.
func TestNoLargeTrackedFiles(t *testing.T) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if strings.HasPrefix(f, "docs/") && slices.Contains([]string{".png", ".jpg", ".gif", ".svg"}, path.Ext(f)) {
			continue
		}
		st, err := os.Lstat(filepath.Join("..", f))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if st.Size() > maxTrackedSize {
			t.Errorf("%s is tracked and %d MB: a build output? git rm --cached it and list it in .gitignore", f, st.Size()>>20)
		}
	}
}

// TestBuildOutputsAreIgnored: what `go build ./<main package>` leaves at
// the root, a binary named for the package's directory, is ignored, for
// every main package of the module, so no build output can be committed
// by `git add -A`.
func TestBuildOutputsAreIgnored(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mains := strings.Fields(string(out))
	if len(mains) < 4 {
		t.Fatalf("go list found %d main packages, want at least cmd/*: %q", len(mains), mains)
	}
	for _, pkg := range mains {
		name := path.Base(pkg)
		if st, err := os.Stat(filepath.Join("..", name)); err == nil && st.IsDir() {
			continue // go build refuses to write over a directory (./bench)
		}
		check := exec.Command("git", "check-ignore", "-q", "--no-index", name)
		check.Dir = ".."
		if err := check.Run(); err != nil {
			t.Errorf("go build ./%s leaves %s at the root, which .gitignore does not ignore: add /%s", strings.TrimPrefix(pkg, "github.com/kplan-dev/kplan/"), name, name)
		}
	}
}

// dockerfileBuilds are the packages and modules the source Dockerfile
// builds: `go build ... ./cmd/x` lines and the `cd tools/helm` module.
var (
	dockerGoBuild = regexp.MustCompile(`go build [^&\\]*?(\./cmd/[a-z-]+)`)
	dockerCdTools = regexp.MustCompile(`cd (tools/[a-z-]+) && go build`)
)

// TestDockerContextKeepsWhatTheDockerfileBuilds: .dockerignore, read with
// Docker's own matcher (github.com/moby/patternmatcher, what BuildKit
// uses), keeps every file the source Dockerfile's builds read (each Go
// file, embedded file, go.mod and go.sum of the binaries it builds and of
// the helm module under tools/), so `docker build .` cannot fail for a
// file the context left out, and leaves out what it need not send.
func TestDockerContextKeepsWhatTheDockerfileBuilds(t *testing.T) {
	pm := dockerIgnore(t)
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs, modules []string
	for _, m := range dockerGoBuild.FindAllStringSubmatch(string(df), -1) {
		pkgs = append(pkgs, m[1])
	}
	for _, m := range dockerCdTools.FindAllStringSubmatch(string(df), -1) {
		modules = append(modules, m[1])
	}
	if len(pkgs) < 4 || len(modules) != 1 {
		t.Fatalf("the Dockerfile builds %q and the modules %q: the test no longer reads it right", pkgs, modules)
	}
	need := []string{"go.mod", "go.sum"}
	need = append(need, moduleFiles(t, "..", pkgs)...)
	for _, mod := range modules {
		// go build of a module's tool reads its go.mod and go.sum
		// only: the tool's code comes from the module cache.
		need = append(need, mod+"/go.mod", mod+"/go.sum")
	}
	for _, f := range need {
		if excluded(t, pm, f) {
			t.Errorf(".dockerignore leaves out %s, which the Dockerfile's build reads", f)
		}
	}
	// What the image never needs stays out of the context.
	for _, f := range []string{".git/HEAD", "internal/plan/plan_test.go", "internal/plan/testdata/x.yaml", "docs/comment-small.png", "tools/cluster/go.mod"} {
		if !excluded(t, pm, f) {
			t.Errorf(".dockerignore sends %s to the build, which no build step reads", f)
		}
	}
}

func dockerIgnore(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return pm
}

// excluded says whether Docker leaves f out of the build context: a file
// is out when the last pattern matching it or one of its parents
// excludes it (MatchesOrParentMatches, as BuildKit's context walker).
func excluded(t *testing.T, pm *patternmatcher.PatternMatcher, f string) bool {
	t.Helper()
	out, err := pm.MatchesOrParentMatches(f)
	if err != nil {
		t.Fatalf(".dockerignore against %s: %v", f, err)
	}
	return out
}

// moduleFiles are the files, relative to the repository's root, that
// building pkgs in the module at dir reads: every non-test Go file and
// embedded file of the packages and of their dependencies in the module
// (CGO_ENABLED=0, as the Dockerfile builds).
func moduleFiles(t *testing.T, dir string, pkgs []string) []string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}{{end}}`}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %q in %s: %v", pkgs, dir, err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		rel, err := filepath.Rel(root, fields[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(files) == 0 {
		t.Fatalf("go list %q in %s found no files", pkgs, dir)
	}
	return files
}
