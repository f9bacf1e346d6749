package charts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"helm.sh/helm/v3/pkg/helmpath"
	sigsyaml "sigs.k8s.io/yaml"
)

// Auth is where a Fetcher finds credentials: the places helm and docker
// read them from, so that `helm registry login`, `docker login`
// (`docker/login-action`) and `helm repo add --username` work for kplan
// as they do for helm.
//
// Credentials go to the host they belong to only: a registry's to its
// registry (and the token service its challenge names, as every
// registry client sends them), a chart repository's to its scheme and
// host; never after a redirect to another host, never to a host the
// network policy refuses (every request is checked before it is sent).
// They are never printed: errors name where they came from, not what
// they are.
type Auth struct {
	// RegistryConfig is Helm's registry configuration, the Docker
	// config.json `helm registry login` writes (its credential helpers
	// included); "" or a missing file: none.
	RegistryConfig string
	// RepositoryConfig is Helm's repositories.yaml (`helm repo add`'s),
	// whose entries give HTTP chart repositories a username and
	// password; "" or a missing file: none.
	RepositoryConfig string
	// Docker looks registries up after RegistryConfig, as helm does:
	// Docker's config and its credential helpers; nil: not.
	Docker authn.Keychain

	once  sync.Once
	repos []repoEntry
	err   error
}

// Standard is the Auth of the standard places, found as helm finds them
// (helm v3.22.0 pkg/cli/environment.go): $HELM_REGISTRY_CONFIG, by
// default registry/config.json under Helm's configuration home
// (~/.config/helm, $HELM_CONFIG_HOME or $XDG_CONFIG_HOME; helmpath), and
// $HELM_REPOSITORY_CONFIG, by default repositories.yaml there; then, as
// Helm's registry client falls back to it (pkg/registry/client.go,
// NewStoreWithFallbacks), Docker's config: go-containerregistry's
// authn.DefaultKeychain ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json, with its credential helpers; else Podman's
// auth.json).
func Standard(getenv func(string) string) *Auth {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	return &Auth{
		RegistryConfig:   or("HELM_REGISTRY_CONFIG", helmpath.ConfigPath("registry/config.json")),
		RepositoryConfig: or("HELM_REPOSITORY_CONFIG", helmpath.ConfigPath("repositories.yaml")),
		Docker:           authn.DefaultKeychain,
	}
}

// Registry returns the authenticator for registry (host[:port]) and
// where it comes from ("" and authn.Anonymous when nowhere).
func (a *Auth) Registry(ctx context.Context, registry authn.Resource) (authn.Authenticator, string, error) {
	if a == nil {
		return authn.Anonymous, "", nil
	}
	if a.RegistryConfig != "" {
		data, err := os.ReadFile(a.RegistryConfig)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, "", fmt.Errorf("Helm's registry config %s: %w", a.RegistryConfig, err)
		default:
			cf, err := config.LoadFromReader(bytes.NewReader(data))
			if err != nil {
				return nil, "", fmt.Errorf("Helm's registry config %s cannot be read as a Docker config.json", a.RegistryConfig)
			}
			ac, err := cf.GetAuthConfig(registry.RegistryStr())
			if err != nil {
				return nil, "", fmt.Errorf("Helm's registry config %s: the credentials of %s: %w", a.RegistryConfig, registry.RegistryStr(), err)
			}
			if !empty(ac) {
				return authn.FromConfig(authn.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth,
					IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken}), "Helm's registry config (" + a.RegistryConfig + ")", nil
			}
		}
	}
	if a.Docker != nil {
		au, err := authn.Resolve(ctx, a.Docker, registry)
		if err != nil {
			return nil, "", fmt.Errorf("Docker's config: the credentials of %s: %w", registry.RegistryStr(), err)
		}
		if au != authn.Anonymous {
			return au, "Docker's config", nil
		}
	}
	return authn.Anonymous, "", nil
}

func empty(ac types.AuthConfig) bool {
	return ac.Username == "" && ac.Password == "" && ac.Auth == "" && ac.IdentityToken == "" && ac.RegistryToken == ""
}

// RepoCredentials are an HTTP chart repository's username and password,
// and its TLS settings.
type RepoCredentials struct {
	Username, Password string
	From               string // where they come from, for messages
	// TLS is the client configuration its caFile, certFile, keyFile and
	// insecure_skip_tls_verify make; nil when it sets none.
	TLS *tls.Config
}

// repoEntry is an entry of Helm's repositories.yaml (helm v3.22.0
// pkg/repo/chartrepo.go Entry), as far as kplan reads it.
type repoEntry struct {
	Name                  string `json:"name"`
	URL                   string `json:"url"`
	Username              string `json:"username"`
	Password              string `json:"password"`
	CAFile                string `json:"caFile"`
	CertFile              string `json:"certFile"`
	KeyFile               string `json:"keyFile"`
	InsecureSkipTLSVerify bool   `json:"insecure_skip_tls_verify"`
}

// tlsConfig is the TLS client configuration an entry sets, nil when it
// sets none, made as Helm makes it for its HTTP getter (helm v3.22.0
// internal/tlsutil/tls.go:28 NewClientTLS: the key pair when both files
// are named, the CA file as the only roots).
func (e repoEntry) tlsConfig() (*tls.Config, error) {
	if e.CAFile == "" && e.CertFile == "" && e.KeyFile == "" && !e.InsecureSkipTLSVerify {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: e.InsecureSkipTLSVerify} //nolint:gosec // as the user's repositories.yaml says
	if e.CertFile != "" && e.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("repository %s: cannot load the key pair of certFile %s and keyFile %s: %w", e.Name, e.CertFile, e.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if e.CAFile != "" {
		data, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("repository %s: cannot read caFile %s: %w", e.Name, e.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("repository %s: caFile %s holds no PEM certificate", e.Name, e.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// parseRepositories reads a repositories.yaml. Its error never quotes
// the file: a YAML error may quote a value, and values are passwords.
func parseRepositories(data []byte) ([]repoEntry, error) {
	var f struct {
		Repositories []repoEntry `json:"repositories"`
	}
	if err := sigsyaml.Unmarshal(data, &f); err != nil {
		return nil, errors.New("cannot be read as Helm's repositories.yaml")
	}
	return f.Repositories, nil
}

// Repository returns the credentials Helm's repositories.yaml gives the
// chart repository at repoURL (an entry with that URL, a trailing slash
// aside), nil when none.
func (a *Auth) Repository(repoURL string) (*RepoCredentials, error) {
	if a == nil || a.RepositoryConfig == "" {
		return nil, nil
	}
	a.once.Do(func() {
		data, err := os.ReadFile(a.RepositoryConfig)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			a.err = fmt.Errorf("Helm's repositories file %s: %w", a.RepositoryConfig, err)
		default:
			a.repos, a.err = parseRepositories(data)
			if a.err != nil {
				a.err = fmt.Errorf("Helm's repositories file %s %w", a.RepositoryConfig, a.err)
			}
		}
	})
	if a.err != nil {
		return nil, a.err
	}
	want := strings.TrimSuffix(repoURL, "/")
	for _, e := range a.repos {
		if strings.TrimSuffix(e.URL, "/") != want {
			continue
		}
		cfg, err := e.tlsConfig()
		if err != nil {
			return nil, fmt.Errorf("Helm's repositories file %s: %w", a.RepositoryConfig, err)
		}
		if e.Username == "" && e.Password == "" && cfg == nil {
			continue
		}
		return &RepoCredentials{Username: e.Username, Password: e.Password, TLS: cfg,
			From: fmt.Sprintf("Helm's repositories file (%s, repository %s)", a.RepositoryConfig, e.Name)}, nil
	}
	return nil, nil
}

// AuthError is a 401 or 403 from a chart repository or registry: what
// was refused, and where the credentials sent came from ("" when none
// were), never what they are.
type AuthError struct {
	URL        string // what was asked, redacted
	Status     string // "401 Unauthorized"
	From       string // where the credentials sent came from; "" none
	Repository string // the chart repository's URL, for an HTTP one
	Registry   string // the registry's host, for an OCI one
	Detail     string // what the registry said, if anything
}

func (e *AuthError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fetch %s: %s", e.URL, e.Status)
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	switch {
	case e.From != "":
		fmt.Fprintf(&b, ": the credentials from %s are refused", e.From)
	case e.Registry != "":
		fmt.Fprintf(&b, ": kplan found no credentials for %s: log in with `helm registry login %s` or `docker login %s` (HELM_REGISTRY_CONFIG, DOCKER_CONFIG) where kplan runs", e.Registry, e.Registry, e.Registry)
	default:
		fmt.Fprintf(&b, ": kplan found no credentials for %s: add them to Helm's repositories file (`helm repo add NAME %s --username … --password-stdin`, HELM_REPOSITORY_CONFIG) where kplan runs", e.Repository, e.Repository)
	}
	return b.String()
}
