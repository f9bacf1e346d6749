package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/forge"
)

// PayloadTarget is the key of a Deployment's payload that names the
// target (its deployer.Target.Key) whose deploy created it.
const PayloadTarget = "kplanTarget"

// DeploymentDescription is the description of a Deployment kplan's
// webhook created for a target of overlay; Deployments made before the
// payload named the target are recognised by it.
func DeploymentDescription(overlay string) string { return "kplan deploy of " + overlay }

// maxStatuses bounds the statuses read of one Deployment, newest first:
// kplan's deploys give each at most three (in progress, the outcome,
// inactive).
const maxStatuses = 10

// maxDeployments bounds the Deployments of an environment LastDeployed
// looks through, newest first, for a successful one of the target.
const maxDeployments = 20

// Deployed reads what kplan's webhook deployed from GitHub's
// Deployments (internal/forge/github/deploys writes them): the plan
// asks it what each target's cluster runs.
type Deployed struct {
	gh *github.Client
}

// NewDeployed reads Deployments through the API at apiURL ("" is
// api.github.com) with token, which needs the deployments: read
// permission.
func NewDeployed(apiURL, token string) (*Deployed, error) {
	gh, err := NewClient(apiURL, nil)
	if err != nil {
		return nil, err
	}
	return &Deployed{gh: gh.WithAuthToken(token)}, nil
}

// LastDeployed is the commit of t's newest successful deploy: among the
// newest Deployments of t's environment that t created (their payload
// names t's key, or, made before payloads did, their description its
// overlay), the newest whose latest status is success (succeeded); ""
// when there is none. A token without deployments: read is an error
// that says so.
func (d *Deployed) LastDeployed(ctx context.Context, t forge.DeployTarget) (string, error) {
	owner, repo, _ := strings.Cut(t.Repo, "/")
	deps, _, err := d.gh.Repositories.ListDeployments(ctx, owner, repo, &github.DeploymentsListOptions{
		Environment: t.Environment, ListOptions: github.ListOptions{PerPage: maxDeployments}})
	if err != nil {
		return "", deploymentsError("list the deployments of environment "+t.Environment, err)
	}
	for _, dep := range deps {
		if !createdBy(dep, t) {
			continue
		}
		sts, _, err := d.gh.Repositories.ListDeploymentStatuses(ctx, owner, repo, dep.GetID(), &github.ListOptions{PerPage: maxStatuses})
		if err != nil {
			return "", deploymentsError(fmt.Sprintf("the statuses of deployment %d", dep.GetID()), err)
		}
		if succeeded(sts) {
			return dep.GetSHA(), nil
		}
	}
	return "", nil
}

// succeeded says whether a Deployment's statuses, newest first, end in
// success: its latest is success, or inactive after a success, which
// GitHub's auto_inactive adds to an environment's earlier successful
// Deployments when another succeeds (another target's, when targets
// share an environment).
func succeeded(sts []*github.DeploymentStatus) bool {
	if len(sts) == 0 {
		return false
	}
	switch sts[0].GetState() {
	case "success":
		return true
	case "inactive":
		return slices.ContainsFunc(sts[1:], func(s *github.DeploymentStatus) bool { return s.GetState() == "success" })
	}
	return false
}

// createdBy says whether t's deploys made Deployment dep, as the
// webhook's reporter marks them (deploys.Reporter: PayloadTarget, else
// DeploymentDescription).
func createdBy(dep *github.Deployment, t forge.DeployTarget) bool {
	var p map[string]any
	if json.Unmarshal(dep.Payload, &p) == nil {
		if v, ok := p[PayloadTarget].(string); ok {
			// The repository part of the key is as the webhook's
			// configuration spells it; GitHub's names ignore case.
			return strings.EqualFold(v, t.Key)
		}
	}
	return dep.GetDescription() == DeploymentDescription(t.Overlay)
}

// deploymentsError names what failed, and for a 403 the permission the
// token lacks.
func deploymentsError(what string, err error) error {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%s: %w (give the token the deployments: read permission)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
