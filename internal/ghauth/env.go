package ghauth

import (
	"net/http"

	"github.com/kplan-dev/kplan/internal/config"
)

// New makes the Source that a's credentials describe: a GitHub App, a
// token file, a static token, or None. apiBaseURL is the REST API's base
// URL, where an App mints its tokens.
func New(a *config.GitHubAuth, apiBaseURL string, tr http.RoundTripper) (Source, error) {
	switch {
	case a == nil:
		return None{}, nil
	case a.AppID != 0:
		return NewApp(a.AppID, a.AppPrivateKey, a.AppInstallationID, apiBaseURL, tr)
	case a.TokenFile != "":
		return NewFile(a.TokenFile)
	case len(a.Token) > 0:
		return Static(a.Token), nil
	}
	return None{}, nil
}

// Describe names the kind of credentials, for the start-up line.
func Describe(s Source) string {
	switch s := s.(type) {
	case *App:
		if s.installationID != 0 {
			return "GitHub App installation"
		}
		return "GitHub App"
	case *File:
		return "token file"
	case Static:
		return "token"
	}
	return "no GitHub credentials"
}
