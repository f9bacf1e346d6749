package ghauth

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"golang.org/x/sync/singleflight"
)

// App mints installation tokens of a GitHub App. With an installation ID
// it acts as that installation for every repository; without one it looks
// up each repository's installation (GET /repos/{owner}/{repo}/installation,
// authenticated as the App with a JWT) and remembers it. Each
// installation's token is reused until a minute before it expires, then
// minted again (ghinstallation does this).
type App struct {
	appID          int64
	key            *rsa.PrivateKey
	installationID int64
	baseURL        string // without a trailing slash: https://api.github.com, https://ghe.example.com/api/v3
	client         *http.Client

	mu            sync.Mutex
	lookups       singleflight.Group // concurrent first calls for a repository share one look-up
	installations map[string]int64   // lower-case owner/name -> installation ID
	transports    map[int64]*ghinstallation.Transport
	limited       map[int64]time.Time // no mint for the installation before then: GitHub's Retry-After
}

// MaxMintWait is the longest Token waits for a rate limit GitHub put on
// minting (Retry-After, or the reset of an exhausted limit) before it
// tries again; a longer one fails the call at once, and every call until
// then, without asking GitHub.
const MaxMintWait = time.Minute

// Timeout bounds each request the App makes to look up an installation
// or mint a token.
const Timeout = 30 * time.Second

// NewApp makes an App source. privateKeyPEM is the key GitHub generated
// for the App (PKCS#1 or PKCS#8); installationID 0 looks installations up
// per repository. apiBaseURL is the REST API's base URL (GitHub Enterprise:
// https://HOST/api/v3/). tr carries the requests (nil: http.DefaultTransport).
func NewApp(appID int64, privateKeyPEM []byte, installationID int64, apiBaseURL string, tr http.RoundTripper) (*App, error) {
	key, err := parseKey(privateKeyPEM)
	if err != nil {
		return nil, err
	}
	if tr == nil {
		tr = http.DefaultTransport
	}
	if _, err := url.Parse(apiBaseURL); err != nil {
		return nil, fmt.Errorf("GitHub API base URL: %w", err)
	}
	return &App{appID: appID, key: key, installationID: installationID,
		baseURL: strings.TrimRight(apiBaseURL, "/"), client: &http.Client{Transport: tr, Timeout: Timeout},
		installations: map[string]int64{}, transports: map[int64]*ghinstallation.Transport{}, limited: map[int64]time.Time{}}, nil
}

// parseKey reads an RSA private key; errors never show the key.
func parseKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(trimNewline(data))
	if block == nil {
		return nil, errors.New("GitHub App private key: not PEM (want the .pem file GitHub generated for the App)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("GitHub App private key: not an RSA private key (%s block)", block.Type)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("GitHub App private key: %T, not RSA", k)
	}
	return rk, nil
}

// Token returns an installation token for repo, minting one when there is
// none or it expires within a minute.
func (a *App) Token(ctx context.Context, repo string) (string, error) {
	id, looked, err := a.installation(ctx, repo)
	if err != nil {
		return "", err
	}
	token, err := a.mint(ctx, id)
	if err != nil {
		if looked {
			// The App may have been uninstalled and installed again: look
			// the installation up anew next time.
			a.mu.Lock()
			delete(a.installations, strings.ToLower(repo))
			a.mu.Unlock()
		}
		return "", fmt.Errorf("GitHub App %d: mint a token for installation %d: %w", a.appID, id, mintError(err))
	}
	return token, nil
}

// mint returns the installation's token, minting one if needed; a mint
// GitHub rate-limits (403 or 429) is tried again after the wait GitHub
// asked for, up to MaxMintWait, and not before.
func (a *App) mint(ctx context.Context, id int64) (string, error) {
	var waited time.Duration
	for {
		a.mu.Lock()
		wait := time.Until(a.limited[id])
		a.mu.Unlock()
		if waited += max(wait, 0); waited > MaxMintWait {
			return "", fmt.Errorf("GitHub rate-limits minting tokens for this installation for %s more (Retry-After); not asking before then", wait.Round(time.Second))
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.C:
			}
		}
		token, err := a.transport(id).Token(ctx)
		limit, ok := mintLimit(err, time.Now())
		if !ok {
			return token, err
		}
		a.mu.Lock()
		a.limited[id] = time.Now().Add(limit)
		a.mu.Unlock()
	}
}

// mintLimit says whether err is GitHub rate-limiting a mint, and for how
// long: Retry-After (a secondary limit, 403 or 429), else the reset time
// of an exhausted primary limit, else a minute as GitHub's documentation
// asks. It closes the response's body then.
func mintLimit(err error, now time.Time) (time.Duration, bool) {
	var he *ghinstallation.HTTPError
	if !errors.As(err, &he) || he.Response == nil {
		return 0, false
	}
	resp := he.Response
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusForbidden {
		return 0, false
	}
	wait := time.Duration(-1)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		wait = time.Duration(s) * time.Second
	} else if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			wait = time.Unix(reset, 0).Sub(now) + time.Second // whole seconds: one more is past it
		}
	}
	if wait < 0 {
		if resp.StatusCode == http.StatusForbidden {
			return 0, false // a refusal, not a limit: mintError says why
		}
		wait = time.Minute
	}
	resp.Body.Close()
	return max(wait, time.Second), true
}

// Refused drops the token GitHub answered 401 to for repo, if it is
// still the installation's current one: the next Token mints a fresh one
// (the token may have been revoked, or the App's key rotated, before the
// expiry ghinstallation keeps it until).
func (a *App) Refused(ctx context.Context, repo, token string) {
	id := a.installationID
	if id == 0 {
		a.mu.Lock()
		id = a.installations[strings.ToLower(repo)]
		a.mu.Unlock()
	}
	a.mu.Lock()
	t, ok := a.transports[id]
	a.mu.Unlock()
	if !ok {
		return
	}
	// The current token is cached: Token asks GitHub nothing here.
	if cur, err := t.Token(ctx); err != nil || cur != token {
		return
	}
	a.mu.Lock()
	if a.transports[id] == t {
		delete(a.transports, id)
	}
	a.mu.Unlock()
}

// mintError says why GitHub refused a token, with its message, without
// the request's URL.
func mintError(err error) error {
	var he *ghinstallation.HTTPError
	if !errors.As(err, &he) {
		return err
	}
	if he.Response == nil {
		if he.RootCause != nil {
			return he.RootCause
		}
		return err
	}
	defer he.Response.Body.Close()
	return fmt.Errorf("HTTP %d%s", he.Response.StatusCode, messageOf(he.Response.Body))
}

// installation returns the installation to act as for repo, and whether
// it was looked up.
func (a *App) installation(ctx context.Context, repo string) (int64, bool, error) {
	if a.installationID != 0 {
		return a.installationID, false, nil
	}
	if repo == "" {
		return 0, false, errNoRepo
	}
	key := strings.ToLower(repo)
	a.mu.Lock()
	id, ok := a.installations[key]
	a.mu.Unlock()
	if ok {
		return id, true, nil
	}
	v, err, _ := a.lookups.Do(key, func() (any, error) {
		id, err := a.lookup(ctx, repo)
		if err == nil {
			a.mu.Lock()
			a.installations[key] = id
			a.mu.Unlock()
		}
		return id, err
	})
	if err != nil {
		return 0, false, err
	}
	return v.(int64), true, nil
}

// lookup asks GitHub which installation of the App covers repo.
func (a *App) lookup(ctx context.Context, repo string) (int64, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return 0, fmt.Errorf("GitHub App: %q is not owner/name", repo)
	}
	u := a.baseURL + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/installation"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	jwt := ghinstallation.NewAppsTransportFromPrivateKey(a.client.Transport, a.appID, a.key)
	c := &http.Client{Transport: jwt, Timeout: a.client.Timeout}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GitHub App %d: look up the installation for %s: %w", a.appID, repo, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, fmt.Errorf("GitHub App %d is not installed on %s (GET /repos/%s/installation: 404): install it on the repository, or set KPLAN_GITHUB_APP_INSTALLATION_ID", a.appID, repo, repo)
	case resp.StatusCode/100 != 2:
		return 0, fmt.Errorf("GitHub App %d: look up the installation for %s: HTTP %d%s", a.appID, repo, resp.StatusCode, messageOf(resp.Body))
	}
	var inst struct {
		ID int64 `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&inst); err != nil || inst.ID <= 0 {
		return 0, fmt.Errorf("GitHub App %d: look up the installation for %s: no installation ID in the answer", a.appID, repo)
	}
	return inst.ID, nil
}

// messageOf reads GitHub's error message, if the body has one.
func messageOf(r io.Reader) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&e) != nil || e.Message == "" {
		return ""
	}
	m := e.Message
	if len(m) > 200 {
		m = m[:200] + "…"
	}
	return " (" + m + ")"
}

// transport returns the installation's token minter, one per installation
// for the life of the App (each holds its current token).
func (a *App) transport(id int64) *ghinstallation.Transport {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.transports[id]
	if !ok {
		// One AppsTransport each: ghinstallation sets its BaseURL and
		// Client on every refresh, so sharing one would race.
		atr := ghinstallation.NewAppsTransportFromPrivateKey(a.client.Transport, a.appID, a.key)
		t = ghinstallation.NewFromAppsTransport(atr, id)
		t.BaseURL = a.baseURL
		t.Client = a.client
		a.transports[id] = t
	}
	return t
}
