package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// remoteBasePlan is the part of kplan diff's JSON checked here.
type remoteBasePlan struct {
	Overlays []struct {
		Path    string   `json:"path"`
		Status  string   `json:"status"`
		Changed []string `json:"changed"`
		Digest  string   `json:"digest"`
		Head    struct {
			Hash  string `json:"hash"`
			Error string `json:"error"`
		} `json:"head"`
		Fields map[string][]struct {
			Path, Op string
			Old, New any // typed values
		} `json:"fields"`
	} `json:"overlays"`
}

// A repository whose overlays use a git remote base on a loopback git
// server: kplan diff renders it, plans a bump of its ?ref= (tag v1 → v2)
// as the change in the base's objects, renders a changed overlay on a
// base pinned to a branch at the branch's new commit once it moves (with
// a render cache), and refuses a host
// --remote-hosts does not name, naming the setting, without a request.
func TestDiffRemoteGitBases(t *testing.T) {
	t.Parallel()
	kplan := buildKplan(t)
	root := t.TempDir()
	up := gittest.NewUpstream(t, root, "org/base.git")
	release := func(version, tag string) string {
		return up.Release(map[string]string{
			"app/kustomization.yaml": "resources: [cm.yaml]\n",
			"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  version: " + version + "\n",
		}, tag)
	}
	v1 := release("one", "v1")
	release("two", "v2")
	srv := githttp.Serve(t, root, "")
	base := srv.URL + "/org/base.git//app?ref="
	refused := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/org/base.git//app?ref=v1"

	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	gittest.Write(t, dir, map[string]string{
		"pinned/kustomization.yaml": "resources:\n- " + base + "v1\n",
		"branch/kustomization.yaml": "namePrefix: branch-\nresources:\n- " + base + "main\n",
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "remote bases")
	gittest.Write(t, dir, map[string]string{
		"pinned/kustomization.yaml":  "resources:\n- " + base + "v2\n",
		"branch/kustomization.yaml":  "namePrefix: br-\nresources:\n- " + base + "main\n",
		"refused/kustomization.yaml": "resources:\n- " + refused + "\n",
	})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "bump the base to v2, rename the branch's objects")

	gitCache, renderCache := t.TempDir(), t.TempDir()
	diff := func() remoteBasePlan {
		t.Helper()
		cmd := exec.Command(kplan, "diff", "-C", dir, "--base", "main~1", "--head", "main", "-o", "json", "--fail-on-error=false",
			"--remote-hosts", "127.0.0.1", "--git-cache", gitCache, "--cache-dir", renderCache)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kplan diff: %v\n%s", err, stderr.String())
		}
		var p remoteBasePlan
		if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
			t.Fatalf("plan JSON: %v\n%s", err, stdout.String())
		}
		return p
	}
	byPath := func(p remoteBasePlan, path string) int {
		for i, o := range p.Overlays {
			if o.Path == path {
				return i
			}
		}
		t.Fatalf("no overlay %s in the plan", path)
		return -1
	}

	before := srv.Fetches.Load()
	p := diff()
	pinned := p.Overlays[byPath(p, "pinned")]
	if pinned.Status != "changed" || len(pinned.Changed) != 1 || !strings.Contains(pinned.Changed[0], "ConfigMap") {
		t.Errorf("pinned: status %s, changed %v; want the ConfigMap changed", pinned.Status, pinned.Changed)
	}
	found := false
	for _, fields := range pinned.Fields {
		for _, f := range fields {
			found = found || (f.Path == "data.version" && f.Old == "one" && f.New == "two")
		}
	}
	if !found {
		t.Errorf("pinned: fields %+v, want data.version one → two", pinned.Fields)
	}
	branch := p.Overlays[byPath(p, "branch")]
	if branch.Head.Error != "" || branch.Digest == "" {
		t.Errorf("branch: status %s, error %q; want it rendered", branch.Status, branch.Head.Error)
	}
	ref := p.Overlays[byPath(p, "refused")]
	if !strings.Contains(ref.Head.Error, "allow it with --remote-hosts localhost") {
		t.Errorf("refused: error %q, want one naming --remote-hosts localhost", ref.Head.Error)
	}
	if srv.Fetches.Load() == before {
		t.Errorf("the git server saw no fetch")
	}

	// The branch moves upstream: the next plan renders its new commit,
	// whatever the render cache holds.
	three := release("three", "")
	p = diff()
	moved := p.Overlays[byPath(p, "branch")]
	if moved.Head.Error != "" || moved.Digest == "" || moved.Digest == branch.Digest {
		t.Errorf("branch after a push: digest %s (was %s), error %q; want a new render", moved.Digest, branch.Digest, moved.Head.Error)
	}

	// The git cache outlives runs in the user's cache directory: a tree no
	// run used for 30 days is removed after the next run, one it used stays.
	v1Tree, threeTree := filepath.Join(gitCache, "trees", v1), filepath.Join(gitCache, "trees", three)
	old := time.Now().Add(-31 * 24 * time.Hour)
	for _, d := range []string{v1Tree, threeTree} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatalf("backdate %s: %v", d, err)
		}
	}
	render := exec.Command(kplan, "render", filepath.Join(dir, "branch"), "--remote-hosts", "127.0.0.1", "--git-cache", gitCache)
	if out, err := render.CombinedOutput(); err != nil || !strings.Contains(string(out), "br-app") {
		t.Fatalf("kplan render branch: %v\n%s", err, out)
	}
	if _, err := os.Stat(v1Tree); !os.IsNotExist(err) {
		t.Errorf("v1's tree, unused for 31 days, is still in the git cache (%v)", err)
	}
	if _, err := os.Stat(threeTree); err != nil {
		t.Errorf("the tree the render used is gone: %v", err)
	}
}
