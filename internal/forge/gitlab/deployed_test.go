package gitlab_test

import (
	"context"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/forge/gitlab"
	"github.com/kplan-dev/kplan/test/gitlabapi"
)

// LastDeployed is the environment's last successful deployment from the
// target's branch: not a failed or running one, not another branch's or
// environment's.
func TestLastDeployed(t *testing.T) {
	target := forge.DeployTarget{Repo: project, Branch: "main", Name: "prod", Key: "prod", Environment: "production", Overlay: "apps/prod"}
	sha := func(n int) string { return strings.Repeat(string(rune('0'+n)), 40) }
	type dep struct{ env, ref, status string }
	for _, c := range []struct {
		name string
		deps []dep // oldest first: the n-th deploys sha(n)
		want int   // -1 for none
	}{
		{"none", nil, -1},
		{"one success", []dep{{"production", "main", "success"}}, 0},
		{"the newest success", []dep{{"production", "main", "success"}, {"production", "main", "success"}}, 1},
		{"a newer failure", []dep{{"production", "main", "success"}, {"production", "main", "failed"}}, 0},
		{"a newer deploy running", []dep{{"production", "main", "success"}, {"production", "main", "running"}}, 0},
		{"another branch's", []dep{{"production", "main", "success"}, {"production", "release", "success"}}, 0},
		{"another environment's", []dep{{"production", "main", "success"}, {"staging", "main", "success"}}, 0},
		{"only failures", []dep{{"production", "main", "failed"}}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			ctx := context.Background()
			client, err := gitlab.NewClient(s.APIURL(), "glpat-writer")
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range c.deps {
				created, _, err := client.Deployments.CreateProjectDeployment(project, &gl.CreateProjectDeploymentOptions{
					Environment: gl.Ptr(d.env), Ref: gl.Ptr(d.ref), SHA: gl.Ptr(sha(i)), Tag: gl.Ptr(false), Status: gl.Ptr(gl.DeploymentStatusRunning)})
				if err != nil {
					t.Fatal(err)
				}
				if d.status != "running" {
					if _, _, err := client.Deployments.UpdateProjectDeployment(project, created.ID, &gl.UpdateProjectDeploymentOptions{Status: gl.Ptr(gl.DeploymentStatusValue(d.status))}); err != nil {
						t.Fatal(err)
					}
				}
			}
			d, err := gitlab.NewDeployed(s.APIURL(), "glpat-reader")
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

// A token that may not read deployments is an error that says what it
// needs.
func TestLastDeployedWithoutAccess(t *testing.T) {
	s := newServer(t)
	s.AddToken("glpat-guest", gitlabapi.User{Username: "guest", Guest: true})
	d, err := gitlab.NewDeployed(s.APIURL(), "glpat-guest")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.LastDeployed(context.Background(), forge.DeployTarget{Repo: project, Branch: "main", Environment: "production"})
	if err == nil || got != "" || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "Reporter") {
		t.Errorf("got %q, %v; want a 403 naming the role", got, err)
	}
}
