package deploys

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	forgegithub "github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

func TestReportsAPushDeploy(t *testing.T) {
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("tok", githubapi.Identity{Login: "kplan[bot]"})
	merged := time.Now()
	gh.SeedPullForCommit("octo", "cfg", sha, githubapi.PullRequest{Number: 7, State: "closed", MergedAt: &merged})
	r := NewReporter(gh.Client("tok"), slog.New(slog.DiscardHandler))
	r.Backoff = time.Millisecond
	ctx := context.Background()

	prod := deployer.Target{Target: config.Target{Name: "prod", Environment: "production", Overlay: "overlays/prod"}, Repo: "octo/cfg"}
	stage := deployer.Target{Target: config.Target{Name: "stage", Overlay: "overlays/stage"}, Repo: "octo/cfg"}
	r.Started(ctx, prod, sha, 0)
	gh.FailNext(2, 502) // GitHub hiccups: the reporter retries
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Result: &deploy.Result{Objects: []deploy.ObjectResult{
		{Key: "~G_v1_ConfigMap|a|new", Action: deploy.Created}, {Key: "~G_v1_ConfigMap|a|old", Action: deploy.Pruned},
	}}})
	r.Started(ctx, stage, sha, 0)
	r.Finished(ctx, deployer.Outcome{Target: stage, SHA: sha, Err: errors.New("apply: connection refused"), Reason: deployer.ReasonApplyFailed})

	var states []string
	for _, s := range gh.Statuses("octo", "cfg", sha) {
		states = append(states, s.Context+"="+s.State)
	}
	if got := strings.Join(states, " "); got != "kplan/prod=pending kplan/prod=success kplan/stage=pending kplan/stage=failure" {
		t.Errorf("statuses: %s", got)
	}
	deps := gh.Deployments("octo", "cfg")
	if len(deps) != 2 || deps[0].Environment != "production" || deps[1].Environment != "stage" {
		t.Fatalf("deployments: %+v", deps)
	}
	var ds []string
	for _, s := range gh.DeploymentStatuses(deps[0].ID) {
		ds = append(ds, s.State)
	}
	if strings.Join(ds, ",") != "in_progress,success" {
		t.Errorf("production deployment statuses: %v", ds)
	}
	comments := gh.Comments("octo", "cfg", 7)
	if len(comments) != 1 {
		t.Fatalf("%d comments on the merged PR, want one, edited", len(comments))
	}
	body := comments[0].Body
	for _, want := range []string{"1 of 2 targets succeeded", "| `prod` | production | `0123456` | ✅ 1 created, 0 configured, 0 unchanged, 1 pruned |",
		"| `stage` | stage | `0123456` | ❌ **apply failed**: apply: connection refused |", "To retry"} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
}

// What the reporter writes is what a plan reads back (forgegithub.Deployed):
// each target's newest successful deploy, by the key its Deployments
// carry, though both targets share an environment (whose earlier success
// GitHub's auto_inactive marks inactive) and one's newer deploy failed.
func TestPlansReadWhatTheReporterWrote(t *testing.T) {
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("tok", githubapi.Identity{Login: "kplan[bot]"})
	r := NewReporter(gh.Client("tok"), slog.New(slog.DiscardHandler))
	r.Backoff = time.Millisecond
	ctx := context.Background()
	src := config.SourceName("octo/cfg", "main")
	web := deployer.Target{Target: config.Target{Name: "web", Environment: "eu", Overlay: "apps/web"}, Repo: "octo/cfg", Branch: "main", Source: src}
	api := deployer.Target{Target: config.Target{Name: "api", Environment: "eu", Overlay: "apps/api"}, Repo: "octo/cfg", Branch: "main"}
	older := strings.Repeat("a", 40)
	deployOne := func(t deployer.Target, sha string, err error) {
		r.Started(ctx, t, sha, 0)
		r.Finished(ctx, deployer.Outcome{Target: t, SHA: sha, Err: err, Result: &deploy.Result{}})
	}
	deployOne(web, older, nil)
	deployOne(api, older, nil)
	deployOne(web, sha, errors.New("apply: connection refused"))
	deployOne(api, sha, nil)

	read, err := forgegithub.NewDeployed(gh.URL(), "tok")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t    deployer.Target
		want string
	}{{web, older}, {api, sha}} {
		got, err := read.LastDeployed(ctx, forge.DeployTarget{Repo: "octo/cfg", Branch: "main", Name: c.t.Name, Key: c.t.Key(), Environment: c.t.Environment, Overlay: c.t.Overlay})
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.t.Name, got, err, c.want)
		}
	}
}
