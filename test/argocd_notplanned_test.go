package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// What kplan does not plan of an Argo CD repository is said where a
// reviewer reads the plan, with why, never only in a log: an
// Application pinned to another revision (merging the branch does not
// change what it syncs) and an ApplicationSet whose pullRequest
// generator needs the forge (Argo CD may create any number of
// Applications from it), in the text, Markdown and JSON of kplan diff;
// the pinned Application's directory, a kustomization, is not planned as
// a loose overlay (the merge does not deploy it).
func TestArgoCDNotPlannedIsSaid(t *testing.T) {
	kplan := buildKplan(t)
	fx := gittest.Copy(t, "testdata/argocd-notplanned")
	fx.Init("argocd")
	gittest.Git(t, fx.Dir, "remote", "add", "origin", "https://github.com/example/deploy.git")
	fx.Replace("app/cm.yaml", "k: v", "k: changed")
	fx.Replace("old/cm.yaml", "k: v", "k: changed")
	fx.Commit("both directories")
	out := map[string]string{}
	for _, format := range []string{"text", "markdown", "json"} {
		cmd := exec.Command(kplan, "diff", "-C", fx.Dir, "--base", "main~1", "--head", "main", "--format", format)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kplan diff --format %s: %v\n%s", format, err, stderr.String())
		}
		out[format] = stdout.String()
	}
	for _, format := range []string{"text", "markdown"} {
		for _, want := range []string{"Not planned: 2 objects", "argocd/pinned", "apps/pinned.yaml", "tracks another revision (targetRevision v1.0.0)",
			"argocd/previews", "sets/previews.yaml", "pullRequest"} {
			if !strings.Contains(out[format], want) {
				t.Errorf("%s: no %q in\n%s", format, want, out[format])
			}
		}
	}
	var p struct {
		NotPlanned []struct{ Engine, ID, File, Reason string } `json:"notPlanned"`
		Overlays   []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(out["json"]), &p); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, np := range p.NotPlanned {
		got[np.ID+" "+np.File] = np.Engine + ": " + np.Reason
	}
	for _, o := range p.Overlays {
		if o.Path == "old" {
			t.Errorf("old, which only the Application pinned to v1.0.0 syncs, is planned as a loose overlay")
		}
	}
	if len(got) != 2 || !strings.Contains(got["argocd/pinned apps/pinned.yaml"], "Argo CD: tracks another revision") || !strings.Contains(got["argocd/previews sets/previews.yaml"], "pullRequest") {
		t.Errorf("JSON notPlanned %v", got)
	}
}
