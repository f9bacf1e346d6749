package test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The composite action's install step (scripts/install-action.sh) against
// a fake release served from a local HTTP server, named as goreleaser names
// it (.goreleaser.yaml): kplan-action_<version>_<os>_<arch>.tar.gz and
// kplan_<version>_checksums.txt, under <base>/<tag>/.

const installScript = "../scripts/install-action.sh"

// fakeRelease is a release of tag holding archive (the tar.gz) and a
// checksums file; requests counts the requests served.
type fakeRelease struct {
	srv      *httptest.Server
	files    map[string][]byte // "<tag>/<name>"
	requests atomic.Int64
}

func newFakeRelease(t *testing.T) *fakeRelease {
	r := &fakeRelease{files: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		data, ok := r.files[strings.TrimPrefix(req.URL.Path, "/")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// runnerPlatform is the goreleaser os/arch of this machine and the
// RUNNER_OS and RUNNER_ARCH a GitHub runner on it would set.
func runnerPlatform(t *testing.T) (goos, goarch, runnerOS, runnerArch string) {
	switch runtime.GOOS {
	case "linux":
		runnerOS = "Linux"
	case "darwin":
		runnerOS = "macOS"
	default:
		t.Skipf("no kplan release for %s", runtime.GOOS)
	}
	switch runtime.GOARCH {
	case "amd64":
		runnerArch = "X64"
	case "arm64":
		runnerArch = "ARM64"
	default:
		t.Skipf("no kplan release for %s", runtime.GOARCH)
	}
	return runtime.GOOS, runtime.GOARCH, runnerOS, runnerArch
}

// publish adds release tag with kplan-action binary bin; the checksums
// file says sum for the archive when sum is not empty, its true sha256
// otherwise.
func (r *fakeRelease) publish(t *testing.T, tag string, bin []byte, sum string) {
	goos, goarch, _, _ := runnerPlatform(t)
	version := strings.TrimPrefix(tag, "v")
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "kplan-action", Mode: 0o755, Size: int64(len(bin)), ModTime: time.Now()})
	tw.Write(bin)
	tw.Close()
	gz.Close()
	archive := fmt.Sprintf("kplan-action_%s_%s_%s.tar.gz", version, goos, goarch)
	if sum == "" {
		h := sha256.Sum256(buf.Bytes())
		sum = hex.EncodeToString(h[:])
	}
	// goreleaser's checksums: "<sha256>  <name>" per line, sorted by name.
	other := sha256.Sum256([]byte("other"))
	lines := []string{
		sum + "  " + archive,
		hex.EncodeToString(other[:]) + "  " + fmt.Sprintf("kplan_%s_%s_%s.tar.gz", version, goos, goarch),
		hex.EncodeToString(other[:]) + "  " + fmt.Sprintf("kplan-action_%s_windows_%s.tar.gz", version, goarch),
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][66:] < lines[j][66:] })
	r.files[tag+"/"+archive] = buf.Bytes()
	r.files[tag+"/kplan_"+version+"_checksums.txt"] = []byte(strings.Join(lines, "\n") + "\n")
}

// install runs the install step as the composite action does, with the
// runner's environment plus env; it returns the step's outputs, its log
// and its error.
type installRun struct {
	toolCache, temp string
	outputs         map[string]string
	log             string
	err             error
	took, cpu       time.Duration // wall clock; user+system CPU of the script and what it ran
}

func runInstall(t *testing.T, toolCache string, env map[string]string, args ...string) installRun {
	t.Helper()
	_, _, runnerOS, runnerArch := runnerPlatform(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "output")
	os.WriteFile(out, nil, 0o644)
	cmd := exec.Command("bash", append([]string{installScript}, args...)...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"RUNNER_OS=" + runnerOS, "RUNNER_ARCH=" + runnerArch, "RUNNER_TEMP=" + tmp,
		"RUNNER_TOOL_CACHE=" + toolCache, "GITHUB_OUTPUT=" + out,
		"KPLAN_ACTION_REPOSITORY=kplan-dev/kplan", "GITHUB_ACTION_PATH=" + mustAbs(t, ".."),
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	err := cmd.Run()
	run := installRun{toolCache: toolCache, temp: tmp, log: log.String(), err: err, took: time.Since(start), outputs: map[string]string{}}
	if ps := cmd.ProcessState; ps != nil {
		run.cpu = ps.UserTime() + ps.SystemTime()
	}
	data, _ := os.ReadFile(out)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			run.outputs[k] = v
		}
	}
	return run
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// kplanActionBinary is the real kplan-action, stripped as the release
// strips it (-s -w), so that the download is of a real size. It is built
// with the tests' flags otherwise: the release's -trimpath and
// CGO_ENABLED=0 would compile every package it links a second time (about
// two minutes of a fresh machine's make test) for a binary of nearly the
// same size.
func kplanActionBinary(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kplan-action")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, "../cmd/action")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/action: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeBinary is a kplan-action that says which one it is.
func fakeBinary(name string) []byte {
	return []byte("#!/bin/sh\necho " + name + "\n")
}

func TestInstallActionFromRelease(t *testing.T) {
	rel := newFakeRelease(t)
	bin := kplanActionBinary(t)
	rel.publish(t, "v1.2.3", bin, "")
	_, goarch, _, _ := runnerPlatform(t)
	env := map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "KPLAN_RELEASE_URL": rel.srv.URL}

	toolCache := t.TempDir()
	first := runInstall(t, toolCache, env)
	if first.err != nil {
		t.Fatalf("install: %v\n%s", first.err, first.log)
	}
	want := filepath.Join(toolCache, "kplan-action", "1.2.3", goarch, "kplan-action")
	if first.outputs["bin"] != want || first.outputs["version"] != "1.2.3" || first.outputs["source"] != "" {
		t.Fatalf("outputs = %v, want bin=%s version=1.2.3\n%s", first.outputs, want, first.log)
	}
	if got, _ := os.ReadFile(want); !bytes.Equal(got, bin) {
		t.Fatal("the installed binary is not the released one")
	}
	// It runs: outside a pull_request workflow, kplan-action says so.
	run := exec.Command(want)
	run.Env = []string{"PATH=" + os.Getenv("PATH")}
	msg, err := run.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "kplan plans pull requests") {
		t.Fatalf("the installed kplan-action: %v\n%s", err, msg)
	}
	if ents, _ := os.ReadDir(first.temp); len(ents) != 1 { // only GITHUB_OUTPUT
		t.Errorf("the install left files in RUNNER_TEMP: %v", ents)
	}

	// A second run on the same runner uses the tool cache: no request.
	served := rel.requests.Load()
	again := runInstall(t, toolCache, env)
	if again.err != nil || again.outputs["bin"] != want || rel.requests.Load() != served {
		t.Fatalf("cached install: %v, outputs %v, %d requests\n%s", again.err, again.outputs, rel.requests.Load()-served, again.log)
	}
	if !strings.Contains(again.log, "from the tool cache") {
		t.Errorf("log = %q", again.log)
	}

	// A cached binary that changed is downloaded again.
	os.WriteFile(want, []byte("#!/bin/sh\necho tampered\n"), 0o755)
	fixed := runInstall(t, toolCache, env)
	if got, _ := os.ReadFile(want); fixed.err != nil || !bytes.Equal(got, bin) || rel.requests.Load() == served {
		t.Fatalf("tampered cache: %v\n%s", fixed.err, fixed.log)
	}

	// The step's overhead before kplan runs: a fresh runner (download,
	// sha256, extract) and a warm tool cache. Reported, not asserted.
	var cold, warm, coldCPU, warmCPU []time.Duration
	for i := 0; i < 3; i++ {
		tc := t.TempDir()
		c := runInstall(t, tc, env)
		w := runInstall(t, tc, env)
		if c.err != nil || w.err != nil {
			t.Fatalf("%v %v\n%s\n%s", c.err, w.err, c.log, w.log)
		}
		cold, warm = append(cold, c.took), append(warm, w.took)
		coldCPU, warmCPU = append(coldCPU, c.cpu), append(warmCPU, w.cpu)
	}
	t.Logf("install step overhead, %.1f MB kplan-action in a %.1f MB archive from a local server: fresh runner (download, sha256, extract) median %v wall, %v CPU; tool cache hit median %v wall, %v CPU",
		float64(len(bin))/1e6, float64(len(rel.files["v1.2.3/kplan-action_1.2.3_"+runtime.GOOS+"_"+goarch+".tar.gz"]))/1e6,
		median(cold), median(coldCPU), median(warm), median(warmCPU))
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func TestInstallActionRefusesWrongChecksum(t *testing.T) {
	rel := newFakeRelease(t)
	wrong := sha256.Sum256([]byte("not the archive"))
	rel.publish(t, "v1.2.3", fakeBinary("released"), hex.EncodeToString(wrong[:]))
	toolCache := t.TempDir()
	run := runInstall(t, toolCache, map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "KPLAN_RELEASE_URL": rel.srv.URL})
	if run.err == nil {
		t.Fatalf("a wrong checksum was accepted\n%s", run.log)
	}
	for _, want := range []string{"::error", "checksum mismatch for kplan-action_1.2.3_", hex.EncodeToString(wrong[:]), "refusing to install"} {
		if !strings.Contains(run.log, want) {
			t.Errorf("log lacks %q:\n%s", want, run.log)
		}
	}
	if _, ok := run.outputs["bin"]; ok {
		t.Errorf("outputs = %v", run.outputs)
	}
	var left []string
	for _, root := range []string{toolCache, run.temp} {
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && filepath.Base(p) != "output" {
				left = append(left, p)
			}
			return nil
		})
	}
	if len(left) > 0 {
		t.Errorf("a refused install left files: %v", left)
	}

	// An archive the checksums file does not list is refused too.
	rel.files["v1.2.3/kplan_1.2.3_checksums.txt"] = []byte(hex.EncodeToString(wrong[:]) + "  kplan_1.2.3_linux_amd64.tar.gz\n")
	run = runInstall(t, toolCache, map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "KPLAN_RELEASE_URL": rel.srv.URL})
	if run.err == nil || !strings.Contains(run.log, "lists no kplan-action_1.2.3_") {
		t.Errorf("unlisted archive: %v\n%s", run.err, run.log)
	}
}

func TestInstallActionErrors(t *testing.T) {
	rel := newFakeRelease(t)
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no such release", map[string]string{"KPLAN_ACTION_REF": "v9.9.9"}, "cannot download " + rel.srv.URL + "/v9.9.9/kplan_9.9.9_checksums.txt: (22) The requested URL returned error: 404: is there a release v9.9.9"},
		{"windows", map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "RUNNER_OS": "Windows"}, "no binary for runner OS 'Windows'"},
		{"32-bit", map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "RUNNER_ARCH": "X86"}, "no binary for runner architecture 'X86'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["KPLAN_RELEASE_URL"] = rel.srv.URL
			run := runInstall(t, t.TempDir(), c.env)
			if run.err == nil || !strings.Contains(run.log, c.want) {
				t.Errorf("%v\n%s", run.err, run.log)
			}
		})
	}
}

// TestInstallActionResolvesRef: @v1 and @<sha> use the release tag on the
// same commit; a path (uses: ./) or a commit with no release tag builds
// from source.
func TestInstallActionResolvesRef(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	commit := func(msg string) string {
		git(t, repo, "commit", "-q", "--allow-empty", "-m", msg)
		return git(t, repo, "rev-parse", "HEAD")
	}
	old := commit("one")
	git(t, repo, "tag", "v1.2.2")
	cur := commit("two")
	git(t, repo, "tag", "-a", "-m", "v1.2.3", "v1.2.3")
	git(t, repo, "tag", "v1.2.3-rc.1")
	git(t, repo, "tag", "-f", "v1")
	unreleased := commit("three")

	rel := newFakeRelease(t)
	rel.publish(t, "v1.2.2", fakeBinary("1.2.2"), "")
	rel.publish(t, "v1.2.3", fakeBinary("1.2.3"), "")
	for _, c := range []struct{ ref, version string }{
		{"v1", "1.2.3"},
		{cur, "1.2.3"},
		{old, "1.2.2"},
		{"v1.2.2", "1.2.2"},
		{unreleased, ""},
		{"main", ""},
		{"", ""},
	} {
		run := runInstall(t, t.TempDir(), map[string]string{"KPLAN_ACTION_REF": c.ref, "KPLAN_RELEASE_URL": rel.srv.URL, "KPLAN_GIT_URL": repo})
		if run.err != nil {
			t.Errorf("ref %q: %v\n%s", c.ref, run.err, run.log)
			continue
		}
		if c.version == "" {
			if run.outputs["source"] != "true" || run.outputs["go-version-file"] != mustAbs(t, "../go.mod") || run.outputs["bin"] != "" {
				t.Errorf("ref %q: outputs %v, want a build from source\n%s", c.ref, run.outputs, run.log)
			}
			continue
		}
		if run.outputs["version"] != c.version {
			t.Errorf("ref %q: outputs %v, want version %s\n%s", c.ref, run.outputs, c.version, run.log)
			continue
		}
		if out, err := exec.Command(run.outputs["bin"]).Output(); err != nil || strings.TrimSpace(string(out)) != c.version {
			t.Errorf("ref %q: the installed binary says %q (%v)", c.ref, out, err)
		}
	}
}

// TestInstallActionBuildsFromSource: the source build the composite action
// runs after setup-go when it runs from a path.
func TestInstallActionBuildsFromSource(t *testing.T) {
	run := runInstall(t, t.TempDir(), nil, "build")
	if run.err != nil {
		t.Fatalf("%v\n%s", run.err, run.log)
	}
	bin := run.outputs["bin"]
	if !strings.HasPrefix(bin, run.temp) || run.outputs["version"] != "source" {
		t.Fatalf("outputs = %v", run.outputs)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kplan plans pull requests") {
		t.Errorf("the built kplan-action: %v\n%s", err, out)
	}
}

// An installer that cannot reach the release fails, naming
// KPLAN_RELEASE_URL (and KPLAN_GIT_URL when resolving the ref is what
// failed): it built from source instead, silently, minutes of CPU.
func TestInstallActionFailsLoudlyWhenTheReleaseIsUnreachable(t *testing.T) {
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"release downloads unreachable", map[string]string{"KPLAN_ACTION_REF": "v1.2.3", "KPLAN_RELEASE_URL": closed},
			[]string{"cannot download " + closed + "/v1.2.3/kplan_1.2.3_checksums.txt", "KPLAN_RELEASE_URL"}},
		{"repository unreachable for @v1", map[string]string{"KPLAN_ACTION_REF": "v1", "KPLAN_RELEASE_URL": closed, "KPLAN_GIT_URL": closed + "/kplan.git"},
			[]string{"cannot reach " + closed + "/kplan.git (KPLAN_GIT_URL)", "KPLAN_RELEASE_URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := runInstall(t, t.TempDir(), c.env)
			if run.err == nil || run.outputs["source"] != "" {
				t.Fatalf("exit %v, outputs %v: want a failure, not a source build\n%s", run.err, run.outputs, run.log)
			}
			for _, w := range c.want {
				if !strings.Contains(run.log, w) || !strings.Contains(run.log, "::error") {
					t.Errorf("the error does not say %q:\n%s", w, run.log)
				}
			}
		})
	}
}
