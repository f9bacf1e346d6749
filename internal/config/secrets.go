package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables the secrets come from: the value itself, or the
// path of a file holding it (a mounted Kubernetes Secret).
const (
	EnvWebhookSecret     = "KPLAN_WEBHOOK_SECRET"
	EnvWebhookSecretFile = "KPLAN_WEBHOOK_SECRET_FILE"
	EnvGitHubToken       = "KPLAN_GITHUB_TOKEN"
	// GitLab: a project or group access token (api scope) and the GitLab
	// webhook's secret token (default: the webhook secret).
	EnvGitLabToken             = "KPLAN_GITLAB_TOKEN"
	EnvGitLabTokenFile         = "KPLAN_GITLAB_TOKEN_FILE"
	EnvGitLabWebhookSecret     = "KPLAN_GITLAB_WEBHOOK_SECRET"
	EnvGitLabWebhookSecretFile = "KPLAN_GITLAB_WEBHOOK_SECRET_FILE"
	EnvGitHubTokenFile         = "KPLAN_GITHUB_TOKEN_FILE"

	// A GitHub App instead of a token: its ID, its private key (PEM) or
	// the key's file, and optionally the installation to act as (otherwise
	// looked up per repository).
	EnvGitHubAppID             = "KPLAN_GITHUB_APP_ID"
	EnvGitHubAppPrivateKey     = "KPLAN_GITHUB_APP_PRIVATE_KEY"
	EnvGitHubAppPrivateKeyFile = "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE"
	EnvGitHubAppInstallationID = "KPLAN_GITHUB_APP_INSTALLATION_ID"

	// Optional: the token the admin listener's status page and /drift
	// ask for (docs/status-page.md).
	EnvAdminToken     = "KPLAN_ADMIN_TOKEN"
	EnvAdminTokenFile = "KPLAN_ADMIN_TOKEN_FILE"
)

// GitHubAuth says how the webhook authenticates to GitHub: with at most
// one of a token, a token file (re-read when it changes) or a GitHub App.
// All empty is anonymous.
type GitHubAuth struct {
	Token     []byte // KPLAN_GITHUB_TOKEN
	TokenFile string // KPLAN_GITHUB_TOKEN_FILE, checked to be readable and not empty

	AppID             int64
	AppPrivateKey     []byte // PEM, from the variable or the file
	AppInstallationID int64  // 0: looked up per repository
}

// GitHubAuthFrom reads the GitHub credentials from the environment that
// getenv reads. Errors name variables and files, never a secret.
func GitHubAuthFrom(getenv func(string) string) (*GitHubAuth, error) {
	a := &GitHubAuth{}
	var err error
	if a.Token, err = secret(getenv, EnvGitHubToken, ""); err != nil {
		return nil, err
	}
	if path := getenv(EnvGitHubTokenFile); path != "" {
		if a.Token != nil {
			return nil, fmt.Errorf("both %s and %s are set: set one", EnvGitHubToken, EnvGitHubTokenFile)
		}
		if _, err := secret(getenv, "", EnvGitHubTokenFile); err != nil {
			return nil, err
		}
		a.TokenFile = path
	}
	id, key, keyFile := getenv(EnvGitHubAppID), getenv(EnvGitHubAppPrivateKey), getenv(EnvGitHubAppPrivateKeyFile)
	installation := getenv(EnvGitHubAppInstallationID)
	if id == "" {
		if key != "" || keyFile != "" || installation != "" {
			return nil, fmt.Errorf("a GitHub App private key or installation is set without %s: set the App's ID too", EnvGitHubAppID)
		}
		return a, nil
	}
	if a.Token != nil || a.TokenFile != "" {
		return nil, fmt.Errorf("both a GitHub token (%s or %s) and a GitHub App (%s) are set: set one", EnvGitHubToken, EnvGitHubTokenFile, EnvGitHubAppID)
	}
	if a.AppID, err = strconv.ParseInt(strings.TrimSpace(id), 10, 64); err != nil || a.AppID <= 0 {
		return nil, fmt.Errorf("%s is not a GitHub App ID (a positive number)", EnvGitHubAppID)
	}
	if a.AppPrivateKey, err = secret(getenv, EnvGitHubAppPrivateKey, EnvGitHubAppPrivateKeyFile); err != nil {
		return nil, err
	}
	if a.AppPrivateKey == nil {
		return nil, fmt.Errorf("%s is set without the App's private key: set %s, or %s to the .pem file GitHub generated", EnvGitHubAppID, EnvGitHubAppPrivateKey, EnvGitHubAppPrivateKeyFile)
	}
	if installation != "" {
		if a.AppInstallationID, err = strconv.ParseInt(strings.TrimSpace(installation), 10, 64); err != nil || a.AppInstallationID <= 0 {
			return nil, fmt.Errorf("%s is not an installation ID (a positive number)", EnvGitHubAppInstallationID)
		}
	}
	return a, nil
}

// Secrets reads the webhook secret, which is required, and the GitHub
// token, which may be absent (nil), from the environment that getenv
// reads (os.Getenv in production). A trailing newline, as files usually
// end with, is not part of a secret. Errors never contain a secret.
func Secrets(getenv func(string) string) (webhookSecret, githubToken []byte, err error) {
	webhookSecret, err = secret(getenv, EnvWebhookSecret, EnvWebhookSecretFile)
	if err != nil {
		return nil, nil, err
	}
	if webhookSecret == nil {
		return nil, nil, fmt.Errorf("no webhook secret: set %s, or %s to a file holding it (the secret entered in the GitHub webhook's settings)", EnvWebhookSecret, EnvWebhookSecretFile)
	}
	githubToken, err = secret(getenv, EnvGitHubToken, EnvGitHubTokenFile)
	if err != nil {
		return nil, nil, err
	}
	return webhookSecret, githubToken, nil
}

// AdminToken reads the optional token of the status page and /drift
// (KPLAN_ADMIN_TOKEN, or the file KPLAN_ADMIN_TOKEN_FILE names); nil
// when neither is set.
func AdminToken(getenv func(string) string) ([]byte, error) {
	return secret(getenv, EnvAdminToken, EnvAdminTokenFile)
}

// GitLabAuth says how the webhook authenticates to GitLab: a token, or
// a token file re-read when it changes; and the GitLab webhook's secret
// token, nil when it is the webhook secret.
type GitLabAuth struct {
	Token         []byte // KPLAN_GITLAB_TOKEN
	TokenFile     string // KPLAN_GITLAB_TOKEN_FILE, checked to be readable and not empty
	WebhookSecret []byte
}

// GitLabAuthFrom reads the GitLab credentials, a token being required,
// from the environment that getenv reads. Errors never contain a secret.
func GitLabAuthFrom(getenv func(string) string) (*GitLabAuth, error) {
	a := &GitLabAuth{}
	var err error
	if a.Token, err = secret(getenv, EnvGitLabToken, EnvGitLabTokenFile); err != nil {
		return nil, err
	}
	if a.Token == nil {
		return nil, fmt.Errorf("repositories on GitLab are configured but no GitLab token: set %s, or %s to a file holding it (a project or group access token with the api scope)", EnvGitLabToken, EnvGitLabTokenFile)
	}
	if path := getenv(EnvGitLabTokenFile); path != "" {
		a.Token, a.TokenFile = nil, path // read again as it changes
	}
	if a.WebhookSecret, err = secret(getenv, EnvGitLabWebhookSecret, EnvGitLabWebhookSecretFile); err != nil {
		return nil, err
	}
	return a, nil
}

// secret reads one secret from env var direct or from the file named by
// env var file; nil when neither is set. An empty name is never set.
func secret(getenv func(string) string, direct, file string) ([]byte, error) {
	var value, path string
	if direct != "" {
		value = getenv(direct)
	}
	if file != "" {
		path = getenv(file)
	}
	switch {
	case value != "" && path != "":
		return nil, fmt.Errorf("both %s and %s are set: set one", direct, file)
	case value != "":
		return nonEmpty(trimNewline([]byte(value)), direct)
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			// The *PathError names the file, not its content.
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return nonEmpty(trimNewline(data), file+" ("+path+")")
	}
	return nil, nil
}

func trimNewline(b []byte) []byte {
	s := strings.TrimSuffix(string(b), "\n")
	return []byte(strings.TrimSuffix(s, "\r"))
}

func nonEmpty(b []byte, from string) ([]byte, error) {
	if len(b) == 0 {
		return nil, errors.New(from + " is empty")
	}
	return b, nil
}
