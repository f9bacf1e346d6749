package gitlab

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// DefaultURL is the GitLab instance a configuration that names none
// means.
const DefaultURL = "https://gitlab.com"

// APIURL is the REST API of the GitLab instance at serverURL ("" is
// gitlab.com): <serverURL>/api/v4.
func APIURL(serverURL string) string {
	if serverURL == "" {
		serverURL = DefaultURL
	}
	return strings.TrimSuffix(serverURL, "/") + "/api/v4"
}

// NewClient is a client of the REST API at apiURL (…/api/v4),
// authenticating with token (a project, group or personal access token,
// sent as PRIVATE-TOKEN); "" sends no credentials. client-go retries 429
// and 5xx answers itself, after the time GitLab asks for; opts may change
// that (tests: gitlab.WithoutRetries).
func NewClient(apiURL, token string, opts ...gitlab.ClientOptionFunc) (*gitlab.Client, error) {
	opts = append([]gitlab.ClientOptionFunc{gitlab.WithBaseURL(apiURL),
		gitlab.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})}, opts...)
	c, err := gitlab.NewClient(token, opts...)
	if err != nil {
		return nil, fmt.Errorf("GitLab API %q: %w", apiURL, err)
	}
	return c, nil
}

// ChangeRefs are where GitLab keeps a merge request's head and its merge
// ref in the target project, a fork's included (fmt patterns of the
// merge request's IID), for internal/gitmirror.
const (
	HeadRef  = "refs/merge-requests/%d/head"
	MergeRef = "refs/merge-requests/%d/merge"
)
