package prflow

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/test/gittest"
)

// fakeDeploys answers LastDeployed from a map by environment, and
// records whom it was asked about.
type fakeDeploys struct {
	byEnv map[string]string
	err   error
	asked []forge.DeployTarget
}

func (f *fakeDeploys) LastDeployed(_ context.Context, t forge.DeployTarget) (string, error) {
	f.asked = append(f.asked, t)
	return f.byEnv[t.Environment], f.err
}

// history is a repository whose main is, first parent first,
// c0 → c1 → merge of side → base → tip, with side's f1 branched off c0,
// and a branch old whose o1, off c0, main does not hold (a force-push
// left it behind). c0's .kplan.yaml declares three targets.
type history struct {
	dir                          string
	c0, c1, f1, merge, base, tip string
	o1                           string
}

func newHistory(t *testing.T) history {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string { return gittest.Git(t, dir, args...) }
	commit := func(files map[string]string, msg string) string {
		gittest.Write(t, dir, files)
		git("add", "-A")
		git("commit", "-qm", msg)
		return git("rev-parse", "HEAD")
	}
	var h history
	h.dir = dir
	git("init", "-q", "-b", "main")
	h.c0 = commit(map[string]string{
		".kplan.yaml": "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets:\n" +
			"  - {name: prod, overlay: apps/prod, environment: production}\n" +
			"  - {name: staging, overlay: apps/staging}\n" +
			"  - {name: other, overlay: apps/other, environment: elsewhere}\n",
		"apps/prod/kustomization.yaml": "resources: []\n", "apps/staging/kustomization.yaml": "resources: []\n",
		"apps/other/kustomization.yaml": "resources: []\n",
	}, "c0")
	git("checkout", "-qb", "side")
	h.f1 = commit(map[string]string{"apps/prod/side.txt": "side\n"}, "f1")
	git("checkout", "-q", "-b", "old", h.c0)
	h.o1 = commit(map[string]string{"apps/prod/old.txt": "old\n"}, "o1")
	git("checkout", "-q", "main")
	h.c1 = commit(map[string]string{"apps/prod/c1.txt": "c1\n"}, "c1")
	git("merge", "-q", "--no-ff", "-m", "merge side", "side")
	h.merge = git("rev-parse", "HEAD")
	h.base = commit(map[string]string{"apps/staging/base.txt": "base\n"}, "base")
	h.tip = commit(map[string]string{"apps/staging/tip.txt": "tip\n"}, "tip")
	git("config", "uploadpack.allowReachableSHA1InWant", "true")
	return h
}

// planOf is a plan of base whose overlays are paths.
func planOf(base string, paths ...string) *inventorydiff.Plan {
	p := &inventorydiff.Plan{Base: base, BaseLabel: "main at " + Short(base)}
	for _, path := range paths {
		p.Overlays = append(p.Overlays, inventorydiff.Overlay{Path: path})
	}
	return p
}

func runningJob(dir string, d Deploys, log io.Writer) *Job {
	return &Job{
		Log: slog.New(slog.NewTextHandler(log, nil)), Repo: gitcli.Repo{Dir: dir}, Deploys: d,
		Change: &forge.Change{Repo: "acme/infra", Number: 7, BaseRef: "main", DefaultBranch: "main"},
	}
}

// What the comment says of each target's cluster: nothing when it runs
// the base, or a newer commit, or the forge records no deploy; how many
// first-parent commits behind; not in the history (a force-push, a
// commit the full checkout does not hold); reached only through a merge.
func TestRunningSaysHowWhatRunsStandsToTheBase(t *testing.T) {
	h := newHistory(t)
	for _, c := range []struct {
		name     string
		deployed string
		want     []report.Running
	}{
		{"the base", h.base, nil},
		{"no deploy", "", nil},
		{"behind", h.c0, []report.Running{{Target: "prod", SHA: h.c0, Branch: "main", History: report.Behind, Commits: 3}}},
		{"one behind", h.merge, []report.Running{{Target: "prod", SHA: h.merge, Branch: "main", History: report.Behind, Commits: 1}}},
		{"newer than the base", h.tip, nil},
		{"a force-push left it", h.o1, []report.Running{{Target: "prod", SHA: h.o1, Branch: "main", History: report.Apart}}},
		{"not in the checkout", strings.Repeat("1", 40), []report.Running{{Target: "prod", SHA: strings.Repeat("1", 40), Branch: "main", History: report.Apart}}},
		{"through a merge", h.f1, []report.Running{{Target: "prod", SHA: h.f1, Branch: "main", History: report.Merged}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &fakeDeploys{byEnv: map[string]string{"production": c.deployed, "staging": h.base}}
			got := runningJob(h.dir, d, io.Discard).running(context.Background(), planOf(h.base, "apps/prod", "apps/staging"))
			if !slices.Equal(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// The targets asked about are base's, of the overlays the plan covers,
// named as the webhook's deploys carry them; a change into another
// branch than the default one asks nothing without the webhook's
// configuration.
func TestRunningAsksForTheBaseBranchsTargets(t *testing.T) {
	h := newHistory(t)
	d := &fakeDeploys{}
	runningJob(h.dir, d, io.Discard).running(context.Background(), planOf(h.base, "apps/prod", "apps/staging"))
	want := []forge.DeployTarget{
		{Repo: "acme/infra", Branch: "main", Name: "prod", Key: "acme/infra@main/prod", Environment: "production", Overlay: "apps/prod"},
		{Repo: "acme/infra", Branch: "main", Name: "staging", Key: "acme/infra@main/staging", Environment: "staging", Overlay: "apps/staging"},
	}
	if !slices.Equal(d.asked, want) {
		t.Errorf("asked %+v\nwant %+v", d.asked, want)
	}

	d = &fakeDeploys{}
	j := runningJob(h.dir, d, io.Discard)
	j.Change.BaseRef = "release"
	if got := j.running(context.Background(), planOf(h.base, "apps/prod")); got != nil || d.asked != nil {
		t.Errorf("a change into release, no webhook configuration: %+v, asked %+v", got, d.asked)
	}
}

// With the webhook's configuration, the branch's targets are its own and
// those of base's .kplan.yaml whose environment it maps; a branch it
// does not configure deploys nothing.
func TestRunningReadsTheWebhooksConfiguration(t *testing.T) {
	h := newHistory(t)
	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
repositories:
  - name: Acme/Infra
    branches:
      - name: main
        targets:
          - {name: edge, overlay: apps/other, environment: edge-env}
        targetsFrom: .kplan.yaml
        environments:
          production: {}
      - name: release
        targets:
          - {name: rel, overlay: apps/prod}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		branch string
		want   []string // keys asked
	}{
		{"main", []string{"edge", "Acme/Infra@main/prod"}},
		{"release", []string{"rel"}},
		{"nowhere", nil},
	} {
		d := &fakeDeploys{}
		j := runningJob(h.dir, d, io.Discard)
		j.Settings.WebhookConfig, j.Settings.Repository = cfg, "acme/infra"
		j.Change.BaseRef, j.Change.DefaultBranch = c.branch, ""
		j.running(context.Background(), planOf(h.base, "apps/prod", "apps/staging", "apps/other"))
		var keys []string
		for _, a := range d.asked {
			keys = append(keys, a.Key)
		}
		if !slices.Equal(keys, c.want) {
			t.Errorf("%s: asked %v, want %v", c.branch, keys, c.want)
		}
	}
}

// A forge that does not answer fails nothing: a warning, and no note.
func TestRunningWarnsWhenTheForgeDoesNotAnswer(t *testing.T) {
	h := newHistory(t)
	var log bytes.Buffer
	d := &fakeDeploys{byEnv: map[string]string{"production": h.c0}, err: errors.New("403 Resource not accessible by integration")}
	if got := runningJob(h.dir, d, &log).running(context.Background(), planOf(h.base, "apps/prod", "apps/staging")); got != nil {
		t.Errorf("got %+v, want no note", got)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "403") {
		t.Errorf("no warning:\n%s", log.String())
	}
	if len(d.asked) != 1 {
		t.Errorf("asked %d targets after the first failure, want 1", len(d.asked))
	}
}

// A shallow checkout, as CI makes it, fetches the deployed commit and the
// history down to it from the remote; without a remote it cannot tell,
// and says nothing.
func TestRunningFetchesWhatAShallowCheckoutLacks(t *testing.T) {
	h := newHistory(t)
	ws := filepath.Join(t.TempDir(), "ws")
	gittest.Git(t, t.TempDir(), "clone", "-q", "--depth=1", "--branch", "main", "file://"+h.dir, ws)
	gittest.Git(t, ws, "fetch", "-q", "--depth=1", "origin", h.base)
	d := &fakeDeploys{byEnv: map[string]string{"production": h.c0}}
	var log bytes.Buffer
	j := runningJob(ws, d, &log)
	if got := j.running(context.Background(), planOf(h.base, "apps/prod")); got != nil {
		t.Errorf("no remote: %+v, want nothing", got)
	}
	if !strings.Contains(log.String(), "level=WARN") {
		t.Errorf("no warning:\n%s", log.String())
	}
	j.Remote = "origin"
	want := []report.Running{{Target: "prod", SHA: h.c0, Branch: "main", History: report.Behind, Commits: 3}}
	if got := j.running(context.Background(), planOf(h.base, "apps/prod")); !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// Through Report: the comment notes the target once, near the top; a
// forge with nothing deployed leaves the comment as it was.
func TestReportNotesWhatRuns(t *testing.T) {
	h := newHistory(t)
	post := func(d Deploys) string {
		var body string
		j := runningJob(h.dir, d, io.Discard)
		j.Settings.Comment, j.Stdout, j.MaxCommentChars = true, io.Discard, 65536
		j.WriteFile = func(name string, _ []byte) (string, error) { return "/reports/" + name, nil }
		j.Published = func(*inventorydiff.Plan, Files, report.Options) (string, error) { return "", nil }
		j.Post = func(_ context.Context, b string) error { body = b; return nil }
		if err := j.Report(context.Background(), planOf(h.base, "apps/prod")); err != nil {
			t.Fatal(err)
		}
		return body
	}
	plain := post(nil)
	if got := post(&fakeDeploys{}); got != plain {
		t.Errorf("nothing deployed changed the comment:\n%s\nwant\n%s", got, plain)
	}
	body := post(&fakeDeploys{byEnv: map[string]string{"production": h.c0}})
	note := "> [!NOTE]\n> Target `prod`: the cluster runs `" + h.c0[:7] + "`, 3 commits behind `main`: the deploy needs those approved too.\n"
	if strings.Count(body, note) != 1 || strings.Index(body, note) > strings.Index(body, "Planned ")+200 {
		t.Errorf("the comment does not note prod once near the top:\n%s", body)
	}
}
