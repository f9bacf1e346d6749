package charts

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kplan-dev/kplan/internal/chartindex"
	"github.com/kplan-dev/kplan/internal/netpolicy"
)

// fromIndex fetches the chart ref names from the HTTP chart repository
// ref.Repo, as `helm pull --repo` and source-controller's HelmChart do:
// the index picks the version (chartindex: Helm's rules), the archive is
// checked against the index's digest. An exact version already cached
// needs no fetch.
func (f *Fetcher) fromIndex(ctx context.Context, ref Ref) (*Chart, error) {
	repoURL := strings.TrimSuffix(ref.Repo, "/")
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(ref.Version, "v")); err == nil {
		if data, ok := f.cached(key("index", repoURL, ref.Name, v.String())); ok {
			return &Chart{Archive: data, Version: v.String()}, nil
		}
	}
	base, err := url.Parse(repoURL + "/")
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("the repository URL %q is not http(s)", redact(ref.Repo))
	}
	c, err := f.repoClient(base)
	if err != nil {
		return nil, err
	}
	data, err := f.index(ctx, c, base.JoinPath("index.yaml"))
	if err != nil {
		return nil, err
	}
	ix, err := chartindex.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", netpolicy.Redact(base.JoinPath("index.yaml")), err)
	}
	e, err := ix.Pick(ref.Name, ref.Version, ref.Devel)
	if err != nil {
		return nil, err
	}
	k := key("index", repoURL, ref.Name, e.Version)
	if got, ok := f.cached(k); ok && (e.Digest == "" || digestOf(got) == e.Digest) {
		return &Chart{Archive: got, Version: e.Version}, nil
	}
	if len(e.URLs) == 0 {
		return nil, fmt.Errorf("the index lists no URL for %s %s", ref.Name, e.Version)
	}
	u, err := url.Parse(e.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart URL %q: %w", e.URLs[0], err)
	}
	u = base.ResolveReference(u)
	tgz, err := c.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if e.Digest != "" && digestOf(tgz) != e.Digest {
		return nil, fmt.Errorf("%s: the archive's digest is not the index's (%s)", netpolicy.Redact(u), e.Digest)
	}
	f.store(k, tgz)
	return &Chart{Archive: tgz, Version: e.Version}, nil
}

// index fetches a repository's index.yaml once for the Fetcher's life (a
// plan's): both sides of a plan, and every overlay, release or
// Application taking charts from the repository, pick versions from the
// same index.
func (f *Fetcher) index(ctx context.Context, c *repoClient, u *url.URL) ([]byte, error) {
	f.mu.Lock()
	if f.indexes == nil {
		f.indexes = map[string]*fetched{}
	}
	id := u.String()
	x, ok := f.indexes[id]
	if !ok {
		x = &fetched{}
		f.indexes[id] = x
	}
	f.mu.Unlock()
	x.once.Do(func() { x.data, x.err = c.get(ctx, u) })
	return x.data, x.err
}

// repoClient fetches from one chart repository: through the network
// policy, with the repository's credentials (Auth.Repository) on the
// requests to its own scheme and host only — as Helm's getter sends
// them (helm v3.22.0 pkg/getter/httpgetter.go: the credentials go when
// scheme and host, port included, are the repository URL's), without
// its pass_credentials_all: a redirect or an archive URL on another host
// gets none.
type repoClient struct {
	f      *Fetcher
	client *http.Client
	base   *url.URL
	creds  *RepoCredentials // nil: anonymous
}

func (f *Fetcher) repoClient(base *url.URL) (*repoClient, error) {
	c := &repoClient{f: f, base: base}
	if f.policy == nil {
		return c, nil
	}
	if f.auth != nil {
		creds, err := f.auth.Repository(base.String())
		if err != nil {
			return nil, err
		}
		c.creds = creds
	}
	var tlsCfg *tls.Config
	if c.creds != nil {
		tlsCfg = c.creds.TLS
	}
	c.client = &http.Client{Transport: &basicAuth{base: f.policy.TLSTransport(tlsCfg), scheme: base.Scheme, host: base.Host, creds: c.creds},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return fmt.Errorf("fetch %s: more than 10 redirects", netpolicy.Redact(via[0].URL))
			}
			return nil
		}}
	return c, nil
}

// get is a GET of u: its body, within the Fetcher's limit; an error for
// an answer other than 2xx, saying how to give credentials for a 401 or
// 403.
func (c *repoClient) get(ctx context.Context, u *url.URL) ([]byte, error) {
	if c.client == nil {
		return nil, noPolicy(netpolicy.Redact(u))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", netpolicy.Redact(u), err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var refused *netpolicy.RefusedError
		if errors.As(err, &refused) {
			if refused.URL != netpolicy.Redact(u) {
				return nil, fmt.Errorf("fetch %s: redirected: %w", netpolicy.Redact(u), refused)
			}
			return nil, refused
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL is u's or a redirect's: named below, redacted
		}
		return nil, fmt.Errorf("fetch %s: %w", netpolicy.Redact(u), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.f.max+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", netpolicy.Redact(u), err)
	}
	if int64(len(data)) > c.f.max {
		return nil, &TooLargeError{URL: netpolicy.Redact(u), Limit: c.f.max}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, &AuthError{URL: netpolicy.Redact(resp.Request.URL), Status: resp.Status, From: c.from(resp.Request.URL), Repository: strings.TrimSuffix(netpolicy.Redact(c.base), "/")}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("fetch %s: %s", netpolicy.Redact(resp.Request.URL), resp.Status)
	}
	return data, nil
}

// from names where the credentials sent to u came from, "" if none were.
func (c *repoClient) from(u *url.URL) string {
	if c.creds == nil || u.Scheme != c.base.Scheme || u.Host != c.base.Host {
		return ""
	}
	return c.creds.From
}

// redact drops the user information of a URL given as text.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return netpolicy.Redact(u)
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// basicAuth adds a repository's credentials to the requests for its own
// scheme and host.
type basicAuth struct {
	base         http.RoundTripper
	scheme, host string
	creds        *RepoCredentials
}

func (b *basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.creds != nil && (b.creds.Username != "" || b.creds.Password != "") && req.URL.Scheme == b.scheme && req.URL.Host == b.host {
		req = req.Clone(req.Context())
		req.SetBasicAuth(b.creds.Username, b.creds.Password)
	}
	return b.base.RoundTrip(req)
}
