package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Environment variables the secrets come from: the value itself, or the
// path of a file holding it (a mounted Kubernetes Secret).
const (
	EnvWebhookSecret     = "KPLAN_WEBHOOK_SECRET"
	EnvWebhookSecretFile = "KPLAN_WEBHOOK_SECRET_FILE"
	EnvGitHubToken       = "KPLAN_GITHUB_TOKEN"
	EnvGitHubTokenFile   = "KPLAN_GITHUB_TOKEN_FILE"
)

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

// secret reads one secret from env var direct or from the file named by
// env var file; nil when neither is set.
func secret(getenv func(string) string, direct, file string) ([]byte, error) {
	value, path := getenv(direct), getenv(file)
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
