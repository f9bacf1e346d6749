package argocd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// The two sides of a plan parse a file they hold alike once (on a
// repository of 500 Applications, parsing them was half a
// one-Application plan's CPU), and a file the change touches anew.
func TestDiscoverParsesAFileAlikeOnBothSidesOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/repo")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-qm", "base")
	data, err := os.ReadFile(filepath.Join(dir, "apps/helm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "apps/helm.yaml"), append(data, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-qam", "head")

	ctx := context.Background()
	blobs := snapshot.NewBlobs(dir)
	defer blobs.Close()
	var sides [2]map[string]*Application
	for i, rev := range []string{"HEAD~", "HEAD"} {
		s, err := snapshot.Open(ctx, dir, rev, blobs)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Discover(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = map[string]*Application{}
		for _, a := range d.Applications {
			sides[i][a.File] = a
		}
	}
	for file, want := range map[string]bool{"apps/kustomize.yaml": true, "apps/plain.yaml": true, "apps/helm.yaml": false} {
		base, head := sides[0][file], sides[1][file]
		if base == nil || head == nil {
			t.Fatalf("%s: no Application on a side (%v, %v)", file, base, head)
		}
		if shared := base == head; shared != want {
			t.Errorf("%s: parsed once for both sides: %v, want %v", file, shared, want)
		}
	}
}

// TestDiscoverFindsApplicationsHoweverSpelt pins that the prefilter
// (files of the group naming no Application are not parsed) keeps an
// Application whose kind is spelt with a YAML escape or tag, as the API
// server reads it, and what it leaves out declares nothing.
func TestDiscoverFindsApplicationsHoweverSpelt(t *testing.T) {
	app := func(kind, name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: argocd\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://github.com/example/deploy\n    path: apps/web\n  destination:\n    server: https://kubernetes.default.svc\n"
	}
	snap, err := snapshot.FromFS(fstest.MapFS{
		"plain.yaml":    {Data: []byte(app("Application", "plain"))},
		"escaped.yaml":  {Data: []byte(app(`"Appl\x69cation"`, "escaped"))},
		"binary.yaml":   {Data: []byte(app("!!binary QXBwbGljYXRpb24=", "binary"))},
		"workflow.yaml": {Data: []byte("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: wf\n")},
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range d.Applications {
		got = append(got, a.Name)
	}
	slices.Sort(got)
	for _, want := range []string{"escaped", "plain"} {
		if !slices.Contains(got, want) {
			t.Errorf("Discover found %v; want %s among them", got, want)
		}
	}
	if wf := ParseFile([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: wf\n"), "workflow.yaml"); len(wf.Applications)+len(wf.Sets)+len(wf.Invalid) != 0 {
		t.Errorf("a Workflow declares %+v: the prefilter would hide it", wf)
	}
}
