package github_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	gh "github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// deploy is a Deployment to make on the fake: by target key (payload),
// or by description alone, with its statuses in order.
type deploy struct {
	env, key, description string
	states                []string
}

// LastDeployed finds the target's newest successful Deployment among
// its environment's: its own (by payload, or an older one by
// description), not another target's or another tool's, and a success
// GitHub's auto_inactive marked inactive still counts.
func TestLastDeployed(t *testing.T) {
	target := forge.DeployTarget{Repo: owner + "/" + repo, Branch: "main", Name: "prod", Key: "acme/infra@main/prod", Environment: "prod-eu", Overlay: "apps/prod"}
	sha := func(n int) string { return strings.Repeat(string(rune('0'+n)), 40) }
	for _, c := range []struct {
		name    string
		deploys []deploy // oldest first: the n-th deploys sha(n)
		want    int      // index into deploys, -1 for none
	}{
		{"none", nil, -1},
		{"one success", []deploy{{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress", "success"}}}, 0},
		{"a newer failure", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress", "success"}},
			{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress", "failure"}},
		}, 0},
		{"a newer deploy in progress", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress", "success"}},
			{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress"}},
		}, 0},
		{"another target of the environment succeeded since", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"in_progress", "success"}},
			{"prod-eu", "acme/infra@main/api", "", []string{"in_progress", "success"}},
		}, 0},
		{"another tool's deployment", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"success"}},
			{"prod-eu", "", "deployed by a workflow", []string{"success"}},
		}, 0},
		{"another environment", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"success"}},
			{"prod-us", "acme/infra@main/prod", "", []string{"success"}},
		}, 0},
		{"the newest of two", []deploy{
			{"prod-eu", "acme/infra@main/prod", "", []string{"success"}},
			{"prod-eu", "acme/infra@main/prod", "", []string{"success"}},
		}, 1},
		{"before payloads named the target", []deploy{{"prod-eu", "", "kplan deploy of apps/prod", []string{"success"}}}, 0},
		{"the configuration spells the repository otherwise", []deploy{{"prod-eu", "Acme/Infra@main/prod", "", []string{"success"}}}, 0},
		{"only failures", []deploy{{"prod-eu", "acme/infra@main/prod", "", []string{"failure"}}}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			ctx := context.Background()
			client := s.Client(writer)
			for i, d := range c.deploys {
				req := &gh.DeploymentRequest{Ref: gh.String(sha(i)), Environment: gh.String(d.env), RequiredContexts: &[]string{}, Description: gh.String(d.description)}
				if d.key != "" {
					payload, _ := json.Marshal(map[string]string{github.PayloadTarget: d.key})
					req.Payload = json.RawMessage(payload)
				}
				dep, _, err := client.Repositories.CreateDeployment(ctx, owner, repo, req)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range d.states {
					if _, _, err := client.Repositories.CreateDeploymentStatus(ctx, owner, repo, dep.GetID(), &gh.DeploymentStatusRequest{State: gh.String(st)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			d, err := github.NewDeployed(s.URL(), writer)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.LastDeployed(ctx, target)
			want := ""
			if c.want >= 0 {
				want = sha(c.want)
			}
			if err != nil || got != want {
				t.Errorf("got %q, %v; want %q", got, err, want)
			}
		})
	}
}

// A token without deployments: read is an error that names the
// permission.
func TestLastDeployedWithoutThePermission(t *testing.T) {
	s := newServer(t)
	s.AddToken("ghs_nodeploy", githubapi.Identity{Login: "github-actions[bot]", NoDeployments: true})
	d, err := github.NewDeployed(s.URL(), "ghs_nodeploy")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.LastDeployed(context.Background(), forge.DeployTarget{Repo: owner + "/" + repo, Name: "prod", Key: "prod", Environment: "prod-eu"})
	if err == nil || got != "" || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "deployments: read") {
		t.Errorf("got %q, %v; want a 403 naming deployments: read", got, err)
	}
}
