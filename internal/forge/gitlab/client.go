package gitlab

import (
	"context"
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

// TokenSource gives the access token for a project ("" for a request
// about none): a static one, or a file's, re-read when the file changes
// (ghauth.File), so a rotated Kubernetes Secret takes effect without a
// restart.
type TokenSource interface {
	Token(ctx context.Context, repo string) (string, error)
}

// NewClientFrom is NewClient authenticating each request with the token
// src gives at that moment.
func NewClientFrom(apiURL string, src TokenSource, opts ...gitlab.ClientOptionFunc) (*gitlab.Client, error) {
	opts = append([]gitlab.ClientOptionFunc{gitlab.WithBaseURL(apiURL),
		gitlab.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})}, opts...)
	c, err := gitlab.NewAuthSourceClient(authSource{src}, opts...)
	if err != nil {
		return nil, fmt.Errorf("GitLab API %q: %w", apiURL, err)
	}
	return c, nil
}

// authSource is a TokenSource as client-go's AuthSource: PRIVATE-TOKEN.
type authSource struct{ src TokenSource }

func (authSource) Init(context.Context, *gitlab.Client) error { return nil }

func (a authSource) Header(ctx context.Context) (string, string, error) {
	token, err := a.src.Token(ctx, "")
	if err != nil {
		return "", "", err
	}
	return "PRIVATE-TOKEN", token, nil
}

// ChangeRefs are where GitLab keeps a merge request's head and its merge
// ref in the target project, a fork's included (fmt patterns of the
// merge request's IID), for internal/gitmirror.
const (
	HeadRef  = "refs/merge-requests/%d/head"
	MergeRef = "refs/merge-requests/%d/merge"
)
