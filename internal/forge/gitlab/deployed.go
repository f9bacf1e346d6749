package gitlab

import (
	"context"
	"fmt"
	"net/http"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/kplan-dev/kplan/internal/forge"
)

// maxDeployments bounds the successful deployments of an environment
// LastDeployed looks through, newest first, for one of the target's
// branch.
const maxDeployments = 20

// Deployed reads what kplan's webhook deployed from GitLab's
// deployments (internal/forge/gitlab/deploys writes them): the plan asks
// it what each target's cluster runs.
type Deployed struct {
	gl *gitlab.Client
}

// NewDeployed reads deployments through the API at apiURL (…/api/v4)
// with token (Reporter or above).
func NewDeployed(apiURL, token string) (*Deployed, error) {
	gl, err := NewClient(apiURL, token)
	if err != nil {
		return nil, err
	}
	return &Deployed{gl: gl}, nil
}

// LastDeployed is the commit of the environment's last successful
// deployment from t's branch that the webhook created (through the API:
// no CI job deployed it); "" when there is none. GitLab's deployments do
// not name the target: targets that share an environment share the
// answer.
func (d *Deployed) LastDeployed(ctx context.Context, t forge.DeployTarget) (string, error) {
	ds, _, err := d.gl.Deployments.ListProjectDeployments(t.Repo, &gitlab.ListProjectDeploymentsOptions{
		ListOptions: gitlab.ListOptions{PerPage: maxDeployments}, Environment: gitlab.Ptr(t.Environment),
		Status: gitlab.Ptr("success"), OrderBy: gitlab.Ptr("id"), Sort: gitlab.Ptr("desc"),
	}, gitlab.WithContext(ctx))
	if err != nil {
		what := "list the deployments of environment " + t.Environment
		if s := Status(err); s == http.StatusForbidden || s == http.StatusUnauthorized {
			return "", fmt.Errorf("%s: %w (the token needs the Reporter role or above and the api or read_api scope)", what, err)
		}
		return "", fmt.Errorf("%s: %w", what, err)
	}
	for _, dep := range ds {
		if dep.Ref == t.Branch && dep.Deployable.ID == 0 && dep.Status == "success" {
			return dep.SHA, nil
		}
	}
	return "", nil
}
